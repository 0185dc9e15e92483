// Runs one benchmark job: the CS336 LM's forward, forward+backward or full
// AdamW train step on a random batch, warm-up steps then measured steps, each
// timed per phase, and summarizes the measured ones.
//
// As in the course's benchmarking script, forward mode runs with autograd on
// (activations are saved), the loss is part of the forward phase, bf16/fp16
// autocast covers forward and loss only, and gradients are dropped
// (set_to_none) before every step. Peak memory counts what is resident too
// (the model, and its AdamW state once it has trained).
#ifndef BENCHD_WORKER_BENCHMARK_H_
#define BENCHD_WORKER_BENCHMARK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "worker/device_peaks.h"
#include "worker/model_cache.h"

namespace benchd::worker {

struct BenchmarkHooks {
  // Called after every step (warm-up ones flagged) with the total step count.
  std::function<void(const v1::StepTiming& timing, int64_t total_steps)> on_step;
  // Polled before every step; true stops the run with CANCELLED.
  std::function<bool()> cancelled;
  // Where a spec with export_parity writes its bundle (worker/parity_export.h);
  // empty: such a spec is refused with INVALID_ARGUMENT.
  std::string parity_bundle_path;
  // The device's peak rates, for the result's roofline (worker/device_peaks.h);
  // null: no roofline.
  DevicePeaks* peaks = nullptr;
  // The memory request (worker/memory_run.cc) records the measured steps:
  // on_measure_start runs once, after the warm-up, the gradients dropped and
  // the peak statistics reset, just before the first measured step;
  // on_measure_end after the last measured step, before its tensors are let
  // go; on_out_of_memory when the device ran out of memory, before anything
  // is freed (the figures and the history are still those of the failure).
  // On the job's thread, like the steps.
  std::function<void()> on_measure_start;
  std::function<void()> on_measure_end;
  std::function<void()> on_out_of_memory;
};

// `spec` must be resolved (benchd::ResolveJobSpec). Takes the model from
// `cache` (building it on a miss) on the cache's device. Returns the result,
// or CANCELLED, RESOURCE_EXHAUSTED when the device ran out of memory (the
// model is evicted and cached device memory released, so the worker can serve
// the next job), or INTERNAL with LibTorch's message for any other error.
absl::StatusOr<v1::BenchmarkResult> RunBenchmark(const v1::BenchmarkSpec& spec, ModelCache& cache,
                                                 const BenchmarkHooks& hooks = {});

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_BENCHMARK_H_
