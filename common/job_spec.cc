#include "common/job_spec.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/collective_math.h"
#include "common/ddp_spec.h"
#include "common/model_config.h"
#include "common/options.h"
#include "common/sweep_spec.h"

namespace benchd {

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected ", lo, "..", hi, ", got ", value));
  }
  return absl::OkStatus();
}

namespace {

// "inf", "-inf", "nan" (absl::StrCat's spelling of the others).
std::string NumberText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrCat(v);
}

absl::Status NotFinite(absl::string_view field, double v) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": expected a finite number, got ", NumberText(v)));
}

}  // namespace

absl::StatusOr<v1::BenchmarkSpec> ResolveBenchmark(const v1::BenchmarkSpec& in) {
  v1::BenchmarkSpec out = in;
  auto model = ResolveModelConfig(in.model(), "benchmark.model.");
  if (!model.ok()) return model.status();
  *out.mutable_model() = *model;

  if (!v1::BenchmarkMode_IsValid(in.mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("benchmark.mode: unknown value ", in.mode(),
                     "; expected forward, forward_backward or train_step"));
  }
  if (!v1::Precision_IsValid(in.precision())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.precision: unknown value ", in.precision(), "; expected fp32, bf16 or fp16"));
  }
  if (out.mode() == v1::BENCHMARK_MODE_UNSPECIFIED) out.set_mode(v1::BENCHMARK_MODE_FORWARD);
  if (out.precision() == v1::PRECISION_UNSPECIFIED) out.set_precision(v1::PRECISION_FP32);
  if (!out.has_batch_size()) out.set_batch_size(4);
  if (!out.has_context_length()) out.set_context_length(128);
  // With warmup_auto the count is the worker's to find (common/options.cc).
  if (!out.has_warmup_steps() && !out.warmup_auto()) out.set_warmup_steps(5);
  if (!out.has_measure_steps()) out.set_measure_steps(10);

  absl::Status s;
  if (!(s = CheckRange("benchmark.batch_size", out.batch_size(), 1, kMaxBatch)).ok()) return s;
  if (!(s = CheckRange("benchmark.context_length", out.context_length(), 1, kMaxContext)).ok())
    return s;
  if (!(s = CheckRange("benchmark.warmup_steps", out.warmup_steps(), 0, kMaxSteps)).ok()) return s;
  if (!(s = CheckRange("benchmark.measure_steps", out.measure_steps(), 1, kMaxSteps)).ok())
    return s;
  if (!(s = ResolveBenchmarkOptions(in, out)).ok()) return s;
  if (out.export_parity() && ParameterCount(out.model()) > kMaxParityParameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.export_parity: the model has ", ParameterCount(out.model()),
        " parameters; parity bundles are refused above ", kMaxParityParameters,
        " because the bundle holds every weight in fp32 (",
        4 * ParameterCount(out.model()) / 1000000,
        " MB here) and the reference must load them all; check parity on a smaller preset"));
  }
  return out;
}

namespace {

// The step is a benchmark's (ResolveBenchmark: same defaults, same checks);
// the fields that only mean something to a timed benchmark are refused.
absl::StatusOr<v1::MemorySpec> ResolveMemory(const v1::MemorySpec& in) {
  v1::MemorySpec out = in;
  const v1::BenchmarkSpec& step = in.step();
  if (step.has_measure_steps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory.step.measure_steps: not used by a memory request (got ", step.measure_steps(),
        "); give memory.record_steps, the steps recorded after the warm-up"));
  }
  if (step.cuda_graph()) {
    return absl::InvalidArgumentError(
        "memory.step.cuda_graph: not supported by a memory request; a graph replays its own "
        "memory pool, so the allocator's history would not show the step's allocations");
  }
  if (step.export_parity()) {
    return absl::InvalidArgumentError(
        "memory.step.export_parity: only a benchmark request writes parity bundles");
  }
  if (!out.has_record_steps()) out.set_record_steps(kDefaultMemoryRecordSteps);
  if (!out.has_max_entries()) out.set_max_entries(kDefaultMemoryMaxEntries);
  if (!out.has_top_allocations()) out.set_top_allocations(kDefaultMemoryTopAllocations);
  absl::Status s;
  if (!(s = CheckRange("memory.record_steps", out.record_steps(), 1, kMaxMemoryRecordSteps)).ok())
    return s;
  if (!(s = CheckRange("memory.max_entries", out.max_entries(), kMinMemoryMaxEntries,
                       kMaxMemoryMaxEntries))
           .ok())
    return s;
  if (!(s = CheckRange("memory.top_allocations", out.top_allocations(), 1,
                       kMaxMemoryTopAllocations))
           .ok())
    return s;
  if (!v1::MemoryStacks_IsValid(in.stacks())) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory.stacks: unknown value ", in.stacks(), "; expected none, cpp or all"));
  }
  if (in.stacks() == v1::MEMORY_STACKS_PYTHON) {
    return absl::InvalidArgumentError(
        "memory.stacks: python stacks would be empty: benchd-worker runs the model from C++ "
        "and has no Python interpreter; expected none, cpp or all (all = cpp here)");
  }
  if (out.stacks() == v1::MEMORY_STACKS_UNSPECIFIED) out.set_stacks(v1::MEMORY_STACKS_CPP);

  for (int i = 0; i < in.context_lengths_size(); ++i) {
    if (!(s = CheckRange(absl::StrCat("memory.context_lengths[", i, "]"), in.context_lengths(i), 1,
                         kMaxContext))
             .ok())
      return s;
  }
  for (int i = 0; i < in.modes_size(); ++i) {
    if (!v1::BenchmarkMode_IsValid(in.modes(i)) || in.modes(i) == v1::BENCHMARK_MODE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory.modes[", i, "]: unknown value ", in.modes(i),
                       "; expected forward, forward_backward or train_step"));
    }
  }
  for (int i = 0; i < in.precisions_size(); ++i) {
    if (!v1::Precision_IsValid(in.precisions(i)) || in.precisions(i) == v1::PRECISION_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("memory.precisions[", i, "]: unknown value ",
                                                     in.precisions(i),
                                                     "; expected fp32, bf16 or fp16"));
    }
  }
  // In 64 bits: three lists of 1,300 entries each overflow an int.
  const int64_t runs = int64_t{std::max(1, in.context_lengths_size())} *
                       std::max(1, in.modes_size()) * std::max(1, in.precisions_size());
  if (runs > kMaxMemoryRuns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory: the sweep has ", runs, " runs (context_lengths x modes x precisions); at most ",
        kMaxMemoryRuns, " in one request"));
  }

  // Each run of the sweep must be a valid benchmark step on its own: resolve
  // them all here so a bad cell (an optimizer for forward, say) is refused now.
  auto resolved = ResolveBenchmark(step);
  if (!resolved.ok()) {
    return absl::Status(
        resolved.status().code(),
        absl::StrCat("memory.step.", absl::StripPrefix(resolved.status().message(), "benchmark.")));
  }
  for (const v1::BenchmarkSpec& cell : MemoryRunSpecs(out, *resolved)) {
    auto r = ResolveBenchmark(cell);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("memory (run ", MemoryRunName(cell),
                                                          "): ", r.status().message()));
    }
  }
  resolved->clear_measure_steps();
  *out.mutable_step() = *resolved;
  return out;
}

