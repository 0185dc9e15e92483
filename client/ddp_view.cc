#include "client/ddp_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/collective_view.h"
#include "client/csv.h"
#include "client/format.h"
#include "client/job_view.h"
#include "client/options_view.h"
#include "client/table.h"
#include "common/collective_math.h"
#include "common/ddp_spec.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {

using Align = Table::Align;

// Lines up with the Job block of `get` above it (its longest key, "Peak memory").
constexpr size_t kKeyWidth = 11;

// The compute-only run synchronises nothing: its ranks train apart, so its
// parameters are not compared and it has no communication to show.
bool Synchronised(const v1::DdpRow& row) { return row.variant() != v1::DDP_VARIANT_UNSPECIFIED; }

bool Sharded(const v1::DdpRow& row) { return row.optimizer() == v1::DDP_OPTIMIZER_SHARDED_ADAMW; }

// The compute-only run, then the others in run order.
std::vector<const v1::DdpRow*> Rows(const v1::DdpResult& r) {
  std::vector<const v1::DdpRow*> rows;
  if (r.has_compute_only()) rows.push_back(&r.compute_only());
  for (const v1::DdpRow& row : r.rows()) rows.push_back(&row);
  return rows;
}

std::vector<std::string> DivergedLabels(const v1::DdpResult& r) {
  std::vector<std::string> labels;
  for (const v1::DdpRow& row : r.rows()) {
    if (Synchronised(row) && !row.ranks_agree()) labels.push_back(DdpRowLabel(row));
  }
  return labels;
}

// Bytes as IEC units ("1.88 GiB", "234.38 KiB"): a CPU run of a small
// model has kilobytes where a GPU run has gigabytes.
std::string BytesOrDash(int64_t bytes) { return bytes > 0 ? FormatBytes(bytes) : "-"; }

std::string OptimizerState(const v1::DdpRow& row) {
  std::string state = BytesOrDash(row.optimizer_state_bytes());
  if (Sharded(row) && row.unsharded_optimizer_state_bytes() > 0) {
    state += " (unsharded " + FormatBytes(row.unsharded_optimizer_state_bytes()) + ")";
  }
  return state;
}

std::string RanksAgreeText(const v1::DdpRow& row) {
  if (!Synchronised(row)) return "-";
  return row.ranks_agree() ? "yes" : "DIVERGED";
}

std::string Devices(const v1::DdpResult& r) {
  const auto& devices =
      r.group().devices().empty() ? r.spec().target().devices() : r.group().devices();
  return absl::StrJoin(devices, ", ");
}

std::string BatchLine(const v1::DdpResult& r) {
  const v1::BenchmarkSpec& step = r.spec().step();
  return fmt::format("global {} = {} ranks x {} sequences of {} tokens ({} tokens/step)",
                     r.global_batch_size(), r.world_size(), step.batch_size(),
                     step.context_length(),
                     FormatThousands(r.global_batch_size() * step.context_length()));
}

// Every rank runs the same steps (a data-parallel job has no warm-up auto).
std::string StepsText(const v1::BenchmarkSpec& step) {
  return fmt::format("{} warm-up + {} measured per run; a step takes as long as its slowest rank",
                     step.warmup_steps(), step.measure_steps());
}

std::string OptionsText(const v1::BenchmarkSpec& step) {
  const std::vector<std::string> parts = SpecOptionParts(step);
  return parts.empty() ? "faithful" : absl::StrJoin(parts, ", ");
}

// The share of the profiled step's communication that ran while the device
// (or, on a CPU, the step's thread) computed, over every rank; none without
// timelines or communication.
std::optional<double> CommHidden(const v1::DdpRow& row) {
  double comm = 0, hidden = 0;
  for (const v1::DdpRank& k : row.ranks()) {
    comm += k.timeline().comm_seconds();
    hidden += k.timeline().comm_overlapped_seconds();
  }
  if (comm <= 0) return std::nullopt;
  return hidden / comm;
}

std::string HiddenText(const v1::DdpRow& row) {
  const auto hidden = CommHidden(row);
  return hidden ? FormatPercent(*hidden) : "-";
}

std::string PredictedText(const v1::DdpRow& row) {
  return row.has_predicted_exposed_comm_seconds() ? FormatMs(row.predicted_exposed_comm_seconds())
                                                  : "-";
}

// "4 KiB .. 256 MiB"
std::string SweepRange(const v1::DdpOverheadModel& m) {
  if (m.sweep_bytes().empty()) return "no sizes";
  return FormatBytes(m.sweep_bytes(0)) + " .. " + FormatBytes(*m.sweep_bytes().rbegin());
}

