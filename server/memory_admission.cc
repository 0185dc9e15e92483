#include "server/memory_admission.h"

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

Need NeedOf(const v1::BenchmarkSpec& step) {
  std::string unmodelled;
  const v1::EstimateRequest request = EstimateRequestForStep(step, &unmodelled);
  const std::string cell =
      absl::StrCat(step.model().preset().empty() ? "custom model" : step.model().preset(), " ",
                   ModeName(step.mode()), " ", PrecisionName(step.precision()), ", batch ",
                   step.batch_size(), ", context ", step.context_length());
  auto estimate = EstimateMemory(request);
  if (!estimate.ok()) {
    // Beyond kMaxEstimateBytes: no device holds it.
    return {std::numeric_limits<int64_t>::max(),
            absl::StrCat(cell, ": more than 4 EiB (", estimate.status().message(), ")")};
  }
  if (unmodelled.empty()) {
    return {estimate->total_bytes(),
            absl::StrCat(cell, ": ", memory::HumanBytes(estimate->total_bytes()), " (",
                         estimate->total_bytes(), " B) at its ", estimate->peak_phase(), " peak")};
  }
  int64_t state = 0;
  for (const v1::EstimateTerm& t : estimate->model_state()) {
    if (t.name() != "autocast_weight_copies") state += t.bytes();
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

absl::Status CheckFitsDeviceMemory(const v1::JobSpec& spec,
                                   const std::vector<v1::Device>& devices) {
  if (spec.force() || !absl::StartsWith(spec.device(), "cuda:")) return absl::OkStatus();
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