// The step is a benchmark's (ResolveBenchmark: same defaults, same checks);
// what a profile cannot attribute or does not write is refused.
absl::StatusOr<v1::ProfileSpec> ResolveProfile(const v1::ProfileSpec& in) {
  v1::ProfileSpec out = in;
  if (in.step().cuda_graph()) {
    return absl::InvalidArgumentError(
        "profile.step.cuda_graph: not supported by a profile request; a graph replay has no "
        "operators or named ranges to attribute its kernels to (profile the eager step, or "
        "benchmark the graph)");
  }
  if (in.step().export_parity()) {
    return absl::InvalidArgumentError(
        "profile.step.export_parity: only a benchmark request writes parity bundles");
  }
  if (in.with_stack()) {
    return absl::InvalidArgumentError(
        "profile.with_stack: the PyTorch profiler's stacks are Python stacks, and benchd-worker "
        "runs the model from C++ with no Python interpreter, so they would be empty; the named "
        "ranges (forward, attention.softmax, ...) and record_shapes say where an operator comes "
        "from, and the memory request records C++ stacks of allocations");
  }
  auto step = ResolveBenchmark(in.step());
  if (!step.ok()) {
    return absl::Status(
        step.status().code(),
        absl::StrCat("profile.step.", absl::StripPrefix(step.status().message(), "benchmark.")));
  }
  *out.mutable_step() = *step;
  if (!out.has_profile_steps()) out.set_profile_steps(kDefaultProfileSteps);
  if (auto s = CheckRange("profile.profile_steps", out.profile_steps(), 1, kMaxProfileSteps);
      !s.ok()) {
    return s;
  }
  bool seen[3] = {false, false, false};
  for (int i = 0; i < in.activities_size(); ++i) {
    const int a = in.activities(i);
    if (a != v1::PROFILER_ACTIVITY_CPU && a != v1::PROFILER_ACTIVITY_CUDA) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.activities[", i, "]: unknown value ", a, "; expected cpu or cuda"));
    }
    if (seen[a]) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.activities[", i, "]: ", a == 1 ? "cpu" : "cuda", " given twice"));
    }
    seen[a] = true;
  }
  if (seen[v1::PROFILER_ACTIVITY_CUDA] && !seen[v1::PROFILER_ACTIVITY_CPU]) {
    return absl::InvalidArgumentError(
        "profile.activities: cuda without cpu cannot attribute kernels to the named ranges "
        "(they are host-side events); expected cpu, or cpu and cuda");
  }
  return out;
}