// Rank 0's profiled step as two character lanes of `width` columns, one
// scale for every run: '#' computing, '=' communicating.
std::string TimelineLanes(const v1::DdpResult& r, size_t width) {
  std::vector<const v1::DdpRow*> rows;
  double longest = 0;
  for (const v1::DdpRow* row : Rows(r)) {
    if (row->ranks().empty() || row->ranks(0).timeline().step_seconds() <= 0) continue;
    rows.push_back(row);
    longest = std::max(longest, row->ranks(0).timeline().step_seconds());
  }
  if (rows.empty()) return "";
  size_t label_width = 0;
  for (const v1::DdpRow* row : rows) label_width = std::max(label_width, DdpRowLabel(*row).size());
  std::string out;
  for (const v1::DdpRow* row : rows) {
    std::string compute(width, ' '), comm(width, ' ');
    for (const v1::DdpSpan& span : row->ranks(0).timeline().spans()) {
      std::string& lane = span.lane() == v1::DDP_LANE_COMPUTE ? compute : comm;
      const char mark = span.lane() == v1::DDP_LANE_COMPUTE ? '#' : '=';
      const auto first = static_cast<size_t>(span.start_seconds() / longest * width);
      const auto last = static_cast<size_t>(span.end_seconds() / longest * width);
      for (size_t c = first; c <= std::min(last, width - 1); ++c) lane[c] = mark;
    }
    out += fmt::format("{:<{}} |{}|\n{:<{}} |{}|\n", DdpRowLabel(*row), label_width, compute, "",
                       label_width, comm);
  }
  out += fmt::format("{:<{}} 0{:>{}}\n", "", label_width, FormatMs(longest) + " ms", width);
  return out;
}

}  // namespace

std::string DdpSpecSummary(const v1::DdpSpec& s) {
  const v1::BenchmarkSpec& b = s.step();
  std::vector<std::string> parts = {ModelSummary(b.model()), PrecisionName(b.precision())};
  const v1::CollectiveTarget& t = s.target();
  if (!t.group().empty()) {
    parts.push_back("group " + t.group());
  } else if (!t.devices().empty()) {
    std::string devices = absl::StrJoin(t.devices(), ",");
    if (t.backend() != v1::COLLECTIVE_BACKEND_UNSPECIFIED) {
      devices += " (" + BackendName(t.backend()) + ")";
    }
    parts.push_back(devices);
  }
  if (s.has_global_batch_size() && b.batch_size() != 0) {
    parts.push_back(
        fmt::format("global batch {} ({} per rank)", s.global_batch_size(), b.batch_size()));
  } else if (s.has_global_batch_size()) {
    parts.push_back(fmt::format("global batch {}", s.global_batch_size()));
  } else if (b.batch_size() != 0) {
    parts.push_back(fmt::format("batch {} per rank", b.batch_size()));
  }
  if (b.context_length() != 0) parts.push_back(fmt::format("context {}", b.context_length()));
  if (b.has_warmup_steps()) parts.push_back(fmt::format("warm-up {}", b.warmup_steps()));
  if (b.warmup_auto()) parts.push_back("warm-up auto");
  if (b.measure_steps() != 0) parts.push_back(fmt::format("steps {}", b.measure_steps()));
  parts.push_back(fmt::format("seed {}", b.seed()));
  for (std::string& part : SpecOptionParts(b)) parts.push_back(std::move(part));
  std::vector<std::string> names;
  for (int v : s.variants()) names.push_back(DdpVariantName(v1::DdpVariant(v)));
  if (!names.empty()) parts.push_back("variants " + absl::StrJoin(names, ", "));
  names.clear();
  for (double mb : s.bucket_mb()) names.push_back(fmt::format("{:g}", mb));
  if (!names.empty()) parts.push_back("buckets " + absl::StrJoin(names, ", ") + " MB");
  names.clear();
  for (int o : s.optimizers()) names.push_back(DdpOptimizerName(v1::DdpOptimizer(o)));
  if (!names.empty()) parts.push_back("optimizers " + absl::StrJoin(names, ", "));
  if (s.has_timeout_seconds()) {
    parts.push_back(fmt::format("group timeout {:g} s", s.timeout_seconds()));
  }
  return absl::StrJoin(parts, ", ");
}

