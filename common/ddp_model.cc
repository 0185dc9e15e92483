#include "common/ddp_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace benchd {
namespace {

struct Call {
  double ready = 0;  // when every gradient it carries is final
  int64_t bytes = 0;
};

// The calls, one after another on one stream, each no earlier than ready:
// how far the last one ends past the backward.
double Replay(std::vector<Call> calls, double backward_seconds, const AllReduceFit& fit) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const Call& a, const Call& b) { return a.ready < b.ready; });
  double free = 0;
  for (const Call& c : calls) free = std::max(free, c.ready) + fit.Seconds(c.bytes);
  return std::max(0.0, free - backward_seconds);
}

double ReadyOf(const BackwardTiming& b, size_t i) {
  return i < b.param_ready_seconds.size() ? b.param_ready_seconds[i] : b.backward_seconds;
}

constexpr double kMb = 1e6;

}  // namespace

std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& param_bytes,
                                               int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = param_bytes.size(); i-- > 0;) {
    if (buckets.empty() || (filled + param_bytes[i] > bucket_bytes && !buckets.back().empty())) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += param_bytes[i];
  }
  return buckets;
}

std::vector<std::vector<size_t>> ReducerBuckets(const std::vector<int64_t>& param_bytes,
                                                const std::vector<size_t>& ready_order,
                                                int64_t bucket_bytes) {
  constexpr int64_t kFirstBucketBytes = 1 << 20;  // DDP's _DEFAULT_FIRST_BUCKET_BYTES
  std::vector<std::vector<size_t>> buckets(1);
  int64_t filled = 0;
  for (size_t i : ready_order) {
    buckets.back().push_back(i);
    filled += param_bytes[i];
    const int64_t limit =
        buckets.size() == 1 ? std::min(kFirstBucketBytes, bucket_bytes) : bucket_bytes;
    if (filled >= limit) {
      buckets.emplace_back();
      filled = 0;
    }
  }
  if (buckets.back().empty()) buckets.pop_back();
  return buckets;
}

absl::StatusOr<AllReduceFit> FitAllReduce(const std::vector<int64_t>& bytes,
                                          const std::vector<double>& seconds) {
  if (bytes.size() != seconds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the sweep has ", bytes.size(), " sizes and ", seconds.size(), " times"));
  }
  if (std::any_of(seconds.begin(), seconds.end(), [](double t) { return !(t > 0); })) {
    return absl::InvalidArgumentError("the sweep has a time <= 0");
  }
  if (bytes.size() < 2 || *std::min_element(bytes.begin(), bytes.end()) ==
                              *std::max_element(bytes.begin(), bytes.end())) {
    return absl::InvalidArgumentError("the sweep needs at least two distinct sizes");
  }
  // Normal equations of sum u (t - o - s b)^2, u = 1 / t^2, b = 1 / w.
  double su = 0, sus = 0, suss = 0, sut = 0, sust = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double s = static_cast<double>(bytes[i]), t = seconds[i], u = 1 / (t * t);
    su += u;
    sus += u * s;
    suss += u * s * s;
    sut += u * t;
    sust += u * s * t;
  }
  const double det = su * suss - sus * sus;
  double o = (sut * suss - sus * sust) / det;
  double b = (su * sust - sus * sut) / det;
  if (o < 0) {  // the best fit through the origin instead
    o = 0;
    b = sust / suss;
  }
  if (!(b > 0)) {
    return absl::FailedPreconditionError(
        "the sweep's times do not grow with size: no bandwidth to fit (a sweep too small "
        "for this group's noise)");
  }
  return AllReduceFit{o, 1 / b};
}

double PredictExposedSeconds(v1::DdpVariant variant, int64_t bucket_bytes, const BackwardTiming& b,
                             const AllReduceFit& fit) {
  std::vector<Call> calls;
  const size_t n = b.param_bytes.size();
  auto bucket_calls = [&](const std::vector<std::vector<size_t>>& buckets) {
    for (const auto& bucket : buckets) {
      Call c;
      for (size_t i : bucket) {
        c.ready = std::max(c.ready, ReadyOf(b, i));
        c.bytes += b.param_bytes[i];
      }
      calls.push_back(c);
    }
  };
  switch (variant) {
    case v1::DDP_VARIANT_NAIVE:
      for (size_t i = 0; i < n; ++i) calls.push_back({b.backward_seconds, b.param_bytes[i]});
      break;
    case v1::DDP_VARIANT_FLAT:
      calls.push_back({b.backward_seconds,
                       std::accumulate(b.param_bytes.begin(), b.param_bytes.end(), int64_t{0})});
      break;
    case v1::DDP_VARIANT_OVERLAP:
      // Final from the back, launched in that order.
      for (size_t i = n; i-- > 0;) calls.push_back({ReadyOf(b, i), b.param_bytes[i]});
      break;
    case v1::DDP_VARIANT_BUCKETED:
      bucket_calls(AssignBuckets(b.param_bytes, bucket_bytes));
      break;
    case v1::DDP_VARIANT_REDUCER: {
      // The order the gradients became final; ties from the back.
      std::vector<size_t> order(n);
      for (size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return ReadyOf(b, x) < ReadyOf(b, y); });
      bucket_calls(ReducerBuckets(b.param_bytes, order, bucket_bytes));
      break;
    }
    default:
      return 0;
  }
  return Replay(std::move(calls), b.backward_seconds, fit);
}