absl::StatusOr<v1::AttentionSpec> ResolveAttention(const v1::AttentionSpec& in) {
  v1::AttentionSpec out = in;
  if (!in.preset().empty()) {
    if (in.preset() != kAttentionLeaderboardPreset) {
      return absl::InvalidArgumentError(absl::StrCat("attention.preset: unknown preset ",
                                                     QuotedForError(in.preset()), "; expected ",
                                                     kAttentionLeaderboardPreset, " or none"));
    }
    // The CS336 leaderboard: what the request leaves unset.
    if (out.precision() == v1::PRECISION_UNSPECIFIED) out.set_precision(v1::PRECISION_BF16);
    if (!out.has_batch_size()) out.set_batch_size(1);
    if (!out.has_num_heads()) out.set_num_heads(16);
    if (!out.has_seq_len()) out.set_seq_len(16384);
    if (!out.has_head_dim()) out.set_head_dim(64);
    out.set_causal(true);
    out.set_flush_l2(true);
  }
  if (!out.has_batch_size()) out.set_batch_size(kDefaultAttentionBatch);
  if (!out.has_head_dim()) out.set_head_dim(kDefaultAttentionHeadDim);
  if (!out.has_seq_len()) out.set_seq_len(kDefaultAttentionSeqLen);
  if (!out.has_warmup_passes()) out.set_warmup_passes(kDefaultAttentionWarmupPasses);
  if (!out.has_passes()) out.set_passes(kDefaultAttentionPasses);
  absl::Status s;
  if (!(s = CheckRange("attention.batch_size", out.batch_size(), 1, kMaxAttentionBatch)).ok())
    return s;
  if (out.has_num_heads() &&
      !(s = CheckRange("attention.num_heads", out.num_heads(), 1, kMaxAttentionHeads)).ok())
    return s;
  if (!(s = CheckRange("attention.head_dim", out.head_dim(), 1, kMaxAttentionHeadDim)).ok())
    return s;
  if (!(s = CheckRange("attention.seq_len", out.seq_len(), 1, kMaxContext)).ok()) return s;
  if (!(s = CheckRange("attention.warmup_passes", out.warmup_passes(), 0,
                       kMaxAttentionWarmupPasses))
           .ok())
    return s;
  if (!(s = CheckRange("attention.passes", out.passes(), 1, kMaxSteps)).ok()) return s;
  if (out.has_memory_cap_bytes() &&
      !(s = CheckRange("attention.memory_cap_bytes", out.memory_cap_bytes(),
                       kMinAttentionMemoryCapBytes, kMaxAttentionMemoryCapBytes))
           .ok())
    return s;
  // Products in doubles: B·H·T² at the sizes' bounds (2^12·2^10·2^40) is
  // past what a check should have to think about in 64-bit integers.
  const double rows = static_cast<double>(out.batch_size()) *
                      static_cast<double>(out.has_num_heads() ? out.num_heads() : 1);
  const double scores = rows * static_cast<double>(out.seq_len()) * out.seq_len();
  if (scores > static_cast<double>(kMaxAttentionScoreElements)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention.seq_len: one score matrix (batch_size x num_heads x seq_len^2 = ",
                     out.batch_size(), " x ", out.has_num_heads() ? out.num_heads() : 1, " x ",
                     out.seq_len(), "^2) would have ", absl::StrFormat("%.0f", scores),
                     " elements; at most ", kMaxAttentionScoreElements, " (2^34) are accepted"));
  }
  const double inputs = rows * static_cast<double>(out.seq_len()) * out.head_dim();
  if (inputs > static_cast<double>(kMaxAttentionInputElements)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention.head_dim: each of Q, K, V (batch_size x num_heads x seq_len x head_dim) "
        "would have ",
        absl::StrFormat("%.0f", inputs), " elements; at most ", kMaxAttentionInputElements,
        " (2^32) are accepted"));
  }
  if (!v1::Precision_IsValid(in.precision())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention.precision: unknown value ", in.precision(), "; expected fp32, bf16 or fp16"));
  }
  if (out.precision() == v1::PRECISION_UNSPECIFIED) out.set_precision(v1::PRECISION_FP32);
  if (!v1::AttentionImpl_IsValid(in.implementation())) {
    return absl::InvalidArgumentError(absl::StrCat("attention.implementation: unknown value ",
                                                   in.implementation(), "; expected ",
                                                   AttentionChoices()));
  }
  if (out.implementation() == v1::ATTENTION_IMPL_UNSPECIFIED)
    out.set_implementation(v1::ATTENTION_IMPL_FAITHFUL);
  return out;
}

absl::StatusOr<v1::PrecisionSpec> ResolvePrecision(const v1::PrecisionSpec& in) {
  v1::PrecisionSpec out = in;
  std::set<int> seen;
  for (int i = 0; i < in.experiments_size(); ++i) {
    const int e = in.experiments(i);
    if (!v1::PrecisionExperiment_IsValid(e) || e == v1::PRECISION_EXPERIMENT_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("precision.experiments[", i,
                                                     "]: unknown value ", e,
                                                     "; expected accumulation or autocast"));
    }
    if (!seen.insert(e).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision.experiments[", i,
                       "]: ", PrecisionExperimentName(static_cast<v1::PrecisionExperiment>(e)),
                       " is given twice; expected accumulation and autocast, each at most once"));
    }
  }
  if (out.experiments_size() == 0) {
    out.add_experiments(v1::PRECISION_EXPERIMENT_ACCUMULATION);
    out.add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
  }
  seen.clear();
  for (int i = 0; i < in.autocast_dtypes_size(); ++i) {
    const int p = in.autocast_dtypes(i);
    if (p == v1::PRECISION_FP32 || p == v1::PRECISION_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "precision.autocast_dtypes[", i,
          "]: ", p == v1::PRECISION_FP32 ? "fp32" : "unspecified (fp32)",
          " is not an autocast dtype (autocast casts to a lower precision); expected bf16 or "
          "fp16"));
    }
    if (!v1::Precision_IsValid(p)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "precision.autocast_dtypes[", i, "]: unknown value ", p, "; expected bf16 or fp16"));
    }
    if (!seen.insert(p).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "precision.autocast_dtypes[", i, "]: ", PrecisionName(static_cast<v1::Precision>(p)),
          " is given twice; expected bf16 and fp16, each at most once"));
    }
  }
  if (out.autocast_dtypes_size() == 0) {
    out.add_autocast_dtypes(v1::PRECISION_BF16);
    out.add_autocast_dtypes(v1::PRECISION_FP16);
  }
  if (!out.has_count()) out.set_count(kDefaultPrecisionCount);
  if (auto s = CheckRange("precision.count", out.count(), 1, kMaxPrecisionCount); !s.ok()) return s;
  if (!out.has_addend()) out.set_addend(kDefaultPrecisionAddend);
  // NaN and inf were refused by CheckFiniteNumbers.
  if (out.addend() == 0 || std::abs(out.addend()) > kMaxPrecisionAddend) {
    return absl::InvalidArgumentError(absl::StrCat(
        "precision.addend: expected a number other than 0 with |addend| <= ", kMaxPrecisionAddend,
        " (fp16's largest finite value), got ", NumberText(out.addend())));
  }
  return out;
}

}  // namespace

