// The precision request (v1::PrecisionSpec; docs/architecture.md "The
// precision request"): the CS336 mixed_precision section's accumulation
// experiment and the ToyModel's dtypes under autocast, on the worker's device.
#ifndef BENCHD_WORKER_PRECISION_RUN_H_
#define BENCHD_WORKER_PRECISION_RUN_H_

#include <torch/torch.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "worker/device.h"

namespace benchd::worker {

struct PrecisionHooks {
  // A line per row as it is measured (progress for the daemon's deadline).
  std::function<void(const std::string& line)> log;
  // Polled between rows and every few thousand additions; true stops the run
  // with CANCELLED.
  std::function<bool()> cancelled;
};

// A dtype as torch's Python names it, less "torch.": "float32", "bfloat16",
// "float16", "float64", "int64", ...
std::string TorchDtypeName(at::ScalarType dtype);

// `spec` must be resolved (benchd::ResolveJobSpec). Runs the spec's
// experiments in order on `dev`:
//  - accumulation: the write-up's four loops, each `count` times creating the
//    addend as a 0-d tensor of its dtype on the device and adding it in place
//    to a 0-d accumulator (cast first in the fourth), then reading back the
//    accumulator, the addend and their dtypes;
//  - autocast: per autocast dtype, the ToyModel (fp32 parameters drawn from
//    the seed as nn.Linear and nn.LayerNorm initialise them) run forward and
//    through its cross-entropy loss inside an autocast region of the device's
//    type (CUDA, or CPU autocast), then backward outside it, recording the
//    dtype of each tensor as it came out.
// Returns the result, CANCELLED, or INTERNAL.
absl::StatusOr<v1::PrecisionResult> RunPrecision(const v1::PrecisionSpec& spec,
                                                 const WorkerDevice& dev,
                                                 const PrecisionHooks& hooks = {});

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_PRECISION_RUN_H_
