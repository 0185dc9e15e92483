#include "common/job_spec.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd {
namespace {

absl::Status CheckRange(const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat("benchmark.", field, ": expected ", lo, "..", hi,
                                                   ", got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::BenchmarkSpec> ResolveBenchmark(const v1::BenchmarkSpec& in) {
  v1::BenchmarkSpec out = in;
  auto model = ResolveModelConfig(in.model(), "benchmark.model.");
  if (!model.ok()) return model.status();
  *out.mutable_model() = *model;

  if (!v1::BenchmarkMode_IsValid(in.mode())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.mode: unknown value ", in.mode(), "; expected forward, forward_backward or train_step"));
  }
  if (!v1::Precision_IsValid(in.precision())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.precision: unknown value ", in.precision(), "; expected fp32, bf16 or fp16"));
  }
  if (out.mode() == v1::MODE_UNSPECIFIED) out.set_mode(v1::MODE_FORWARD);
  if (out.precision() == v1::PRECISION_UNSPECIFIED) out.set_precision(v1::PRECISION_FP32);
  if (!out.has_batch_size()) out.set_batch_size(4);
  if (!out.has_context_length()) out.set_context_length(128);
  // With warmup_auto the count is the worker's to find (common/options.cc).
  if (!out.has_warmup_steps() && !out.warmup_auto()) out.set_warmup_steps(5);
  if (!out.has_measure_steps()) out.set_measure_steps(10);

  absl::Status s;
  if (!(s = CheckRange("batch_size", out.batch_size(), 1, kMaxBatch)).ok()) return s;
  if (!(s = CheckRange("context_length", out.context_length(), 1, kMaxContext)).ok()) return s;
  if (!(s = CheckRange("warmup_steps", out.warmup_steps(), 0, kMaxSteps)).ok()) return s;
  if (!(s = CheckRange("measure_steps", out.measure_steps(), 1, kMaxSteps)).ok()) return s;
  if (!(s = ResolveBenchmarkOptions(in, out)).ok()) return s;
  if (out.export_parity() && ParameterCount(out.model()) > kMaxParityParameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.export_parity: the model has ", ParameterCount(out.model()),
        " parameters; parity bundles are refused above ", kMaxParityParameters,
        " because the bundle holds every weight in fp32 (", 4 * ParameterCount(out.model()) / 1000000,
        " MB here) and the reference must load them all; check parity on a smaller preset"));
  }
  return out;
}

}  // namespace

std::string JobKindName(const v1::JobSpec& spec) {
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark: return "benchmark";
    case v1::JobSpec::kProfile: return "profile";
    case v1::JobSpec::kMemory: return "memory";
    case v1::JobSpec::kAttention: return "attention";
    case v1::JobSpec::kCollective: return "collective";
    case v1::JobSpec::kDdp: return "ddp";
    case v1::JobSpec::KIND_NOT_SET: return "";
  }
  return "";
}

absl::StatusOr<v1::JobSpec> ResolveJobSpec(const v1::JobSpec& spec) {
  v1::JobSpec out = spec;
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark: {
      auto b = ResolveBenchmark(spec.benchmark());
      if (!b.ok()) return b.status();
      *out.mutable_benchmark() = *b;
      return out;
    }
    case v1::JobSpec::KIND_NOT_SET:
      return absl::InvalidArgumentError(
          "spec: no request kind set; expected one of benchmark, profile, memory, attention, "
          "collective, ddp");
    default:
      return absl::UnimplementedError(absl::StrCat(
          "spec.", JobKindName(spec), ": the ", JobKindName(spec),
          " request is not implemented in this version of benchd; only benchmark runs today"));
  }
}

}  // namespace benchd
