#include "client/spec_builder.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/collective_math.h"
#include "common/ddp_spec.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd::client {
namespace {

// The common parsers say "mode: unknown mode 'x'; expected ..."; a CLI user
// needs the flag's name instead of the proto field's.
absl::Status FlagError(const absl::Status& status, absl::string_view field) {
  absl::string_view message = status.message();
  absl::ConsumePrefix(&message, absl::StrCat(field, ": "));
  return absl::InvalidArgumentError(absl::StrCat("--", field, ": ", message));
}

// --warmup, --warmup-max-steps, --attention, --optimizer, --tf32, --cuda-graph,
// --weight-copies, --fused-ops, --optimizer-overlap, --autograd.
absl::Status ApplyOptionFlags(const BenchmarkOptions& o, v1::BenchmarkSpec& b) {
  if (!o.warmup.empty()) {
    if (o.warmup_steps) {
      return absl::InvalidArgumentError(
          "--warmup: give --warmup (auto or N) or --warmup-steps N, not both");
    }
    if (absl::AsciiStrToLower(o.warmup) == "auto") {
      b.set_warmup_auto(true);
    } else {
      int64_t n = 0;
      if (!absl::SimpleAtoi(o.warmup, &n) || n < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--warmup: expected auto or a number of steps (0 or more), got '", o.warmup, "'"));
      }
      b.set_warmup_steps(n);
    }
  }
  if (o.warmup_max_steps) b.set_warmup_max_steps(*o.warmup_max_steps);
  if (!o.attention.empty()) {
    auto a = ParseAttention(o.attention);
    if (!a.ok()) return FlagError(a.status(), "attention");
    b.set_attention(*a);
  }
  if (!o.optimizer.empty()) {
    auto opt = ParseOptimizerImpl(o.optimizer);
    if (!opt.ok()) return FlagError(opt.status(), "optimizer");
    b.set_optimizer_impl(*opt);
  }
  if (o.allow_tf32) b.set_allow_tf32(true);
  if (o.cuda_graph) b.set_cuda_graph(true);
  if (o.weight_copies) b.set_weight_copies(true);
  if (o.fused_ops) b.set_fused_ops(true);
  if (o.optimizer_overlap) b.set_optimizer_overlap(true);
  if (o.autograd) b.set_autograd(true);
  return absl::OkStatus();
}

// "a, b,c" -> {"a", "b", "c"}; empty items (",,", a trailing comma) dropped.
std::vector<std::string> ListItems(const std::string& text) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    items.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return items;
}

// --group, or --device (the ranks) with --backend.
absl::Status ApplyDdpTarget(const DdpOptions& o, v1::CollectiveTarget& t) {
  if (!o.group.empty() && !o.devices.empty()) {
    return absl::InvalidArgumentError(
        "--group and --device: give one (a resident group, or devices and a backend)");
  }
  if (o.group.empty() && ListItems(o.devices).empty()) {
    return absl::InvalidArgumentError(
        "--device: give the ranks' devices in rank order (e.g. cpu:0,cpu:1 or cuda:0,cuda:1), "
        "or --group ID for a resident group");
  }
  if (!o.group.empty() && !o.backend.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend: a resident group has its own backend; give --backend with --device, not "
        "with --group (got --backend ",
        o.backend, ")"));
  }
  t.set_group(o.group);
  for (const std::string& d : ListItems(o.devices)) t.add_devices(d);
  if (!o.backend.empty()) {
    auto b = ParseBackend(o.backend);
    if (!b.ok()) return FlagError(b.status(), "backend");
    t.set_backend(*b);
  }
  return absl::OkStatus();
}

