#include "common/collective_math.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/stats.h"

namespace benchd {

std::string CollectiveOpName(v1::CollectiveOp op) {
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return "all_reduce";
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return "all_gather";
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      return "reduce_scatter";
    case v1::COLLECTIVE_OP_BROADCAST:
      return "broadcast";
    case v1::COLLECTIVE_OP_ALL_TO_ALL:
      return "all_to_all";
    default:
      return "";
  }
}

absl::StatusOr<v1::CollectiveOp> ParseCollectiveOp(const std::string& text) {
  std::string t = absl::AsciiStrToLower(text);
  t = absl::StrReplaceAll(t, {{"-", ""}, {"_", ""}});
  if (t == "allreduce") return v1::COLLECTIVE_OP_ALL_REDUCE;
  if (t == "allgather") return v1::COLLECTIVE_OP_ALL_GATHER;
  if (t == "reducescatter") return v1::COLLECTIVE_OP_REDUCE_SCATTER;
  if (t == "broadcast") return v1::COLLECTIVE_OP_BROADCAST;
  if (t == "alltoall") return v1::COLLECTIVE_OP_ALL_TO_ALL;
  return absl::InvalidArgumentError(
      absl::StrCat("collective.op: unknown operation '", text,
                   "'; expected all_reduce, all_gather, reduce_scatter, broadcast or all_to_all"));
}

std::string BackendName(v1::CollectiveBackend backend) {
  switch (backend) {
    case v1::COLLECTIVE_BACKEND_NCCL:
      return "nccl";
    case v1::COLLECTIVE_BACKEND_GLOO:
      return "gloo";
    default:
      return "";
  }
}

absl::StatusOr<v1::CollectiveBackend> ParseBackend(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "nccl") return v1::COLLECTIVE_BACKEND_NCCL;
  if (t == "gloo") return v1::COLLECTIVE_BACKEND_GLOO;
  return absl::InvalidArgumentError(
      absl::StrCat("backend: unknown backend '", text, "'; expected nccl or gloo"));
}

std::string DtypeName(v1::CollectiveDtype dtype) {
  switch (dtype) {
    case v1::COLLECTIVE_DTYPE_FP32:
      return "fp32";
    case v1::COLLECTIVE_DTYPE_FP16:
      return "fp16";
    case v1::COLLECTIVE_DTYPE_BF16:
      return "bf16";
    case v1::COLLECTIVE_DTYPE_FP64:
      return "fp64";
    case v1::COLLECTIVE_DTYPE_INT32:
      return "int32";
    default:
      return "";
  }
}

absl::StatusOr<v1::CollectiveDtype> ParseDtype(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "fp32" || t == "float32" || t == "float") return v1::COLLECTIVE_DTYPE_FP32;
  if (t == "fp16" || t == "float16" || t == "half") return v1::COLLECTIVE_DTYPE_FP16;
  if (t == "bf16" || t == "bfloat16") return v1::COLLECTIVE_DTYPE_BF16;
  if (t == "fp64" || t == "float64" || t == "double") return v1::COLLECTIVE_DTYPE_FP64;
  if (t == "int32" || t == "int") return v1::COLLECTIVE_DTYPE_INT32;
  return absl::InvalidArgumentError(absl::StrCat("collective.dtype: unknown dtype '", text,
                                                 "'; expected fp32, fp16, bf16, fp64 or int32"));
}

int64_t DtypeBytes(v1::CollectiveDtype dtype) {
  switch (dtype) {
    case v1::COLLECTIVE_DTYPE_FP16:
    case v1::COLLECTIVE_DTYPE_BF16:
      return 2;
    case v1::COLLECTIVE_DTYPE_FP64:
      return 8;
    default:
      return 4;
  }
}

