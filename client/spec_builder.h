// Turns `submit benchmark` (and the other step requests') flags into a
// JobSpec. Mode and precision are parsed here so a typo is a usage error
// before any RPC; ranges and presets are the daemon's to check (it names the
// field in INVALID_ARGUMENT).
#ifndef BENCHD_CLIENT_SPEC_BUILDER_H_
#define BENCHD_CLIENT_SPEC_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// Unset flags stay unset so the daemon's defaults apply.
struct BenchmarkOptions {
  std::string device;
  std::string preset;
  std::optional<int64_t> vocab_size, d_model, d_ff, num_layers, num_heads;
  std::optional<double> rope_theta;
  std::string mode;       // "" = the daemon's default (forward)
  std::string precision;  // "" = the daemon's default (fp32)
  std::optional<int64_t> batch_size, context_length, warmup_steps, measure_steps;
  std::optional<uint64_t> seed;
  bool export_parity = false;  // --export-parity
  // Options (docs/architecture.md "Options"); "" / unset / false = the faithful default.
  std::string warmup;                       // --warmup N|auto (N: warmup_steps N)
  std::optional<int64_t> warmup_max_steps;  // --warmup-max-steps
  std::string attention;       // --attention faithful|sdpa|flash|efficient|cudnn|math|tiled|fused
  std::string optimizer;       // --optimizer faithful|foreach|fused
  bool allow_tf32 = false;     // --tf32
  bool cuda_graph = false;     // --cuda-graph
  bool weight_copies = false;  // --weight-copies
  bool fused_ops = false;      // --fused-ops
  bool optimizer_overlap = false;  // --optimizer-overlap
  bool autograd = false;           // --autograd
};

// INVALID_ARGUMENT naming the flag (--mode, --precision, --warmup, --attention,
// --optimizer) and what it accepts.
absl::StatusOr<v1::JobSpec> BuildBenchmarkSpec(const BenchmarkOptions& options);

// `benchctl submit memory`: the step flags of `submit benchmark` (less --steps,
// --export-parity and --cuda-graph, which a memory request refuses) plus the
// recording and sweep flags. Lists are comma-separated ("128,256,512").
struct MemoryOptions {
  BenchmarkOptions step;
  std::optional<int64_t> record_steps, max_entries, top_allocations;
  std::string stacks;      // none|cpp|all ("" = cpp)
  std::string contexts;    // --contexts 128,256,512
  std::string modes;       // --modes forward,train_step
  std::string precisions;  // --precisions fp32,bf16
};

// INVALID_ARGUMENT naming the flag.
absl::StatusOr<v1::JobSpec> BuildMemorySpec(const MemoryOptions& options);

// `benchctl submit profile`: the step flags of `submit benchmark` (--steps are the
// unprofiled run's measured steps; --export-parity and --cuda-graph are
// refused) plus the profiler's.
struct ProfileOptions {
  BenchmarkOptions step;
  std::optional<int64_t> profile_steps;
  std::string activities;  // --activities cpu,cuda ("" = the worker's default)
  bool record_shapes = false;
  bool profile_memory = false;
};

// INVALID_ARGUMENT naming the flag.
absl::StatusOr<v1::JobSpec> BuildProfileSpec(const ProfileOptions& options);

// `benchctl estimate`: the model, mode, precision, batch, context and
// --autograd flags of `submit benchmark`, plus the sharding's. Unset = the
// daemon's defaults (every degree 1, ZeRO 0).
struct EstimateOptions {
  BenchmarkOptions step;
  std::optional<int64_t> data_parallel, tensor_parallel, pipeline_stages;
  int32_t zero_stage = 0;  // --zero-stage 0..3 (checked by the daemon)
  bool fsdp = false;       // --fsdp
  // --offline: computed here by the daemon's own code (common/memory_estimate.h),
  // without asking a daemon.
  bool offline = false;
};

// INVALID_ARGUMENT naming the flag (--mode, --precision).
absl::StatusOr<v1::EstimateRequest> BuildEstimateRequest(const EstimateOptions& options);

// `benchctl submit ddp`: data-parallel training (v1::DdpSpec). The step is
// `submit benchmark`'s model, precision, batch (per rank), context, warm-up,
// steps, seed and options, always a train_step; the target a resident group
// or devices with a backend, as `submit collective`'s. Lists are
// comma-separated ("naive,bucketed", "1,10,100"); unset = the daemon's
// defaults (every variant, buckets of 1, 10, 100 and 1000 MB, adamw, 300 s).
struct DdpOptions {
  // The step, as `submit benchmark`'s. `submit ddp` has flags for the model,
  // precision, batch_size (per rank), context_length, warmup_steps,
  // measure_steps, seed, allow_tf32 and optimizer (--optimizer-impl) only; the daemon refuses the
  // options a data-parallel step does not run (naming ddp.step.<field>), and a device is refused
  // here (the ranks are --device or a --group).
  BenchmarkOptions step;
  std::string group;                      // --group ID, or
  std::string devices;                    // --device cpu:0,cpu:1 (rank order)
  std::string backend;                    // --backend nccl|gloo ("" = by device kind)
  std::optional<int64_t> global_batch;    // --global-batch N (not with --batch-size)
  std::string variants;                   // --variants naive,flat,overlap,bucketed
  std::string bucket_mb;                  // --bucket-mb 1,10,100
  std::string optimizers;                 // --optimizers adamw,sharded_adamw
  bool sharded_optimizer = false;         // --sharded-optimizer: --optimizers sharded_adamw
  std::string gradient_compressions;      // --gradient-compressions none,bf16
  std::optional<double> timeout_seconds;  // --group-timeout S
  bool no_traces = false;                 // --no-traces: DdpSpec.traces false
};

// INVALID_ARGUMENT naming the flag, what came and what it accepts, for what
// benchctl can tell by itself (names, lists, flags that exclude each other);
// the daemon checks the rest (sizes, batch splits, devices).
absl::StatusOr<v1::JobSpec> BuildDdpSpec(const DdpOptions& options);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_SPEC_BUILDER_H_