// A devices target: names well formed, no repeats, one kind of device, a
// backend that can run there (nccl needs CUDA devices).
absl::Status ResolveDevicesTarget(const std::string& where, v1::CollectiveTarget* t) {
  // In a cluster, another member's device: "node1/cuda:0" (server/cluster/cluster_workers.h).
  static const std::regex kDevice("^([a-z][a-z0-9-]{0,62}/)?(cpu|cuda):[0-9]{1,3}$");
  if (t->devices_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no devices; expected a group id or 2 or more devices"));
  }
  std::set<std::string> seen;
  bool cuda = false, cpu = false;
  for (const std::string& d : t->devices()) {
    if (!std::regex_match(d, kDevice)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".devices: ", QuotedForError(d),
                       " is not a device name; expected cpu:N or cuda:N (NODE/cpu:N for a "
                       "cluster member's)"));
    }
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".devices: ", d, " appears twice in [", absl::StrJoin(t->devices(), ", "),
          "]; each rank needs a device (worker) of its own"));
    }
    (d.substr(d.find('/') + 1).rfind("cuda:", 0) == 0 ? cuda : cpu) = true;
  }
  if (cuda && cpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".devices: [", absl::StrJoin(t->devices(), ", "),
                     "] mixes cpu and cuda devices; a group is all CPU workers or all GPUs"));
  }
  if (!v1::CollectiveBackend_IsValid(t->backend())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".backend: unknown value ", t->backend(), "; expected nccl or gloo"));
  }
  if (t->backend() == v1::COLLECTIVE_BACKEND_UNSPECIFIED)
    t->set_backend(cuda ? v1::COLLECTIVE_BACKEND_NCCL : v1::COLLECTIVE_BACKEND_GLOO);
  if (t->backend() == v1::COLLECTIVE_BACKEND_NCCL && cpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".backend: nccl needs CUDA devices, got [",
                     absl::StrJoin(t->devices(), ", "), "]; use gloo for CPU tensors"));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<v1::CollectiveSpec> ResolveCollective(const v1::CollectiveSpec& in) {
  v1::CollectiveSpec out = in;
  out.clear_group();
  out.clear_devices();
  out.clear_backend();
  out.clear_backends();
  out.clear_targets();
  // Conveniences first, then explicit targets, in the order given.
  if (!in.group().empty()) out.add_targets()->set_group(in.group());
  // Named as given here; folded into targets they would be named as targets.
  if (!v1::CollectiveBackend_IsValid(in.backend())) {
    return absl::InvalidArgumentError(absl::StrCat("collective.backend: unknown value ",
                                                   in.backend(), "; expected nccl or gloo"));
  }
  for (int i = 0; i < in.backends_size(); ++i) {
    if (!v1::CollectiveBackend_IsValid(in.backends(i))) {
      return absl::InvalidArgumentError(absl::StrCat("collective.backends[", i, "]: unknown value ",
                                                     in.backends(i), "; expected nccl or gloo"));
    }
  }
  if (in.backend() != v1::COLLECTIVE_BACKEND_UNSPECIFIED && in.backends_size() > 0) {
    return absl::InvalidArgumentError("collective.backends: give backend or backends, not both");
  }
  if (in.devices_size() > 0) {
    std::vector<int> backends(in.backends().begin(), in.backends().end());
    if (backends.empty()) backends.push_back(in.backend());
    for (int b : backends) {
      v1::CollectiveTarget* t = out.add_targets();
      *t->mutable_devices() = in.devices();
      t->set_backend(static_cast<v1::CollectiveBackend>(b));
    }
  } else if (in.backend() != v1::COLLECTIVE_BACKEND_UNSPECIFIED || in.backends_size() > 0) {
    return absl::InvalidArgumentError(
        "collective.backend: a backend needs devices (collective.devices); a group has its own");
  }
  for (const auto& t : in.targets()) *out.add_targets() = t;
  if (out.targets_size() == 0) {
    return absl::InvalidArgumentError(
        "collective: nothing to run on; expected a group id (collective.group) or devices and a "
        "backend (collective.devices, e.g. cuda:0,cuda:1 with nccl)");
  }
  // Each list is within its limit (CheckSizeLimits); folded together they
  // must be too, or the resolved spec would not resolve again.
  if (out.targets_size() > kMaxCollectiveTargets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "collective.targets: expected at most ", kMaxCollectiveTargets,
        " targets in one request (group, devices x backends and targets together), got ",
        out.targets_size()));
  }
  bool any_group = false;
  int smallest_devices = 1 << 30;
  for (int i = 0; i < out.targets_size(); ++i) {
    v1::CollectiveTarget* t = out.mutable_targets(i);
    const std::string where = absl::StrCat("collective.targets[", i, "]");
    if (!t->group().empty()) {
      if (t->devices_size() > 0 || t->backend() != v1::COLLECTIVE_BACKEND_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a group id or devices with a backend, not both (group ",
                         QuotedForError(t->group()), ")"));
      }
      any_group = true;
      continue;
    }
    if (auto st = ResolveDevicesTarget(where, t); !st.ok()) return st;
    smallest_devices = std::min(smallest_devices, t->devices_size());
  }
  if (any_group && in.world_sizes_size() > 0) {
    return absl::InvalidArgumentError(
        "collective.world_sizes: a group has one world size; sweep world sizes with devices "
        "and a backend instead of a group");
  }
  std::set<int> ws_seen;
  for (int i = 0; i < in.world_sizes_size(); ++i) {
    const int w = in.world_sizes(i);
    const std::string field = absl::StrCat("collective.world_sizes[", i, "]");
    if (w < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", w, " is not a world size to measure; expected 2 or more ranks"));
    }
    if (w > smallest_devices) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", w, " ranks need ", w, " devices; a target has only ", smallest_devices));
    }
    if (!ws_seen.insert(w).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", w, " appears twice"));
    }
  }
  if (in.world_sizes_size() == 0 && smallest_devices == 1) {
    return absl::InvalidArgumentError(
        "collective.devices: world size 1 (one device); a collective needs 2 or more ranks");
  }

  if (!v1::CollectiveOp_IsValid(in.op())) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective.op: unknown value ", in.op(),
                     "; expected all_reduce, all_gather, reduce_scatter, broadcast or all_to_all"));
  }
  if (out.op() == v1::COLLECTIVE_OP_UNSPECIFIED) out.set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  if (!v1::CollectiveDtype_IsValid(in.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("collective.dtype: unknown value ", in.dtype(),
                                                   "; expected fp32, fp16, bf16, fp64 or int32"));
  }
  if (out.dtype() == v1::COLLECTIVE_DTYPE_UNSPECIFIED) out.set_dtype(v1::COLLECTIVE_DTYPE_FP32);

  absl::Status st;
  if (in.sizes_bytes_size() > 0) {
    if (in.has_min_bytes() || in.has_max_bytes() || in.has_factor()) {
      return absl::InvalidArgumentError(
          "collective.sizes_bytes: give a list of sizes or min_bytes/max_bytes/factor, not both");
    }
    for (int i = 0; i < in.sizes_bytes_size(); ++i) {
      if (!(st = CheckRange(absl::StrCat("collective.sizes_bytes[", i, "]"), in.sizes_bytes(i), 1,
                            kMaxCollectiveBytes))
               .ok())
        return st;
    }
  } else {
    const int64_t min = in.has_min_bytes() ? in.min_bytes() : kDefaultCollectiveMinBytes;
    const int64_t max = in.has_max_bytes() ? in.max_bytes() : min;
    const int64_t factor = in.has_factor() ? in.factor() : kDefaultCollectiveFactor;
    if (!(st = CheckRange("collective.min_bytes", min, 1, kMaxCollectiveBytes)).ok()) return st;
    if (!(st = CheckRange("collective.max_bytes", max, 1, kMaxCollectiveBytes)).ok()) return st;
    if (min > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective.min_bytes: ", min, " is more than max_bytes ", max));
    }
    if (!(st = CheckRange("collective.factor", factor, 2, kMaxCollectiveFactor)).ok()) return st;
    for (int64_t s : SweepSizes(min, max, factor)) out.add_sizes_bytes(s);
    out.clear_min_bytes();
    out.clear_max_bytes();
    out.clear_factor();
  }
  if (out.sizes_bytes_size() > kMaxCollectiveSizes) {
    return absl::InvalidArgumentError(absl::StrCat("collective: ", out.sizes_bytes_size(),
                                                   " sizes; at most ", kMaxCollectiveSizes,
                                                   " in one request"));
  }
  if (!out.has_warmup_iters()) out.set_warmup_iters(kDefaultCollectiveWarmup);
  if (!out.has_iters()) out.set_iters(kDefaultCollectiveIters);
  if (!(st =
            CheckRange("collective.warmup_iters", out.warmup_iters(), 0, kMaxCollectiveWarmupIters))
           .ok())
    return st;
  if (!(st = CheckRange("collective.iters", out.iters(), 1, kMaxCollectiveIters)).ok()) return st;
  if (out.op() == v1::COLLECTIVE_OP_ALL_TO_ALL && in.in_place()) {
    return absl::InvalidArgumentError(
        "collective.in_place: all_to_all has no in-place form in c10d (alltoall_base needs "
        "separate input and output); run it out of place");
  }
  // c10d's all_reduce and broadcast only exist in place: say so in the spec.
  if (out.op() == v1::COLLECTIVE_OP_ALL_REDUCE || out.op() == v1::COLLECTIVE_OP_BROADCAST) {
    out.set_in_place(true);
  }
  // Unset or 0 = the default; out of range is refused, never replaced.
  auto timeout = ResolveTimeoutSeconds("collective.timeout_seconds", in.timeout_seconds());
  if (!timeout.ok()) return timeout.status();
  out.set_timeout_seconds(*timeout);
  return out;
}

}  // namespace