// --variants, --bucket-mb, --optimizers, --sharded-optimizer and
// --gradient-compressions.
absl::Status ApplyDdpRuns(const DdpOptions& o, v1::DdpSpec& d) {
  for (const std::string& item : ListItems(o.variants)) {
    auto v = ParseDdpVariant(item);
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--variants: unknown variant '", item,
                                                     "'; expected ", DdpVariantChoices(),
                                                     ", separated by commas"));
    }
    d.add_variants(*v);
  }
  for (const std::string& item : ListItems(o.bucket_mb)) {
    double mb = 0;
    if (!absl::SimpleAtod(item, &mb) || !std::isfinite(mb) || mb <= 0 || mb > kMaxDdpBucketMb) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--bucket-mb: expected bucket sizes in MB (10^6 bytes), above 0 and at "
          "most ",
          static_cast<int64_t>(kMaxDdpBucketMb), ", separated by commas; got '", item, "'"));
    }
    d.add_bucket_mb(mb);
  }
  // No --variants runs every variant, bucketed among them.
  const bool bucketed =
      d.variants().empty() || std::any_of(d.variants().begin(), d.variants().end(), [](int v) {
        return DdpVariantTakesBuckets(static_cast<v1::DdpVariant>(v));
      });
  if (!d.bucket_mb().empty() && !bucketed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bucket-mb: only the bucketed and reducer variants have buckets, and --variants ",
        o.variants, " leaves them out (add bucketed, or drop --bucket-mb)"));
  }
  if (o.sharded_optimizer && !o.optimizers.empty()) {
    return absl::InvalidArgumentError(
        "--sharded-optimizer and --optimizers: give one (--sharded-optimizer is --optimizers "
        "sharded_adamw)");
  }
  if (o.sharded_optimizer) d.add_optimizers(v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  for (const std::string& item : ListItems(o.optimizers)) {
    auto opt = ParseDdpOptimizer(item);
    if (!opt.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--optimizers: unknown optimizer '", item,
                                                     "'; expected ", DdpOptimizerChoices(),
                                                     ", separated by commas"));
    }
    d.add_optimizers(*opt);
  }
  for (const std::string& item : ListItems(o.gradient_compressions)) {
    auto c = ParseDdpGradientCompression(item);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gradient-compressions: unknown gradient compression '", item,
                       "'; expected ", DdpGradientCompressionChoices(), ", separated by commas"));
    }
    d.add_gradient_compressions(*c);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobSpec> BuildBenchmarkSpec(const BenchmarkOptions& o) {
  v1::JobSpec spec;
  spec.set_device(o.device);
  v1::BenchmarkSpec* b = spec.mutable_benchmark();

  v1::ModelConfig* m = b->mutable_model();
  m->set_preset(o.preset);
  if (o.vocab_size) m->set_vocab_size(*o.vocab_size);
  if (o.d_model) m->set_d_model(*o.d_model);
  if (o.d_ff) m->set_d_ff(*o.d_ff);
  if (o.num_layers) m->set_num_layers(*o.num_layers);
  if (o.num_heads) m->set_num_heads(*o.num_heads);
  if (o.rope_theta) m->set_rope_theta(*o.rope_theta);

  if (!o.mode.empty()) {
    auto mode = ParseMode(o.mode);
    if (!mode.ok()) return FlagError(mode.status(), "mode");
    b->set_mode(*mode);
  }
  if (!o.precision.empty()) {
    auto precision = ParsePrecision(o.precision);
    if (!precision.ok()) return FlagError(precision.status(), "precision");
    b->set_precision(*precision);
  }
  if (o.batch_size) b->set_batch_size(*o.batch_size);
  if (o.context_length) b->set_context_length(*o.context_length);
  // Explicit presence: --warmup-steps 0 means "no warm-up", not "default".
  if (o.warmup_steps) b->set_warmup_steps(*o.warmup_steps);
  if (o.measure_steps) b->set_measure_steps(*o.measure_steps);
  if (o.seed) b->set_seed(*o.seed);
  if (o.export_parity) b->set_export_parity(true);
  if (absl::Status s = ApplyOptionFlags(o, *b); !s.ok()) return s;
  return spec;
}

absl::StatusOr<v1::JobSpec> BuildMemorySpec(const MemoryOptions& o) {
  if (o.step.measure_steps) {
    return absl::InvalidArgumentError(
        "--steps: a memory request records --record-steps steps after the warm-up; give that");
  }
  if (o.step.export_parity) {
    return absl::InvalidArgumentError(
        "--export-parity: only `submit benchmark` writes parity bundles");
  }
  if (o.step.cuda_graph) {
    return absl::InvalidArgumentError(
        "--cuda-graph: not supported by a memory request (a graph replays its own memory pool)");
  }
  auto bench = BuildBenchmarkSpec(o.step);
  if (!bench.ok()) return bench.status();
  v1::JobSpec spec;
  spec.set_device(bench->device());
  v1::MemorySpec* m = spec.mutable_memory();
  *m->mutable_step() = bench->benchmark();
  if (o.record_steps) m->set_record_steps(*o.record_steps);
  if (o.max_entries) m->set_max_entries(*o.max_entries);
  if (o.top_allocations) m->set_top_allocations(*o.top_allocations);
  if (!o.stacks.empty()) {
    const std::string l = absl::AsciiStrToLower(o.stacks);
    if (l == "none") {
      m->set_stacks(v1::MEMORY_STACKS_NONE);
    } else if (l == "cpp" || l == "c++") {
      m->set_stacks(v1::MEMORY_STACKS_CPP);
    } else if (l == "all") {
      m->set_stacks(v1::MEMORY_STACKS_ALL);
    } else if (l == "python") {
      m->set_stacks(v1::MEMORY_STACKS_PYTHON);  // the daemon says why it refuses it
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--stacks: unknown value '", o.stacks, "'; expected none, cpp or all"));
    }
  }
  for (absl::string_view item : absl::StrSplit(o.contexts, ',', absl::SkipWhitespace())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(item, &n) || n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--contexts: expected positive numbers separated by commas, got '", item, "'"));
    }
    m->add_context_lengths(n);
  }
  for (absl::string_view item : absl::StrSplit(o.modes, ',', absl::SkipWhitespace())) {
    auto mode = ParseMode(std::string(absl::StripAsciiWhitespace(item)));
    if (!mode.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--modes: unknown mode '", item, "'; expected forward, forward_backward or train_step"));
    }
    m->add_modes(*mode);
  }
  for (absl::string_view item : absl::StrSplit(o.precisions, ',', absl::SkipWhitespace())) {
    auto p = ParsePrecision(std::string(absl::StripAsciiWhitespace(item)));
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--precisions: unknown precision '", item,
                                                     "'; expected fp32, bf16 or fp16"));
    }
    m->add_precisions(*p);
  }
  return spec;
}

