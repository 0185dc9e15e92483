#include "server/jobs/memory_admission.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/memory_estimate.h"
#include "common/memory_svg.h"
#include "common/model_config.h"
#include "common/sweep_spec.h"

namespace benchd::server {
namespace {

// What one step needs, and how that figure was reached.
struct Need {
  int64_t bytes = 0;
  std::string what;  // "2.7B train_step fp32, batch 4, context 512: 65.29 GiB at its forward peak"
};

// `sharding`: a data-parallel job's ranks (per_device_* is one rank's).
Need NeedOf(const v1::BenchmarkSpec& step, const v1::Sharding* sharding = nullptr) {
  std::string unmodelled;
  v1::EstimateRequest request = EstimateRequestForStep(step, &unmodelled);
  if (sharding != nullptr) *request.mutable_sharding() = *sharding;
  const std::string cell =
      absl::StrCat(step.model().preset().empty() ? "custom model" : step.model().preset(), " ",
                   ModeName(step.mode()), " ", PrecisionName(step.precision()), ", batch ",
                   step.batch_size(), ", context ", step.context_length());
  // With a sharding the request is resolved again (its other degrees 1).
  auto estimate = sharding != nullptr ? Estimate(request) : EstimateMemory(request);
  if (!estimate.ok()) {
    // Beyond kMaxEstimateBytes: no device holds it.
    return {std::numeric_limits<int64_t>::max(),
            absl::StrCat(cell, ": more than 4 EiB (", estimate.status().message(), ")")};
  }
  if (unmodelled.empty()) {
    return {
        estimate->per_device_bytes(),
        absl::StrCat(cell, ": ", memory::HumanBytes(estimate->per_device_bytes()), " (",
                     estimate->per_device_bytes(), " B) at its ", estimate->peak_phase(), " peak")};
  }
  int64_t state = 0;
  for (const v1::EstimateTerm& t : estimate->model_state()) {
    if (t.name() != "autocast_weight_copies") state += t.per_device_bytes();
  }
  return {state, absl::StrCat(cell, ": at least ", memory::HumanBytes(state), " (", state,
                              " B) of model state (its ", unmodelled,
                              " are outside the estimate, so its activations are not counted)")};
}

// The steps a job would run: one, a memory sweep's runs, or those of every
// cell of a JobSpec.sweep (each resolved alone: a sweep's stored request need
// not be valid by itself, e.g. one sweeping model.preset).
std::vector<v1::BenchmarkSpec> StepsOf(const v1::JobSpec& spec) {
  std::vector<v1::BenchmarkSpec> steps;
  if (spec.has_sweep()) {
    absl::StatusOr<std::vector<SweepCellSpec>> cells = ExpandSweep(spec);
    if (!cells.ok()) return steps;  // refused by ResolveJobSpec before this is asked
    for (const SweepCellSpec& cell : *cells) {
      std::vector<v1::BenchmarkSpec> more = StepsOf(cell.spec);
      steps.insert(steps.end(), more.begin(), more.end());
    }
    return steps;
  }
  switch (spec.kind_case()) {
    case v1::JobSpec::kBenchmark:
      return {spec.benchmark()};
    case v1::JobSpec::kProfile:
      return {spec.profile().step()};
    case v1::JobSpec::kMemory:
      return MemoryRunSpecs(spec.memory(), spec.memory().step());
    default:
      return {};
  }
}

}  // namespace

// A data-parallel job's largest run on one rank: ZeRO-1 only when every run
// shards AdamW, and flat and bucketed runs' flat copy of every gradient.
Need DdpNeedOf(const v1::DdpSpec& ddp, int world) {
  v1::Sharding sharding;
  sharding.set_data_parallel(world);
  const bool all_sharded = !ddp.optimizers().empty() &&
                           std::all_of(ddp.optimizers().begin(), ddp.optimizers().end(),
                                       [](int o) { return o == v1::DDP_OPTIMIZER_SHARDED_ADAMW; });
  if (all_sharded) sharding.set_zero_stage(1);
  Need need = NeedOf(ddp.step(), &sharding);
  need.what = absl::StrCat(need.what, " per rank of ", world,
                           all_sharded ? " with AdamW sharded (ZeRO-1)" : "");
  const bool flat_copy = ddp.variants().empty() ||
                         std::any_of(ddp.variants().begin(), ddp.variants().end(), [](int v) {
                           return v == v1::DDP_VARIANT_FLAT || v == v1::DDP_VARIANT_BUCKETED ||
                                  v == v1::DDP_VARIANT_REDUCER;
                         });
  if (flat_copy && need.bytes != std::numeric_limits<int64_t>::max()) {
    const int64_t grads = 4 * ParameterCount(ddp.step().model());  // fp32 gradients
    need.bytes += grads;
    absl::StrAppend(&need.what, ", + ", memory::HumanBytes(grads),
                    " for the flat, bucketed and reducer runs' flat copy of the gradients");
  }
  return need;
}

absl::Status CheckFitsDeviceMemory(const v1::JobSpec& spec,
                                   const std::vector<std::string>& job_devices,
                                   const std::vector<v1::Device>& devices) {
  if (spec.force()) return absl::OkStatus();
  if (spec.has_ddp()) {
    const Need need = DdpNeedOf(spec.ddp(), static_cast<int>(job_devices.size()));
    for (const std::string& name : job_devices) {
      if (!absl::StartsWith(name, "cuda:")) continue;
      for (const v1::Device& d : devices) {
        if (d.name() != name || d.total_memory_bytes() <= 0 ||
            need.bytes <= d.total_memory_bytes()) {
          continue;
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "ddp.step: the memory estimate exceeds ", name, "'s memory: ", need.what, ", against ",
            memory::HumanBytes(d.total_memory_bytes()), " (", d.total_memory_bytes(),
            " B) in all on ", name,
            d.description().empty() ? "" : absl::StrCat(" (", d.description(), ")"),
            "; Bench.Estimate (benchctl estimate --data-parallel N) shows it term by term; "
            "shard AdamW (--optimizers sharded_adamw), leave out flat and bucketed, or set force "
            "(benchctl --force) to queue it anyway"));
      }
    }
    return absl::OkStatus();
  }
  if (!absl::StartsWith(spec.device(), "cuda:")) return absl::OkStatus();
  const std::vector<v1::BenchmarkSpec> steps = StepsOf(spec);
  if (steps.empty()) return absl::OkStatus();
  const v1::Device* device = nullptr;
  for (const v1::Device& d : devices) {
    if (d.name() == spec.device()) device = &d;
  }
  if (device == nullptr || device->total_memory_bytes() <= 0) return absl::OkStatus();
  const int64_t capacity = device->total_memory_bytes();

  std::optional<Need> smallest;
  for (const v1::BenchmarkSpec& step : steps) {
    Need need = NeedOf(step);
    if (need.bytes <= capacity) return absl::OkStatus();
    if (!smallest || need.bytes < smallest->bytes) smallest = std::move(need);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "spec: the memory estimate exceeds ", spec.device(),
      "'s memory: ", steps.size() > 1 ? "the smallest of the sweep's runs, " : "", smallest->what,
      ", against ", memory::HumanBytes(capacity), " (", capacity, " B) in all on ", spec.device(),
      device->description().empty() ? "" : absl::StrCat(" (", device->description(), ")"),
      "; Bench.Estimate (benchctl estimate) shows it term by term; set force (benchctl "
      "--force) to queue it anyway"));
}

}  // namespace benchd::server