std::vector<v1::CollectiveTarget> CollectiveSeries(const v1::CollectiveSpec& c) {
  std::vector<v1::CollectiveTarget> out;
  for (const auto& t : c.targets()) {
    if (!t.group().empty() || c.world_sizes_size() == 0) {
      out.push_back(t);
      continue;
    }
    for (int w : c.world_sizes()) {
      v1::CollectiveTarget cut = t;
      cut.mutable_devices()->DeleteSubrange(w, cut.devices_size() - w);
      out.push_back(std::move(cut));
    }
  }
  return out;
}

std::vector<std::string> CollectiveDevices(const v1::CollectiveSpec& c) {
  std::set<std::string> all;
  for (const auto& t : c.targets()) all.insert(t.devices().begin(), t.devices().end());
  return {all.begin(), all.end()};
}

std::string MemoryRunName(const v1::BenchmarkSpec& cell) {
  return absl::StrCat("ctx", cell.context_length(), "-", ModeName(cell.mode()), "-",
                      PrecisionName(cell.precision()));
}

std::vector<v1::BenchmarkSpec> MemoryRunSpecs(const v1::MemorySpec& memory,
                                              const v1::BenchmarkSpec& step) {
  std::vector<int64_t> contexts(memory.context_lengths().begin(), memory.context_lengths().end());
  std::vector<v1::BenchmarkMode> modes;
  for (int m : memory.modes()) modes.push_back(static_cast<v1::BenchmarkMode>(m));
  std::vector<v1::Precision> precisions;
  for (int p : memory.precisions()) precisions.push_back(static_cast<v1::Precision>(p));
  if (contexts.empty()) contexts.push_back(step.context_length());
  if (modes.empty()) modes.push_back(step.mode());
  if (precisions.empty()) precisions.push_back(step.precision());
  std::vector<v1::BenchmarkSpec> cells;
  for (int64_t c : contexts) {
    for (v1::BenchmarkMode m : modes) {
      for (v1::Precision p : precisions) {
        v1::BenchmarkSpec cell = step;
        cell.set_context_length(c);
        cell.set_mode(m);
        cell.set_precision(p);
        cell.set_measure_steps(memory.record_steps() > 0 ? memory.record_steps()
                                                         : kDefaultMemoryRecordSteps);
        cells.push_back(std::move(cell));
      }
    }
  }
  return cells;
}

