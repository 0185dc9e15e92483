#include "client/attention_view.h"

#include "common/job_spec.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/format.h"
#include "client/table.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd::client {
namespace {

using Align = Table::Align;

std::string MiB(int64_t bytes) {
  return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20));
}

// "median 12.346 ms, min 12.101, p95 12.501, max 13.020, cv 0.80% over 100 passes".
std::string Spread(const v1::Stats& s) {
  return fmt::format("median {} ms, min {}, p95 {}, max {}, cv {} over {} passes",
                     FormatMs(s.median()), FormatMs(s.min()), FormatMs(s.p95()), FormatMs(s.max()),
                     FormatPercent(s.cv()), s.count());
}

}  // namespace

absl::StatusOr<v1::JobSpec> BuildAttentionSpec(const AttentionOptions& o) {
  v1::JobSpec spec;
  spec.set_device(o.device);
  v1::AttentionSpec* a = spec.mutable_attention();
  if (o.batch_size) a->set_batch_size(*o.batch_size);
  if (o.num_heads) a->set_num_heads(*o.num_heads);
  if (o.head_dim) a->set_head_dim(*o.head_dim);
  if (o.seq_len) a->set_seq_len(*o.seq_len);
  if (o.warmup_passes) a->set_warmup_passes(*o.warmup_passes);
  if (o.passes) a->set_passes(*o.passes);
  if (o.seed) a->set_seed(*o.seed);
  a->set_causal(o.causal);
  if (!o.precision.empty()) {
    auto p = ParsePrecision(o.precision);
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--precision: unknown value '", o.precision,
                                                     "'; expected fp32, bf16 or fp16"));
    }
    a->set_precision(*p);
  }
  if (!o.implementation.empty()) {
    auto impl = ParseAttention(o.implementation);
    if (!impl.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--impl: unknown value '", o.implementation,
                                                     "'; expected ", AttentionChoices()));
    }
    a->set_implementation(*impl);
  }
  if (!o.memory_cap.empty()) {
    auto bytes = ParseByteSize(o.memory_cap, "--memory-cap");
    if (!bytes.ok()) return bytes.status();
    a->set_memory_cap_bytes(*bytes);
  }
  a->set_flush_l2(o.flush_l2);
  if (!o.preset.empty() && o.preset != kAttentionLeaderboardPreset) {
    return absl::InvalidArgumentError(absl::StrCat("--preset: unknown preset '", o.preset,
                                                   "'; expected ", kAttentionLeaderboardPreset));
  }
  a->set_preset(o.preset);
  return spec;
}

std::string AttentionSpecSummary(const v1::AttentionSpec& s) {
  std::string shape = fmt::format("batch {}", s.batch_size());
  if (s.has_num_heads()) shape += fmt::format(" x {} heads", s.num_heads());
  // 0 only in a sweep's spec, where the axis gives each cell its own.
  auto dim = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string("per cell"); };
  shape += fmt::format(" x seq {} x d {}", dim(s.seq_len()), dim(s.head_dim()));
  return fmt::format("{}{}, {}, {}", AttentionName(s.implementation()), s.causal() ? " causal" : "",
                     shape, PrecisionName(s.precision()));
}

std::string AttentionResultView(const v1::AttentionResult& r) {
  const bool measured = r.memory_source() == "cuda_caching_allocator";
  Table t({{"impl"},
           {"precision"},
           {"batch", Align::kRight},
           {"heads", Align::kRight},
           {"seq", Align::kRight},
           {"d", Align::kRight},
           {"forward ms", Align::kRight},
           {"backward ms", Align::kRight},
           {"saved MiB", Align::kRight},
           {"peak MiB", Align::kRight},
           {"score MiB (formula)", Align::kRight},
           {"fwd+bwd ms", Align::kRight},
           {"fwd TFLOP/s", Align::kRight},
           {"bwd TFLOP/s", Align::kRight}});
  const v1::AttentionSpec& s = r.spec();
  t.AddRow({AttentionName(s.implementation()) + (s.causal() ? " causal" : ""),
            PrecisionName(s.precision()), std::to_string(s.batch_size()),
            s.has_num_heads() ? std::to_string(s.num_heads()) : "-", std::to_string(s.seq_len()),
            std::to_string(s.head_dim()), FormatMs(r.forward().median()),
            FormatMs(r.backward().median()), measured ? MiB(r.saved_activation_bytes()) : "n/a",
            measured ? MiB(r.peak_pass_bytes()) : "n/a", MiB(r.score_matrix_bytes()),
            FormatMs(r.step().median()), FormatRate(r.flash_forward_tflops_per_second()),
            FormatRate(r.flash_backward_tflops_per_second())});
  std::vector<std::pair<std::string, std::string>> kv = {
      {"Forward", Spread(r.forward())},
      {"Backward", Spread(r.backward())},
      {"Fwd+bwd", Spread(r.step())},
      {"TFLOP/s",
       fmt::format("forward {}, backward {}, forward+backward {}, as FlashAttention counts: "
                   "4·B·H·T²·d{}, backward 2.5x (the table's); dense (the course's): forward "
                   "{}, backward {} (2x)",
                   FormatRate(r.flash_forward_tflops_per_second()),
                   FormatRate(r.flash_backward_tflops_per_second()),
                   FormatRate(r.flash_step_tflops_per_second()),
                   s.causal() ? " halved (causal)" : "", FormatRate(r.forward_tflops_per_second()),
                   FormatRate(r.backward_tflops_per_second()))},
  };
  for (const auto& [pass, stats] :
       {std::pair<const char*, const v1::Stats*>{"forward", &r.forward()},
        {"backward", &r.backward()},
        {"fwd+bwd", &r.step()}}) {
    if (!stats->noise_warning().empty()) {
      kv.emplace_back("Warning", fmt::format("{}: {}", pass, stats->noise_warning()));
    }
  }
  if (!s.preset().empty() || s.flush_l2()) {
    kv.emplace_back("Harness",
                    fmt::format("{}{}", s.preset().empty() ? "" : s.preset() + " preset; ",
                                s.flush_l2() ? "L2 flushed (256 MiB zeroed) before "
                                               "every pass, as triton's do_bench"
                                             : "L2 not flushed"));
  }
  std::string formula =
      r.saved_by_formula_bytes() > 0
          ? fmt::format("{} MiB by formula ({} score matrices of {} MiB, output, row stats)",
                        MiB(r.saved_by_formula_bytes()), r.saved_score_matrices(),
                        MiB(r.score_matrix_bytes()))
          : std::string("not modelled for ") + AttentionName(s.implementation());
  kv.emplace_back("Saved",
                  measured
                      ? fmt::format("{} MiB measured; {}", MiB(r.saved_activation_bytes()), formula)
                      : fmt::format("not measured ({}); {}", r.memory_source(), formula));
  kv.emplace_back("Timer", r.timer());
  kv.emplace_back("Device", fmt::format("{} ({})", r.device(), r.device_name()));
  return t.Render() + KeyValues(kv);
}

}  // namespace benchd::client