std::string DdpRowLabel(const v1::DdpRow& row) { return DdpRunLabel(DdpRunOf(row)); }

std::string DdpTable(const v1::DdpResult& r) {
  Table t({{"run"},
           {"step ms", Align::kRight},
           {"p95 ms", Align::kRight},
           {"cv", Align::kRight},
           {"exposed ms", Align::kRight},
           {"exposed", Align::kRight},
           {"predicted ms", Align::kRight},
           {"comm hidden", Align::kRight},
           {"calls/step", Align::kRight},
           {"MB/step", Align::kRight},
           {"buckets", Align::kRight},
           {"peak/rank", Align::kRight},
           {"opt state/rank", Align::kRight},
           {"ranks agree"},
           {"loss", Align::kRight}});
  for (const v1::DdpRow* row : Rows(r)) {
    const bool synced = Synchronised(*row);
    const bool bucketed = DdpVariantTakesBuckets(row->variant());
    t.AddRow({DdpRowLabel(*row), FormatMs(row->step().median()), FormatMs(row->step().p95()),
              FormatPercent(row->step().cv()), synced ? FormatMs(row->exposed_comm_seconds()) : "-",
              synced ? FormatPercent(row->exposed_comm_fraction()) : "-", PredictedText(*row),
              HiddenText(*row), synced ? FormatThousands(row->calls_per_step()) : "-",
              synced ? FormatRate(static_cast<double>(row->bytes_per_step()) / 1e6) : "-",
              bucketed ? fmt::format("{}", row->buckets()) : "-",
              BytesOrDash(row->peak_memory_bytes()), OptimizerState(*row), RanksAgreeText(*row),
              fmt::format("{:.4f}", row->loss())});
  }
  return t.Render();
}

std::string DdpRanksTable(const v1::DdpResult& r) {
  Table t({{"run"},
           {"rank", Align::kRight},
           {"device"},
           {"step ms", Align::kRight},
           {"in calls ms", Align::kRight},
           {"peak", Align::kRight},
           {"opt state", Align::kRight}});
  for (const v1::DdpRow* row : Rows(r)) {
    for (const v1::DdpRank& rank : row->ranks()) {
      t.AddRow({DdpRowLabel(*row), fmt::format("{}", rank.rank()), rank.device(),
                FormatMs(rank.step_median_seconds()),
                Synchronised(*row) ? FormatMs(rank.comm_host_median_seconds()) : "-",
                BytesOrDash(rank.peak_memory_bytes()), BytesOrDash(rank.optimizer_state_bytes())});
    }
  }
  return t.empty() ? std::string() : t.Render();
}

std::string DdpResultView(const v1::DdpResult& r) {
  const v1::BenchmarkSpec& step = r.spec().step();
  std::string out = KeyValues(
      {
          {"Ranks", fmt::format("{}: {}", r.world_size(), Devices(r))},
          {"Group", r.group().group().empty() ? "-" : GroupUseText(r.group())},
          {"Model", ModelSummary(step.model())},
          {"Parameters", FormatThousands(r.parameter_count())},
          {"Precision", PrecisionName(step.precision())},
          {"Batch", BatchLine(r)},
          {"Steps", StepsText(step)},
          {"Options", OptionsText(step)},
          {"Device", OrDash(r.device_name())},
          {"Timer", OrDash(r.timer())},
          {"Versions", FormatVersions(r.versions())},
      },
      kKeyWidth);
  out +=
      "\nRuns (medians over the measured steps; exposed = step - compute only's step, the "
      "communication the step waited for)\n";
  out += DdpTable(r);
  if (const std::string ranks = DdpRanksTable(r); !ranks.empty()) {
    out += "\nRanks (in calls: host time inside the group's calls, per step)\n" + ranks;
  }
  out += DdpModelView(r);
  if (const std::string lanes = TimelineLanes(r, 64); !lanes.empty()) {
    out +=
        "\nRank 0's profiled step ('#' computing, '=' communicating; one scale for every "
        "run)\n" +
        lanes;
    std::string where = "traces: ddp-run<N>-rank<R>.trace.json";
    if (!r.timeline_artifact().empty()) where += ", every rank: " + r.timeline_artifact();
    out += "  " + where + " (benchctl artifacts <job>)\n";
  }
  const std::vector<std::string> diverged = DivergedLabels(r);
  if (diverged.empty()) {
    out += "\nranks agree: every synchronised run left the same parameters on every rank\n";
  } else {
    out += fmt::format(
        "\nDIVERGED: after {} the ranks' parameters differ (compared by their sum and sum of "
        "squares): the gradient synchronisation or the sharded optimizer is wrong\n",
        absl::StrJoin(diverged, "; "));
  }
  return out;
}