namespace {

// Runs `check` on the message field `f` of `message` (each element of a
// repeated one), with "path." / "path[i]." as the prefix of what it names;
// the first error wins. The descriptor walks (finite numbers, size limits)
// recurse through this.
absl::Status CheckSubmessages(const google::protobuf::Message& message,
                              const google::protobuf::FieldDescriptor* f, const std::string& path,
                              absl::Status (*check)(const google::protobuf::Message&,
                                                    absl::string_view prefix)) {
  const google::protobuf::Reflection* r = message.GetReflection();
  if (!f->is_repeated()) return check(r->GetMessage(message, f), absl::StrCat(path, "."));
  for (int i = 0; i < r->FieldSize(message, f); ++i) {
    if (auto s = check(r->GetRepeatedMessage(message, f, i), absl::StrCat(path, "[", i, "]."));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFiniteNumbers(const google::protobuf::Message& message,
                                absl::string_view prefix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(message, &fields);  // the set ones: a NaN or inf is never the default
  for (const FieldDescriptor* f : fields) {
    const std::string path = absl::StrCat(prefix, f->name());
    const auto value = [&](int i) -> double {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE)
        return i < 0 ? r->GetDouble(message, f) : r->GetRepeatedDouble(message, f, i);
      return i < 0 ? r->GetFloat(message, f) : r->GetRepeatedFloat(message, f, i);
    };
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        if (!f->is_repeated()) {
          if (!std::isfinite(value(-1))) return NotFinite(path, value(-1));
          break;
        }
        for (int i = 0; i < r->FieldSize(message, f); ++i) {
          if (!std::isfinite(value(i))) return NotFinite(absl::StrCat(path, "[", i, "]"), value(i));
        }
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (auto s = CheckSubmessages(message, f, path, CheckFiniteNumbers); !s.ok()) return s;
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status TooLong(const std::string& path, absl::string_view value, const FieldLimit& limit) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", limit.what, " of at most ",
                                                 limit.max, " bytes, got ", QuotedForError(value)));
}

// The fields' rows; a field without one gets the defaults (and fails
// job_spec_test's check that every request field has a row).
FieldLimit StringLimit(const google::protobuf::FieldDescriptor* f) {
  const FieldLimit* row = FindFieldLimit(kStringLimits, f->full_name());
  return row ? *row : FieldLimit{f->full_name(), kDefaultMaxStringBytes, "a string"};
}
FieldLimit ListLimit(const google::protobuf::FieldDescriptor* f) {
  const FieldLimit* row = FindFieldLimit(kListLimits, f->full_name());
  return row ? *row : FieldLimit{f->full_name(), kDefaultMaxListLength, "a list"};
}

}  // namespace

absl::Status CheckSizeLimits(const google::protobuf::Message& message, absl::string_view prefix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message.GetReflection();
  if (const auto& unknown = r->GetUnknownFields(message); !unknown.empty()) {
    // Kept, it would be stored with the job and shown as if it had been run.
    return absl::InvalidArgumentError(absl::StrCat(
        prefix.empty() ? message.GetDescriptor()->name() : absl::StripSuffix(prefix, "."),
        ": field number ", unknown.field(0).number(), " is not a field of ",
        message.GetDescriptor()->full_name(),
        " in this build of benchd (a client built from a newer bench.proto?); leave it unset "
        "or update the daemon"));
  }
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(message, &fields);  // the set ones: an unset field is empty
  for (const FieldDescriptor* f : fields) {
    const std::string path = absl::StrCat(prefix, f->name());
    if (f->is_repeated()) {
      // The count first: a million entries are refused before any is looked at.
      const FieldLimit list = ListLimit(f);
      if (const int n = r->FieldSize(message, f); n > list.max) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": expected at most ", list.max,
                                                       " entries (", list.what, "), got ", n));
      }
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: {
        const FieldLimit limit = StringLimit(f);
        std::string scratch;
        if (!f->is_repeated()) {
          const std::string& v = r->GetStringReference(message, f, &scratch);
          if (static_cast<int64_t>(v.size()) > limit.max) return TooLong(path, v, limit);
          break;
        }
        for (int i = 0; i < r->FieldSize(message, f); ++i) {
          const std::string& v = r->GetRepeatedStringReference(message, f, i, &scratch);
          if (static_cast<int64_t>(v.size()) > limit.max) {
            return TooLong(absl::StrCat(path, "[", i, "]"), v, limit);
          }
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (auto s = CheckSubmessages(message, f, path, CheckSizeLimits); !s.ok()) return s;
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

double DefaultProgressTimeoutSeconds(v1::JobKind kind) {
  switch (kind) {
    case v1::JOB_KIND_PROFILE:
    case v1::JOB_KIND_MEMORY:
      return 900;  // trace / snapshot export and analysis are silent
    case v1::JOB_KIND_ATTENTION:
      return 600;  // every pass is progress; one pass of the largest cell takes seconds
    case v1::JOB_KIND_PRECISION:
      return 600;  // seconds of work at most; each row is a log line
    default:
      return 600;  // benchmark, collective, ddp: every step, size or run is progress
  }
}

double DefaultProgressTimeoutSeconds(const v1::JobSpec& spec) {
  return DefaultProgressTimeoutSeconds(JobKindOf(spec));
}

double ProgressTimeoutSeconds(const v1::JobSpec& spec) {
  return spec.progress_timeout_seconds() > 0 ? spec.progress_timeout_seconds()
                                             : DefaultProgressTimeoutSeconds(spec);
}

absl::StatusOr<double> ResolveTimeoutSeconds(absl::string_view field, double value) {
  if (value == 0) return kDefaultCollectiveTimeoutSeconds;
  if (!(value >= 1 && value <= kMaxTimeoutSeconds)) {  // NaN fails both
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected 0 (= ", kDefaultCollectiveTimeoutSeconds, ") or 1..",
                     kMaxTimeoutSeconds, ", got ", NumberText(value)));
  }
  return value;
}

absl::Status CheckAttentionImplForDevice(v1::AttentionImpl a, v1::Precision precision,
                                         int64_t head_dim, const std::string& device,
                                         absl::string_view field) {
  const bool cuda = device.rfind("cuda:", 0) == 0;
  if (a == v1::ATTENTION_IMPL_FUSED) {
    // benchd's own kernels (worker/flash/flash_attention_kernel.h): CUDA only,
    // built for four head dims; float32 runs on their CUDA-core kernels.
    if (!cuda) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": fused is benchd's FlashAttention-2 CUDA kernels and ", device,
          " is a CPU; on a CPU use tiled (the same algorithm in ATen ops), faithful, sdpa, "
          "flash or math"));
    }
    if (head_dim != 16 && head_dim != 32 && head_dim != 64 && head_dim != 128) {
      return absl::InvalidArgumentError(
          absl::StrCat(field,
                       ": fused (benchd's FlashAttention-2 kernels) takes head dims 16, "
                       "32, 64 or 128 and this job's is ",
                       head_dim, "; use tiled, sdpa or faithful for it"));
    }
  }
  if (!cuda && (a == v1::ATTENTION_IMPL_SDPA_EFFICIENT || a == v1::ATTENTION_IMPL_SDPA_CUDNN)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": the ", AttentionName(a), " SDPA backend is a CUDA kernel and ", device,
        " is a CPU; on a CPU use faithful, sdpa, flash (ATen's CPU flash-attention kernel) or "
        "math"));
  }
  if (cuda && (precision == v1::PRECISION_FP32 || precision == v1::PRECISION_UNSPECIFIED) &&
      (a == v1::ATTENTION_IMPL_SDPA_FLASH || a == v1::ATTENTION_IMPL_SDPA_CUDNN)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the ", AttentionName(a),
                     " SDPA backend takes fp16/bf16 inputs only and this job is fp32 on ", device,
                     "; use precision bf16 or fp16, or attention efficient or math"));
  }
  return absl::OkStatus();
}

