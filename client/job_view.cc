#include "client/job_view.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "client/attention_view.h"
#include "client/collective_view.h"
#include "client/ddp_view.h"
#include "client/format.h"
#include "client/memory_view.h"
#include "client/options_view.h"
#include "client/precision_view.h"
#include "client/profile_view.h"
#include "client/sweep_view.h"
#include "client/table.h"
#include "common/job_spec.h"
#include "common/model_config.h"

namespace benchd::client {
namespace {

using Align = Table::Align;
using KeyValueList = std::vector<std::pair<std::string, std::string>>;

// Every key/value block of `get` aligns on the longest key ("Peak memory").
constexpr size_t kKeyWidth = 11;

bool HasResult(const v1::Job& job) { return job.result().has_benchmark(); }
bool HasMemoryResult(const v1::Job& job) { return job.result().has_memory(); }
bool HasProfileResult(const v1::Job& job) { return job.result().has_profile(); }

// "floor 4.210 ms (matmul 3.100 + AdamW 1.110); this step reaches 35.2% of it"
// and the peaks behind it, or why there are none.
KeyValueList RooflineLines(const v1::Roofline& r) {
  if (!r.unavailable().empty()) return {{"Roofline", "unavailable: " + r.unavailable()}};
  std::string floor = fmt::format("floor {} ms (matmul {}", FormatMs(r.floor_seconds()),
                                  FormatMs(r.matmul_seconds()));
  if (r.optimizer_bytes() > 0) floor += fmt::format(" + AdamW {}", FormatMs(r.optimizer_seconds()));
  floor += fmt::format("); this step reaches {:.1f}% of it", 100 * r.fraction_of_floor());
  std::string peaks =
      fmt::format("{} matmul {} TFLOP/s ({}^3), copy {} GB/s ({} MiB); ", r.matmul_dtype(),
                  FormatRate(r.peak_matmul_flops_per_second() / 1e12), r.matmul_size(),
                  FormatRate(r.bandwidth_bytes_per_second() / 1e9), r.copy_bytes() >> 20);
  peaks += r.measured_now() ? "measured by this job in " + FormatSeconds(r.measure_seconds())
                            : std::string("cached by the worker");
  return {{"Roofline", floor}, {"Peaks", peaks}};
}

// For list: the preset, or "d768/L12" for a custom model.
std::string ShortModelName(const v1::ModelConfig& m) {
  if (!m.preset().empty()) return m.preset();
  return fmt::format("d{}/L{}", m.d_model(), m.num_layers());
}

std::string ErrorText(const v1::Job& job) {
  if (job.error_message().empty()) return CodeName(job.error_code());
  return CodeName(job.error_code()) + ": " + job.error_message();
}

}  // namespace

std::string ModelSummary(const v1::ModelConfig& m) {
  std::vector<std::string> parts;
  if (m.vocab_size() != 0) parts.push_back("vocab " + FormatThousands(m.vocab_size()));
  if (m.d_model() != 0) parts.push_back("d_model " + FormatThousands(m.d_model()));
  if (m.d_ff() != 0) parts.push_back("d_ff " + FormatThousands(m.d_ff()));
  if (m.num_layers() != 0) parts.push_back(fmt::format("{} layers", m.num_layers()));
  if (m.num_heads() != 0) parts.push_back(fmt::format("{} heads", m.num_heads()));
  if (m.rope_theta() != 0) parts.push_back(fmt::format("rope theta {:g}", m.rope_theta()));
  const std::string name = m.preset().empty() ? "custom" : m.preset();
  if (parts.empty()) return name;
  return name + " (" + absl::StrJoin(parts, ", ") + ")";
}

std::string SpecSummary(const v1::JobSpec& spec) {
  if (spec.has_memory()) return MemorySpecSummary(spec.memory());
  if (spec.has_profile()) return ProfileSpecSummary(spec.profile());
  if (spec.has_attention()) return AttentionSpecSummary(spec.attention());
  if (spec.has_precision()) return PrecisionSpecSummary(spec.precision());
  if (spec.has_ddp()) return DdpSpecSummary(spec.ddp());
  if (!spec.has_benchmark()) {
    const std::string kind = JobKindName(spec);
    return kind.empty() ? "-" : kind;
  }
  const v1::BenchmarkSpec& b = spec.benchmark();
  // UNSPECIFIED mode/precision mean forward/fp32 by the proto's contract.
  std::vector<std::string> parts = {ModelSummary(b.model()), ModeName(b.mode()),
                                    PrecisionName(b.precision())};
  if (b.batch_size() != 0) parts.push_back(fmt::format("batch {}", b.batch_size()));
  if (b.context_length() != 0) parts.push_back(fmt::format("context {}", b.context_length()));
  if (b.has_warmup_steps()) parts.push_back(fmt::format("warm-up {}", b.warmup_steps()));
  if (b.warmup_auto()) {
    parts.push_back(b.has_warmup_max_steps()
                        ? fmt::format("warm-up auto (max {})", b.warmup_max_steps())
                        : std::string("warm-up auto"));
  }
  if (b.measure_steps() != 0) parts.push_back(fmt::format("steps {}", b.measure_steps()));
  parts.push_back(fmt::format("seed {}", b.seed()));
  if (b.export_parity()) parts.push_back("export parity");
  for (std::string& part : SpecOptionParts(b)) parts.push_back(std::move(part));
  return absl::StrJoin(parts, ", ");
}

std::string ShortSpecSummary(const v1::JobSpec& spec) {
  if (spec.has_sweep()) {
    // The request alone may name no model (a sweep over model.preset): the axes say more.
    std::vector<std::string> axes;
    int64_t cells = 1;
    for (const v1::SweepAxis& a : spec.sweep().axes()) {
      axes.push_back(a.field());
      cells *= a.values_size();
    }
    return fmt::format("{} sweep {} ({} cells)", JobKindName(spec), absl::StrJoin(axes, " x "),
                       cells);
  }
  if (spec.has_memory()) return "memory " + MemorySpecSummary(spec.memory());
  if (spec.has_profile()) return "profile " + ProfileSpecSummary(spec.profile());
  if (spec.has_ddp()) {
    const v1::DdpSpec& d = spec.ddp();
    const std::string ranks = d.target().group().empty()
                                  ? fmt::format("{} ranks", d.target().devices_size())
                                  : "group " + d.target().group();
    return fmt::format("ddp {} {} {}", ShortModelName(d.step().model()),
                       PrecisionName(d.step().precision()), ranks);
  }
  if (!spec.has_benchmark()) return JobKindName(spec);
  const v1::BenchmarkSpec& b = spec.benchmark();
  std::string out = fmt::format("{} {} {}", ShortModelName(b.model()), ModeName(b.mode()),
                                PrecisionName(b.precision()));
  if (b.batch_size() != 0 && b.context_length() != 0) {
    out += fmt::format(" {}x{}", b.batch_size(), b.context_length());
  }
  return out;
}

std::string StatsTable(const v1::BenchmarkResult& r, const std::string& indent) {
  Table table({{"ms"},
               {"median", Align::kRight},
               {"mean", Align::kRight},
               {"std", Align::kRight},
               {"min", Align::kRight},
               {"max", Align::kRight},
               {"p95", Align::kRight},
               {"cv", Align::kRight}});
  const std::pair<const char*, const v1::Stats*> rows[] = {{"step", &r.step()},
                                                           {"forward", &r.forward()},
                                                           {"backward", &r.backward()},
                                                           {"optimizer", &r.optimizer()},
                                                           {"host_step", &r.host_step()}};
  for (const auto& [name, s] : rows) {
    // Backward and optimizer are all zero in modes that don't run them; a
    // row of zeros would read as "measured and free".
    if (s->count() == 0 || (s->max() == 0 && std::string(name) != "step")) continue;
    table.AddRow({name, FormatMs(s->median()), FormatMs(s->mean()), FormatMs(s->std()),
                  FormatMs(s->min()), FormatMs(s->max()), FormatMs(s->p95()),
                  FormatPercent(s->cv())});
  }
  std::string out = table.Render(indent);
  for (const auto& [name, s] : rows) {
    if (!s->noise_warning().empty()) {
      out += fmt::format("{}warning: {}: {}\n", indent, name, s->noise_warning());
    }
  }
  return out;
}

std::string StepsTable(const v1::BenchmarkResult& r, const std::string& indent) {
  Table table({{"index", Align::kRight},
               {"warm-up"},
               {"step ms", Align::kRight},
               {"fwd ms", Align::kRight},
               {"bwd ms", Align::kRight},
               {"opt ms", Align::kRight},
               {"loss", Align::kRight}});
  for (const v1::StepTiming& s : r.steps()) {
    table.AddRow({std::to_string(s.index()), s.warmup() ? "yes" : "", FormatMs(s.step_seconds()),
                  FormatMs(s.forward_seconds()), FormatMs(s.backward_seconds()),
                  FormatMs(s.optimizer_seconds()), fmt::format("{:.4f}", s.loss())});
  }
  return table.Render(indent);
}

std::string BenchmarkResultView(const v1::BenchmarkResult& r) {
  const v1::BenchmarkSpec& spec = r.spec();
  std::string device = r.device().empty() ? "-" : r.device();
  if (!r.device_name().empty()) device += " (" + r.device_name() + ")";
  const int64_t tokens = spec.batch_size() * spec.context_length();
  std::string out = KeyValues(
      {
          {"Model", ModelSummary(spec.model())},
          {"Parameters", FormatThousands(r.parameter_count())},
          {"Device", device},
          {"Mode", ModeName(spec.mode())},
          {"Precision", PrecisionName(spec.precision())},
          {"Batch", fmt::format("{} x {} tokens ({} tokens/step)", spec.batch_size(),
                                spec.context_length(), FormatThousands(tokens))},
          {"Steps", StepsLine(r)},
          {"Options", OptionsLine(r)},
          {"Timer", r.timer().empty() ? "-" : r.timer()},
      },
      kKeyWidth);
  out += fmt::format("\nStatistics (ms over {} measured steps)\n", r.step().count());
  out += StatsTable(r, "  ");

  std::string memory = FormatGiB(r.peak_memory_bytes()) + " GiB";
  if (!r.peak_memory_source().empty()) memory += " (" + r.peak_memory_source() + ")";
  const std::string model = r.model_was_resident()
                                ? std::string("resident (reused, not rebuilt)")
                                : "built in " + FormatSeconds(r.model_build_seconds());
  out += "\n";
  out += KeyValues(
      {
          {"Tokens/s", FormatRate(r.tokens_per_second())},
          {"TFLOP/s", FormatRate(r.tflops_per_second())},
          {"FLOPs/step", fmt::format("{:.4g}", r.flops_per_step())},
          {"Peak memory", memory},
          {"Model", model},
          {"Versions", FormatVersions(r.versions())},
      },
      kKeyWidth);
  if (r.has_roofline()) out += KeyValues(RooflineLines(r.roofline()), kKeyWidth);
  if (!r.parity_bundle().empty()) out += KeyValues({{"Parity", r.parity_bundle()}}, kKeyWidth);
  if (r.steps_size() > 0) {
    out += "\nSteps\n";
    out += StepsTable(r, "  ");
  }
  return out;
}

std::string JobView(const v1::Job& job, const ProfileViewOptions& profile) {
  KeyValueList kv = {
      {"Job", job.id()},
      {"Kind", JobKindText(job)},
      {"State", StateName(job.state())},
      {"Device", JobDevicesText(job)},
      {"Created", FormatTime(job.created())},
  };
  std::string started = FormatTime(job.started());
  if (double wait = SecondsBetween(job.created(), job.started()); wait >= 0) {
    started += " (queued " + FormatSeconds(wait) + ")";
  }
  kv.emplace_back("Started", started);
  std::string finished = FormatTime(job.finished());
  if (double ran = SecondsBetween(job.started(), job.finished()); ran >= 0) {
    finished += " (ran " + FormatSeconds(ran) + ")";
  }
  kv.emplace_back("Finished", finished);
  kv.emplace_back("Spec", SpecSummary(job.spec()));
  if (job.spec().has_sweep()) kv.emplace_back("Sweep", SweepSummary(job.spec().sweep()));
  if (job.state() == v1::JOB_STATE_FAILED || job.error_code() != 0 ||
      !job.error_message().empty()) {
    kv.emplace_back("Error", ErrorText(job));
  }
  // The daemon's doubts about the figures (a shared GPU, --gpu-sharing when-idle).
  for (const std::string& warning : job.warnings()) kv.emplace_back("Warning", warning);
  std::string out = KeyValues(kv, kKeyWidth);
  if (HasResult(job)) out += "\n" + BenchmarkResultView(job.result().benchmark());
  if (HasMemoryResult(job)) out += "\n" + MemoryResultView(job.result().memory());
  if (HasProfileResult(job)) out += "\n" + ProfileResultView(job.result().profile(), profile);
  if (job.result().has_collective()) out += "\n" + CollectiveResultView(job.result().collective());
  if (job.result().has_sweep()) out += "\n" + SweepTable(job.spec().sweep(), job.result().sweep());
  if (job.result().has_attention()) out += "\n" + AttentionResultView(job.result().attention());
  if (job.result().has_precision()) out += "\n" + PrecisionResultView(job.result().precision());
  if (job.result().has_ddp()) out += "\n" + DdpResultView(job.result().ddp());
  return out;
}

std::string FinalStateLine(const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED: {
      std::string line = fmt::format("job {} succeeded", job.id());
      if (job.result().has_sweep()) line += ": " + SweepCountsText(job.result().sweep());
      if (HasResult(job)) {
        const v1::BenchmarkResult& r = job.result().benchmark();
        line +=
            fmt::format(": median step {} ms, {} tokens/s, {} TFLOP/s", FormatMs(r.step().median()),
                        FormatRate(r.tokens_per_second()), FormatRate(r.tflops_per_second()));
      }
      if (HasMemoryResult(job)) {
        const v1::MemoryResult& r = job.result().memory();
        int64_t peak = 0;
        int oom = 0;
        for (const v1::MemoryRun& run : r.runs()) {
          peak = std::max(peak, run.peak_allocated_bytes());
          oom += run.out_of_memory() ? 1 : 0;
        }
        line += fmt::format(": {} memory run{}, highest peak allocated {}{}", r.runs_size(),
                            r.runs_size() == 1 ? "" : "s", FormatBytes(peak),
                            oom > 0 ? fmt::format(", {} out of memory", oom) : "");
      }
      if (HasProfileResult(job)) {
        const v1::ProfileResult& r = job.result().profile();
        line += fmt::format(
            ": {} ranges over {} profiled step{}, step {} ms profiled vs {} ms "
            "unprofiled",
            r.ranges_size(), r.spec().profile_steps(), r.spec().profile_steps() == 1 ? "" : "s",
            FormatMs(r.profiled_step().median()), FormatMs(r.unprofiled_step().median()));
      }
      if (job.result().has_attention()) {
        const v1::AttentionResult& r = job.result().attention();
        line += fmt::format(": forward {} ms, backward {} ms (medians), {} / {} TFLOP/s",
                            FormatMs(r.forward().median()), FormatMs(r.backward().median()),
                            FormatRate(r.forward_tflops_per_second()),
                            FormatRate(r.backward_tflops_per_second()));
      }
      if (job.result().has_ddp()) line += ": " + DdpFinalSummary(job.result().ddp());
      if (job.result().has_precision()) {
        const v1::PrecisionResult& r = job.result().precision();
        std::vector<std::string> parts;
        for (const v1::PrecisionAccumulationRow& row : r.accumulation())
          parts.push_back(fmt::format("{} {:.6g}", row.name(), row.result()));
        if (!parts.empty()) line += ": " + absl::StrJoin(parts, ", ");
        if (r.autocast_size() > 0)
          line += fmt::format("{} {} autocast run{}", parts.empty() ? ":" : ";", r.autocast_size(),
                              r.autocast_size() == 1 ? "" : "s");
      }
      return line;
    }
    case v1::JOB_STATE_FAILED:
      return fmt::format("job {} failed: {}", job.id(), ErrorText(job));
    case v1::JOB_STATE_CANCELLED:
      return fmt::format("job {} was cancelled", job.id());
    case v1::JOB_STATE_INTERRUPTED: {
      std::string line =
          fmt::format("job {} was interrupted (the daemon stopped while it ran)", job.id());
      if (!job.error_message().empty()) line += ": " + job.error_message();
      return line;
    }
    default:
      return fmt::format("job {} is {}", job.id(), StateName(job.state()));
  }
}

}  // namespace benchd::client
