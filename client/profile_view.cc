#include "client/profile_view.h"

#include <fmt/format.h>

#include <vector>

#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/table.h"
#include "common/model_config.h"
#include "common/profile_analysis.h"

namespace benchd::client {
namespace {

using Align = Table::Align;

std::string Us(double seconds) { return fmt::format("{:.2f}", seconds * 1e6); }
std::string Ms(double seconds) { return fmt::format("{:.3f}", seconds * 1e3); }
std::string Pct(double ratio) { return fmt::format("{:.1f}%", ratio * 100.0); }

std::string ActivitiesName(const google::protobuf::RepeatedField<int>& activities) {
  std::vector<std::string> names;
  for (int a : activities) {
    names.push_back(a == v1::PROFILER_ACTIVITY_CUDA  ? "cuda"
                    : a == v1::PROFILER_ACTIVITY_CPU ? "cpu"
                                                     : "?");
  }
  return names.empty() ? "default" : absl::StrJoin(names, "+");
}

// Depth of a range in the ranges' parent chain, for indenting its name.
int Depth(const v1::ProfileResult& r, const v1::ProfileRange& range) {
  int depth = 0;
  std::string parent = range.parent();
  while (!parent.empty() && depth < 16) {
    ++depth;
    std::string next;
    for (const v1::ProfileRange& p : r.ranges()) {
      if (p.name() == parent) next = p.parent();
    }
    parent = next;
  }
  return depth;
}

const v1::ProfileRange* FindRange(const v1::ProfileResult& r, const std::string& name) {
  for (const v1::ProfileRange& range : r.ranges()) {
    if (range.name() == name) return &range;
  }
  return nullptr;
}

}  // namespace

std::string ProfileSpecSummary(const v1::ProfileSpec& p) {
  const v1::BenchmarkSpec& s = p.step();
  std::string model = s.model().preset();
  if (model.empty()) model = fmt::format("d{}/L{}", s.model().d_model(), s.model().num_layers());
  return fmt::format("{} {} {} batch {} ctx {}, {} profiled step{}, {}", model, ModeName(s.mode()),
                     PrecisionName(s.precision()), s.batch_size(), s.context_length(),
                     p.profile_steps(), p.profile_steps() == 1 ? "" : "s",
                     ActivitiesName(p.activities()));
}

std::string ProfileRangeTable(const v1::ProfileResult& r, const std::string& indent) {
  const bool gpu = r.kernel_source() == "cuda_kernels";
  Table t({{"range"},
           {"per step", Align::kRight},
           {"wall ms", Align::kRight},
           {gpu ? "kernels ms" : "operators ms", Align::kRight},
           {gpu ? "GPU idle" : "outside ops", Align::kRight},
           {"GEMM", Align::kRight},
           {gpu ? "kernels" : "ops", Align::kRight},
           {"GFLOP", Align::kRight},
           {"TFLOP/s", Align::kRight}});
  const double steps = static_cast<double>(std::max<int64_t>(1, r.spec().profile_steps()));
  for (const v1::ProfileRange& range : r.ranges()) {
    const bool flops = range.flops_per_step() > 0;
    t.AddRow({std::string(2 * Depth(r, range), ' ') + range.name(),
              FormatRate(static_cast<double>(range.instances()) / steps),
              Ms(range.wall_seconds_per_step()), Ms(range.kernel_seconds_per_step()),
              Pct(range.idle_fraction()), Pct(range.gemm_fraction()),
              FormatRate(static_cast<double>(range.kernel_count()) / steps),
              flops ? FormatRate(range.flops_per_step() / 1e9) : "-",
              flops && range.kernel_flops_per_second() > 0
                  ? FormatRate(range.kernel_flops_per_second() / 1e12)
                  : "-"});
  }
  return t.Render(indent);
}

std::string AttentionPartsTable(const v1::ProfileResult& r, const std::string& indent) {
  static const char* const kParts[] = {"attention.scores", "attention.mask", "attention.softmax",
                                       "attention.weighted_sum"};
  double time = 0, flops = 0;
  for (const char* name : kParts) {
    if (const v1::ProfileRange* p = FindRange(r, name)) {
      time += p->kernel_seconds_per_step();
      flops += p->flops_per_step();
    }
  }
  if (time <= 0) return "";
  Table t({{"part"},
           {"time ms", Align::kRight},
           {"% time", Align::kRight},
           {"GFLOP", Align::kRight},
           {"% FLOPs", Align::kRight},
           {"TFLOP/s", Align::kRight},
           {"kernels", Align::kRight}});
  const double steps = static_cast<double>(std::max<int64_t>(1, r.spec().profile_steps()));
  for (const char* name : kParts) {
    const v1::ProfileRange* p = FindRange(r, name);
    if (p == nullptr) continue;
    t.AddRow(
        {std::string(name).substr(10), Ms(p->kernel_seconds_per_step()),
         Pct(p->kernel_seconds_per_step() / time), FormatRate(p->flops_per_step() / 1e9),
         Pct(flops > 0 ? p->flops_per_step() / flops : 0),
         p->kernel_flops_per_second() > 0 ? FormatRate(p->kernel_flops_per_second() / 1e12) : "-",
         FormatRate(static_cast<double>(p->kernel_count()) / steps)});
  }
  return t.Render(indent);
}

std::string KernelTable(const v1::ProfileRange& range, const ProfileViewOptions& o,
                        bool non_gemm_only, const std::string& indent) {
  Table t({{"Time %", Align::kRight},
           {"Total ms", Align::kRight},
           {"Instances", Align::kRight},
           {"Avg us", Align::kRight},
           {"Med us", Align::kRight},
           {"Min us", Align::kRight},
           {"Max us", Align::kRight},
           {"StdDev us", Align::kRight},
           {"ms/step", Align::kRight},
           {"GEMM"},
           {"Name"}});
  int shown = 0;
  for (const v1::KernelRow& k : range.kernels()) {
    if (non_gemm_only && k.gemm()) continue;
    if (!o.all && shown >= o.top) break;
    ++shown;
    t.AddRow({fmt::format("{:.1f}", k.time_percent()), Ms(k.total_seconds()),
              FormatThousands(k.instances()), Us(k.avg_seconds()), Us(k.med_seconds()),
              Us(k.min_seconds()), Us(k.max_seconds()), Us(k.stddev_seconds()),
              Ms(k.total_seconds_per_step()), k.gemm() ? "yes" : "",
              ShortKernelName(k.name(), o.name_width)});
  }
  return t.empty() ? "" : t.Render(indent);
}

std::string ProfileResultView(const v1::ProfileResult& r, const ProfileViewOptions& o) {
  const bool gpu = r.kernel_source() == "cuda_kernels";
  std::string device = r.device().empty() ? "-" : r.device();
  if (!r.device_name().empty()) device += " (" + r.device_name() + ")";
  const v1::BenchmarkSpec& step = r.spec().step();
  const v1::Stats& un = r.unprofiled_step();
  const v1::Stats& pr = r.profiled_step();
  std::vector<std::pair<std::string, std::string>> kv = {
      {"Model",
       fmt::format("{} ({} parameters), {} {}, batch {} x context {}",
                   step.model().preset().empty() ? "custom" : step.model().preset(),
                   FormatThousands(r.parameter_count()), ModeName(step.mode()),
                   PrecisionName(step.precision()), step.batch_size(), step.context_length())},
      {"Device", device},
      {"Profiled",
       fmt::format("{} step{}, activities {}; rows are {}", r.spec().profile_steps(),
                   r.spec().profile_steps() == 1 ? "" : "s", ActivitiesName(r.spec().activities()),
                   gpu ? "device kernels (CUPTI)" : "operators' self time (no device activity)")},
      {"Step time",
       fmt::format("unprofiled median {} ms (cv {}), profiled median {} ms: x{:.3f}",
                   Ms(un.median()), Pct(un.cv()), Ms(pr.median()), r.profiler_overhead())},
  };
  if (r.unattributed_kernels() > 0) {
    kv.emplace_back("Outside ranges", fmt::format("{} {} ({} ms) not in any named range",
                                                  FormatThousands(r.unattributed_kernels()),
                                                  gpu ? "kernels" : "operators",
                                                  Ms(r.unattributed_kernel_seconds())));
  }
  if (!r.trace_artifact().empty()) {
    kv.emplace_back("Trace", fmt::format("{} ({} events) in {} on the daemon's host; open it in "
                                         "ui.perfetto.dev or chrome://tracing",
                                         r.trace_artifact(), FormatThousands(r.trace_events()),
                                         r.artifacts_dir()));
  }
  std::string out = KeyValues(kv, 11);
  out += fmt::format("\nRanges, per step (wall = {}; idle = wall - {})\n",
                     gpu ? "device time a CUDA event pair around the range measures" : "host time",
                     gpu ? "kernel time: the GPU waiting for launches" : "operator time");
  out += ProfileRangeTable(r, "  ");
  if (std::string parts = AttentionPartsTable(r, "  "); !parts.empty()) {
    out += "\nAttention parts in the forward pass, per step (time against FLOPs)\n" + parts;
  }
  for (const v1::ProfileRange& range : r.ranges()) {
    out += fmt::format("\n{}: {} {}, {} ms per step, GEMM {}\n", range.name(), range.kernels_size(),
                       gpu ? "distinct kernels" : "distinct operators",
                       Ms(range.kernel_seconds_per_step()), Pct(range.gemm_fraction()));
    out += KernelTable(range, o, false, "  ");
    if (!o.all && range.gemm_seconds() > 0 && range.gemm_fraction() < 1) {
      out += fmt::format("  top non-GEMM {}\n", gpu ? "kernels" : "operators");
      out += KernelTable(range, o, true, "    ");
    }
  }
  return out;
}

}  // namespace benchd::client