absl::Status CheckStepOptionsForDevice(const v1::BenchmarkSpec& step, const std::string& device,
                                       absl::string_view prefix) {
  const bool cuda = device.rfind("cuda:", 0) == 0;
  if (step.cuda_graph() && !cuda) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "cuda_graph: CUDA graphs need a CUDA device; this worker serves ", device));
  }
  const v1::ModelConfig& m = step.model();
  const int64_t head_dim = m.num_heads() > 0 ? m.d_model() / m.num_heads() : 0;
  return CheckAttentionImplForDevice(step.attention(), step.precision(), head_dim, device,
                                     absl::StrCat(prefix, "attention"));
}

absl::Status CheckKindForDevice(const v1::JobSpec& spec, const std::string& device) {
  if (spec.has_sweep()) {
    // Each cell runs on the device as a request of its own.
    auto cells = ExpandSweep(spec);
    if (!cells.ok()) return cells.status();
    for (size_t i = 0; i < cells->size(); ++i) {
      const SweepCellSpec& cell = (*cells)[i];
      if (auto s = CheckKindForDevice(cell.spec, device); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("sweep cell ", i, " (",
                                   SweepCellLabel(spec.sweep(), cell.values), "): ", s.message()));
      }
    }
    return absl::OkStatus();
  }
  const bool cuda = device.rfind("cuda:", 0) == 0;
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark:
      if (auto s = CheckStepOptionsForDevice(spec.benchmark(), device); !s.ok()) return s;
      break;
    case v1::JobSpec::kProfile:
      if (auto s = CheckStepOptionsForDevice(spec.profile().step(), device, "profile.step.");
          !s.ok())
        return s;
      break;
    case v1::JobSpec::kMemory:
      if (!cuda) break;  // refused below, as a whole
      if (auto s = CheckStepOptionsForDevice(spec.memory().step(), device, "memory.step."); !s.ok())
        return s;
      // Each run of the sweep has its own precision.
      for (const v1::BenchmarkSpec& cell : MemoryRunSpecs(spec.memory(), spec.memory().step())) {
        if (auto s = CheckStepOptionsForDevice(
                cell, device, absl::StrCat("memory (run ", MemoryRunName(cell), "): memory.step."));
            !s.ok())
          return s;
      }
      break;
    case v1::JobSpec::kAttention:
      if (auto s = CheckAttentionImplForDevice(
              spec.attention().implementation(), spec.attention().precision(),
              spec.attention().head_dim(), device, "attention.implementation");
          !s.ok())
        return s;
      if (spec.attention().has_memory_cap_bytes() && !cuda) {
        return absl::InvalidArgumentError(absl::StrCat(
            "attention.memory_cap_bytes: a cap is the CUDA caching allocator's memory fraction "
            "and ",
            device,
            " is a CPU, which has no allocator benchd can cap; leave it unset on a CPU or submit "
            "with --device cuda:N"));
      }
      break;
    default:
      break;
  }
  if (spec.kind_case() == v1::JobSpec::kMemory && !cuda) {
    return absl::FailedPreconditionError(absl::StrCat(
        "memory: needs a CUDA device (it records the CUDA caching allocator's history); ", device,
        " is not one; submit it with --device cuda:N on a GPU node"));
  }
  if (spec.kind_case() == v1::JobSpec::kProfile && !cuda) {
    for (int a : spec.profile().activities()) {
      if (a == v1::PROFILER_ACTIVITY_CUDA) {
        return absl::FailedPreconditionError(absl::StrCat(
            "profile.activities: cuda needs a CUDA device; ", device,
            " is not one (profile it with the cpu activity only, or submit with --device cuda:N)"));
      }
    }
  }
  return absl::OkStatus();
}

v1::JobKind JobKindOf(const v1::JobSpec& spec) {
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark:
      return v1::JOB_KIND_BENCHMARK;
    case v1::JobSpec::kProfile:
      return v1::JOB_KIND_PROFILE;
    case v1::JobSpec::kMemory:
      return v1::JOB_KIND_MEMORY;
    case v1::JobSpec::kCollective:
      return v1::JOB_KIND_COLLECTIVE;
    case v1::JobSpec::kAttention:
      return v1::JOB_KIND_ATTENTION;
    case v1::JobSpec::kPrecision:
      return v1::JOB_KIND_PRECISION;
    case v1::JobSpec::kDdp:
      return v1::JOB_KIND_DDP;
    case v1::JobSpec::KIND_NOT_SET:
      break;
  }
  return v1::JOB_KIND_UNSPECIFIED;
}