absl::StatusOr<v1::JobSpec> BuildProfileSpec(const ProfileOptions& o) {
  if (o.step.export_parity) {
    return absl::InvalidArgumentError(
        "--export-parity: only `submit benchmark` writes parity bundles");
  }
  if (o.step.cuda_graph) {
    return absl::InvalidArgumentError(
        "--cuda-graph: not supported by a profile request (a graph replay has no operators or "
        "ranges to attribute its kernels to)");
  }
  auto bench = BuildBenchmarkSpec(o.step);
  if (!bench.ok()) return bench.status();
  v1::JobSpec spec;
  spec.set_device(bench->device());
  v1::ProfileSpec* p = spec.mutable_profile();
  *p->mutable_step() = bench->benchmark();
  if (o.profile_steps) p->set_profile_steps(*o.profile_steps);
  for (absl::string_view item : absl::StrSplit(o.activities, ',', absl::SkipWhitespace())) {
    const std::string l = absl::AsciiStrToLower(absl::StripAsciiWhitespace(item));
    if (l == "cpu") {
      p->add_activities(v1::PROFILER_ACTIVITY_CPU);
    } else if (l == "cuda" || l == "gpu") {
      p->add_activities(v1::PROFILER_ACTIVITY_CUDA);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--activities: unknown activity '", item, "'; expected cpu and/or cuda"));
    }
  }
  p->set_record_shapes(o.record_shapes);
  p->set_profile_memory(o.profile_memory);
  return spec;
}

absl::StatusOr<v1::EstimateRequest> BuildEstimateRequest(const EstimateOptions& o) {
  // The step's flags mean what they mean for a benchmark: build one, take its part.
  auto spec = BuildBenchmarkSpec(o.step);
  if (!spec.ok()) return spec.status();
  const v1::BenchmarkSpec& b = spec->benchmark();
  v1::EstimateRequest r;
  *r.mutable_model() = b.model();
  if (b.has_batch_size()) r.set_batch_size(b.batch_size());
  if (b.has_context_length()) r.set_context_length(b.context_length());
  r.set_precision(b.precision());
  r.set_mode(b.mode());
  r.set_autograd(b.autograd());
  v1::Sharding* sh = r.mutable_sharding();
  if (o.data_parallel) sh->set_data_parallel(*o.data_parallel);
  if (o.tensor_parallel) sh->set_tensor_parallel(*o.tensor_parallel);
  if (o.pipeline_stages) sh->set_pipeline_stages(*o.pipeline_stages);
  sh->set_zero_stage(o.zero_stage);
  sh->set_fsdp(o.fsdp);
  return r;
}

absl::StatusOr<v1::JobSpec> BuildDdpSpec(const DdpOptions& o) {
  // The one step field the daemon would never see (a JobSpec's device, not
  // the step's): refused rather than dropped.
  if (!o.step.device.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step.device: a data-parallel job runs on its ranks' devices (--device, rank order) or a "
        "--group, not on the step's device; got ",
        o.step.device));
  }
  if (o.global_batch && o.step.batch_size) {
    return absl::InvalidArgumentError(
        "--global-batch and --batch-size: give one (the batch of all ranks together, split "
        "evenly, or each rank's)");
  }
  // The step's flags mean what they mean for a benchmark: build one, take its part.
  auto bench = BuildBenchmarkSpec(o.step);
  if (!bench.ok()) {
    // submit ddp spells the optimizer's path --optimizer-impl (--optimizers
    // is its list of optimizers).
    if (absl::StartsWith(bench.status().message(), "--optimizer:")) {
      return absl::Status(
          bench.status().code(),
          absl::StrCat("--optimizer-impl:",
                       absl::StripPrefix(bench.status().message(), "--optimizer:")));
    }
    return bench.status();
  }
  v1::JobSpec spec;
  v1::DdpSpec* d = spec.mutable_ddp();
  *d->mutable_step() = bench->benchmark();
  if (absl::Status s = ApplyDdpTarget(o, *d->mutable_target()); !s.ok()) return s;
  if (o.global_batch) d->set_global_batch_size(*o.global_batch);
  if (absl::Status s = ApplyDdpRuns(o, *d); !s.ok()) return s;
  if (o.timeout_seconds) d->set_timeout_seconds(*o.timeout_seconds);
  if (o.no_traces) d->set_traces(false);
  return spec;
}

}  // namespace benchd::client