std::string DdpModelView(const v1::DdpResult& r) {
  if (!r.has_overhead_model()) return "";
  const v1::DdpOverheadModel& m = r.overhead_model();
  if (!m.unavailable().empty()) return "\nOverhead model: not made: " + m.unavailable() + "\n";
  std::string out = fmt::format(
      "\nOverhead model: all_reduce(s) = {} us + s / {} GB/s, fitted to {} sizes ({}) on this "
      "group\n  backward {} ms (compute only), gradients {}; {}\n",
      FormatRate(m.per_call_seconds() * 1e6), FormatRate(m.bandwidth_bytes_per_second() / 1e9),
      m.sweep_bytes_size(), SweepRange(m), FormatMs(m.backward_seconds()),
      FormatBytes(m.gradient_bytes()), m.formula());
  out += fmt::format("  predicted best bucket {} MB (exposed {} ms)",
                     FormatRate(m.predicted_best_bucket_mb()),
                     FormatMs(m.predicted_best_exposed_seconds()));
  if (m.measured_best_bucket_mb() > 0) {
    out += fmt::format("; measured best of the sizes run {} MB: predicted / measured {:.2f}",
                       FormatRate(m.measured_best_bucket_mb()), m.best_bucket_ratio());
  }
  return out + "\n";
}

std::string DdpRowLine(const v1::DdpRow& row) {
  std::string line =
      fmt::format("run {}: step {} ms", DdpRowLabel(row), FormatMs(row.step().median()));
  if (Synchronised(row)) {
    line +=
        fmt::format(", exposed comm {} ms ({}), {} MB/step", FormatMs(row.exposed_comm_seconds()),
                    FormatPercent(row.exposed_comm_fraction()),
                    FormatRate(static_cast<double>(row.bytes_per_step()) / 1e6));
    if (row.has_predicted_exposed_comm_seconds()) {
      line += fmt::format(" (predicted {} ms)", FormatMs(row.predicted_exposed_comm_seconds()));
    }
    if (!row.ranks_agree()) line += ", ranks DIVERGED";
  }
  return line + fmt::format(", loss {:.4f}", row.loss());
}

std::string DdpFinalSummary(const v1::DdpResult& r) {
  std::string line = fmt::format("compute only {} ms", FormatMs(r.compute_only().step().median()));
  const auto fastest = std::min_element(r.rows().begin(), r.rows().end(),
                                        [](const v1::DdpRow& a, const v1::DdpRow& b) {
                                          return a.step().median() < b.step().median();
                                        });
  if (fastest != r.rows().end()) {
    line +=
        fmt::format("; fastest {} {} ms (exposed {} ms, {})", DdpRowLabel(*fastest),
                    FormatMs(fastest->step().median()), FormatMs(fastest->exposed_comm_seconds()),
                    FormatPercent(fastest->exposed_comm_fraction()));
  }
  if (const size_t diverged = DivergedLabels(r).size(); diverged > 0) {
    line += fmt::format("; {} run{} DIVERGED", diverged, diverged == 1 ? "" : "s");
  }
  return line;
}

std::string DdpCsv(const v1::Job& job) {
  std::string out = std::string(kDdpCsvHeader) + "\n";
  const std::string id = CsvField(job.id());
  for (const v1::DdpRow* row : Rows(job.result().ddp())) {
    const std::string variant = Synchronised(*row) ? DdpVariantName(row->variant()) : "";
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", id,
                       CsvField(DdpRowLabel(*row)), CsvField(variant), row->bucket_mb(),
                       CsvField(DdpOptimizerName(row->optimizer())), row->step().median(),
                       row->step().p95(), row->step().cv(), row->exposed_comm_seconds(),
                       row->exposed_comm_fraction(), row->calls_per_step(), row->bytes_per_step(),
                       row->buckets(), row->peak_memory_bytes(), row->optimizer_state_bytes(),
                       row->unsharded_optimizer_state_bytes(),
                       row->ranks_agree() ? "true" : "false", row->loss(),
                       row->has_predicted_exposed_comm_seconds()
                           ? fmt::format("{}", row->predicted_exposed_comm_seconds())
                           : "",
                       CommHidden(*row) ? fmt::format("{}", *CommHidden(*row)) : "");
  }
  return out;
}

}  // namespace benchd::client
