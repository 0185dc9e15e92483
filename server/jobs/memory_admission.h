// Submit's memory check: a job whose step cannot fit its CUDA device by the
// memory estimate (common/memory_estimate.h) is refused before it is queued,
// instead of running into an out-of-memory error minutes later.
#ifndef BENCHD_SERVER_JOBS_MEMORY_ADMISSION_H_
#define BENCHD_SERVER_JOBS_MEMORY_ADMISSION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// FAILED_PRECONDITION naming the estimate and the capacity when the resolved
// benchmark, profile or memory job `spec` needs more than its device's total
// memory (as `devices`, the workers' GetNodeInfo figures, report it). Not
// checked (OK): spec.force, CPU devices, collective jobs, and a device whose
// worker has not reported its memory yet (0). A memory sweep is refused only
// when none of its runs fits (the others become out-of-memory rows, which is
// what such a sweep is for), and so is a JobSpec.sweep (every cell's steps
// counted). Where the step's options are outside the
// estimate (MemoryEstimate.not_modelled), only its model state (parameters,
// gradients, AdamW state: needed whatever the options) is compared.
//
// A data-parallel job (spec.ddp) is checked on each of `job_devices` (its
// ranks, local ones only) for its largest run on one rank: AdamW's state
// sharded only when every run shards it, plus a flat copy of the gradients
// when a flat or bucketed run is among them. Every run must fit: one that
// does not fails the job.
absl::Status CheckFitsDeviceMemory(const v1::JobSpec& spec,
                                   const std::vector<std::string>& job_devices,
                                   const std::vector<v1::Device>& devices);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_MEMORY_ADMISSION_H_