absl::StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& field) {
  std::string t = absl::StrReplaceAll(text, {{" ", ""}});
  size_t digits = 0;
  while (digits < t.size() &&
         (std::isdigit(static_cast<unsigned char>(t[digits])) || t[digits] == '.')) {
    ++digits;
  }
  const std::string number = t.substr(0, digits);
  const std::string unit = absl::AsciiStrToLower(t.substr(digits));
  double value = 0;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": '", text,
        "' is not a size; expected bytes with an optional unit, e.g. 4096, "
        "64KiB, 1MiB, 1GiB (KiB/MiB/GiB = 2^10/2^20/2^30; KB/MB/GB = 10^3/10^6/10^9)"));
  };
  if (number.empty() || !absl::SimpleAtod(number, &value)) return bad();
  double scale = 1;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else
    return bad();
  const double bytes = value * scale;
  if (bytes > 9e18 || bytes != std::floor(bytes)) return bad();
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  const struct {
    int64_t unit;
    const char* name;
  } units[] = {{int64_t{1} << 30, "GiB"}, {int64_t{1} << 20, "MiB"}, {int64_t{1} << 10, "KiB"}};
  for (const auto& u : units) {
    if (bytes >= u.unit) {
      if (bytes % u.unit == 0) return absl::StrCat(bytes / u.unit, " ", u.name);
      return absl::StrFormat("%.2f %s", static_cast<double>(bytes) / u.unit, u.name);
    }
  }
  return absl::StrCat(bytes, " B");
}

std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  std::vector<int64_t> out;
  if (min_bytes <= 0 || factor < 2) return out;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    out.push_back(s);
    if (s > max_bytes / factor) break;  // the next one would pass max (or overflow)
  }
  return out;
}

CollectiveShape ShapeFor(v1::CollectiveOp op, int64_t size_bytes, int64_t element_bytes,
                         int world) {
  CollectiveShape shape;
  const int64_t total = std::max<int64_t>(1, size_bytes / element_bytes);
  const int64_t per_rank = std::max<int64_t>(1, total / std::max(1, world));
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_GATHER:
      shape.count = per_rank;
      shape.output_count = per_rank * world;
      shape.size_bytes = shape.output_count * element_bytes;
      break;
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      shape.count = per_rank * world;
      shape.output_count = per_rank;
      shape.size_bytes = shape.count * element_bytes;
      break;
    case v1::COLLECTIVE_OP_ALL_TO_ALL:
      shape.count = per_rank * world;
      shape.output_count = shape.count;
      shape.size_bytes = shape.count * element_bytes;
      break;
    default:  // all_reduce, broadcast
      shape.count = total;
      shape.output_count = total;
      shape.size_bytes = total * element_bytes;
  }
  return shape;
}

double BusBandwidthFactor(v1::CollectiveOp op, int world) {
  const double n = world;
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return 2.0 * (n - 1) / n;
    case v1::COLLECTIVE_OP_ALL_GATHER:
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
    case v1::COLLECTIVE_OP_ALL_TO_ALL:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

absl::StatusOr<std::vector<double>> SlowestRankPerIteration(
    const std::vector<std::vector<double>>& per_rank) {
  if (per_rank.empty()) return absl::InvalidArgumentError("no rank reported any iteration");
  const size_t n = per_rank.front().size();
  std::vector<double> out(n, 0.0);
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " reported ", per_rank[r].size(), " iterations, rank 0 ", n));
    }
    for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], per_rank[r][i]);
  }
  return out;
}

absl::StatusOr<v1::CollectiveRow> AggregateRow(v1::CollectiveOp op, int64_t size_bytes,
                                               const std::vector<std::vector<double>>& per_rank) {
  auto slowest = SlowestRankPerIteration(per_rank);
  if (!slowest.ok()) return slowest.status();
  v1::CollectiveRow row;
  row.set_world_size(static_cast<int32_t>(per_rank.size()));
  row.set_size_bytes(size_bytes);
  for (double s : *slowest) row.add_iteration_seconds(s);
  *row.mutable_duration() = ComputeStats(*slowest);
  const double median = row.duration().median();
  if (median > 0) {
    row.set_algbw_gbps(static_cast<double>(size_bytes) / median / 1e9);
    row.set_busbw_gbps(row.algbw_gbps() * BusBandwidthFactor(op, row.world_size()));
  }
  for (const auto& r : per_rank) {
    std::vector<double> sorted = r;
    std::sort(sorted.begin(), sorted.end());
    row.add_rank_median_seconds(Quantile(sorted, 0.5));
  }
  return row;
}

}  // namespace benchd