const std::vector<v1::JobKind>& JobKinds() {
  static const auto* kinds = [] {
    auto* out = new std::vector<v1::JobKind>;
    const google::protobuf::EnumDescriptor* d = v1::JobKind_descriptor();
    for (int i = 0; i < d->value_count(); ++i) {
      const int n = d->value(i)->number();
      if (n != v1::JOB_KIND_UNSPECIFIED) out->push_back(static_cast<v1::JobKind>(n));
    }
    return out;
  }();
  return *kinds;
}

std::string JobKindName(v1::JobKind kind) {
  if (kind == v1::JOB_KIND_UNSPECIFIED) return "";
  const google::protobuf::EnumValueDescriptor* v =
      v1::JobKind_descriptor()->FindValueByNumber(kind);
  return v == nullptr ? "" : absl::AsciiStrToLower(absl::StripPrefix(v->name(), "JOB_KIND_"));
}

std::vector<std::string> JobKindNames() {
  std::vector<std::string> names;
  for (v1::JobKind k : JobKinds()) names.push_back(JobKindName(k));
  return names;
}

std::string JobKindChoices() {
  const std::vector<std::string> names = JobKindNames();
  if (names.size() < 2) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back());
}

absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (v1::JobKind k : JobKinds()) {
    if (lower == JobKindName(k) || lower == absl::StrCat("job_kind_", JobKindName(k))) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kind ", QuotedForError(name), "; expected ", JobKindChoices()));
}

std::string JobKindName(const v1::JobSpec& spec) { return JobKindName(JobKindOf(spec)); }

std::string PrecisionExperimentName(v1::PrecisionExperiment e) {
  switch (e) {
    case v1::PRECISION_EXPERIMENT_ACCUMULATION:
      return "accumulation";
    case v1::PRECISION_EXPERIMENT_AUTOCAST:
      return "autocast";
    default:
      return absl::StrCat(static_cast<int>(e));
  }
}

absl::StatusOr<v1::PrecisionExperiment> ParsePrecisionExperiment(const std::string& name) {
  v1::PrecisionExperiment e;
  const std::string upper = absl::AsciiStrToUpper(name);
  if (!name.empty() && upper != "UNSPECIFIED" &&
      (v1::PrecisionExperiment_Parse("PRECISION_EXPERIMENT_" + upper, &e) ||
       (upper != "PRECISION_EXPERIMENT_UNSPECIFIED" && v1::PrecisionExperiment_Parse(upper, &e)))) {
    return e;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown experiment ", QuotedForError(name),
                                                 "; expected accumulation or autocast"));
}

absl::StatusOr<v1::JobSpec> ResolveJobSpec(const v1::JobSpec& spec) {
  // Sizes first: every later message may quote a field.
  if (auto s = CheckSizeLimits(spec); !s.ok()) return s;
  // One check of every float and double field, whatever the kind.
  if (auto s = CheckFiniteNumbers(spec); !s.ok()) return s;
  // 0 stays 0: the daemon writes out its own default for the kind.
  if (const double t = spec.progress_timeout_seconds();
      t != 0 && !(t >= 1 && t <= kMaxTimeoutSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "progress_timeout_seconds: expected 0 (= the daemon's default for the kind) or 1..",
        kMaxTimeoutSeconds, ", got ", NumberText(t)));
  }
  if (spec.has_sweep()) {
    // Every cell must resolve; the spec is kept as given (its request alone
    // need not be valid: a sweep over model.preset may name no model).
    auto cells = ExpandSweep(spec);
    if (!cells.ok()) return cells.status();
    return spec;
  }
  v1::JobSpec out = spec;
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark: {
      auto b = ResolveBenchmark(spec.benchmark());
      if (!b.ok()) return b.status();
      *out.mutable_benchmark() = *b;
      return out;
    }
    case v1::JobSpec::kMemory: {
      auto m = ResolveMemory(spec.memory());
      if (!m.ok()) return m.status();
      *out.mutable_memory() = *m;
      return out;
    }
    case v1::JobSpec::kProfile: {
      auto p = ResolveProfile(spec.profile());
      if (!p.ok()) return p.status();
      *out.mutable_profile() = *p;
      return out;
    }
    case v1::JobSpec::kCollective: {
      if (!spec.device().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec.device: ", QuotedForError(spec.device()),
                         " is not used by a collective request; it names its "
                         "devices in collective.devices (or a group)"));
      }
      auto c = ResolveCollective(spec.collective());
      if (!c.ok()) return c.status();
      *out.mutable_collective() = *c;
      return out;
    }
    case v1::JobSpec::kAttention: {
      auto a = ResolveAttention(spec.attention());
      if (!a.ok()) return a.status();
      *out.mutable_attention() = *a;
      return out;
    }
    case v1::JobSpec::kPrecision: {
      auto p = ResolvePrecision(spec.precision());
      if (!p.ok()) return p.status();
      *out.mutable_precision() = *p;
      return out;
    }
    case v1::JobSpec::kDdp: {
      if (!spec.device().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec.device: ", QuotedForError(spec.device()),
                         " is not used by a data-parallel request; it names its devices in "
                         "ddp.target.devices (or a group)"));
      }
      auto d = ResolveDdp(spec.ddp());
      if (!d.ok()) return d.status();
      *out.mutable_ddp() = *d;
      return out;
    }
    case v1::JobSpec::KIND_NOT_SET:
      break;
  }
  std::vector<std::string> kinds;
  for (int i = 0; i < v1::JobKind_descriptor()->value_count(); ++i) {
    const auto kind = static_cast<v1::JobKind>(v1::JobKind_descriptor()->value(i)->number());
    if (kind != v1::JOB_KIND_UNSPECIFIED) kinds.push_back(JobKindName(kind));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("spec: no request kind set; expected one of ", absl::StrJoin(kinds, ", ")));
}

}  // namespace benchd