BestBucket PredictBestBucket(const BackwardTiming& b, const AllReduceFit& fit) {
  const int64_t total = std::accumulate(b.param_bytes.begin(), b.param_bytes.end(), int64_t{0});
  std::vector<std::pair<double, double>> grid;  // (bytes, exposed)
  constexpr int kPoints = 96;
  const double lo = std::log(1e3), hi = std::log(std::max<double>(total, 1e3));
  for (int k = 0; k <= kPoints; ++k) {
    const double bytes = std::exp(lo + (hi - lo) * k / kPoints);
    grid.push_back({bytes, PredictExposedSeconds(v1::DDP_VARIANT_BUCKETED,
                                                 static_cast<int64_t>(bytes), b, fit)});
  }
  double best = grid[0].second;
  for (const auto& [bytes, exposed] : grid) best = std::min(best, exposed);
  // Sizes within 1% (or 10 us) of the best are as good as it: the largest
  // of them, as it makes the fewest calls (and so is the least hurt by an
  // overhead the sweep underrates).
  const double slack = std::max(0.01 * best, 1e-5);
  double chosen = 0;
  for (const auto& [bytes, exposed] : grid) {
    if (exposed <= best + slack) chosen = bytes;
  }
  return {chosen / kMb, best};
}

absl::StatusOr<v1::DdpOverheadModel> MakeOverheadModel(const BackwardTiming& backward,
                                                       const std::vector<int64_t>& sweep_bytes,
                                                       const std::vector<double>& sweep_seconds) {
  v1::DdpOverheadModel model;
  model.set_formula(
      "all_reduce(s bytes) = o + s / w, fitted to the sweep; each variant's calls replayed on one "
      "stream, a call starting when its gradients are final (compute-only backward) and the "
      "previous call has ended; exposed = max(0, last call's end - backward's end)");
  for (int64_t b : sweep_bytes) model.add_sweep_bytes(b);
  for (double t : sweep_seconds) model.add_sweep_seconds(t);
  model.set_backward_seconds(backward.backward_seconds);
  model.set_gradient_bytes(
      std::accumulate(backward.param_bytes.begin(), backward.param_bytes.end(), int64_t{0}));
  auto fit = FitAllReduce(sweep_bytes, sweep_seconds);
  if (!fit.ok()) return fit.status();
  model.set_per_call_seconds(fit->per_call_seconds);
  model.set_bandwidth_bytes_per_second(fit->bandwidth);
  const BestBucket best = PredictBestBucket(backward, *fit);
  model.set_predicted_best_bucket_mb(best.bucket_mb);
  model.set_predicted_best_exposed_seconds(best.exposed_seconds);
  return model;
}

void PredictRow(const BackwardTiming& backward, const v1::DdpOverheadModel& model,
                v1::DdpRow* row) {
  if (row->variant() == v1::DDP_VARIANT_UNSPECIFIED ||
      row->optimizer() != v1::DDP_OPTIMIZER_ADAMW || !(model.bandwidth_bytes_per_second() > 0)) {
    return;
  }
  const AllReduceFit fit{model.per_call_seconds(), model.bandwidth_bytes_per_second()};
  row->set_predicted_exposed_comm_seconds(PredictExposedSeconds(
      row->variant(), static_cast<int64_t>(row->bucket_mb() * kMb), backward, fit));
}

void CompareBestBucket(v1::DdpResult* result) {
  const v1::DdpRow* best = nullptr;
  for (const v1::DdpRow& row : result->rows()) {
    if (row.variant() != v1::DDP_VARIANT_BUCKETED || row.optimizer() != v1::DDP_OPTIMIZER_ADAMW) {
      continue;
    }
    if (!best || row.step().median() < best->step().median()) best = &row;
  }
  if (!best || !result->has_overhead_model()) return;
  v1::DdpOverheadModel* model = result->mutable_overhead_model();
  model->set_measured_best_bucket_mb(best->bucket_mb());
  if (best->bucket_mb() > 0 && model->predicted_best_bucket_mb() > 0) {
    model->set_best_bucket_ratio(model->predicted_best_bucket_mb() / best->bucket_mb());
  }
}

}  // namespace benchd
