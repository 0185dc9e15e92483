// The data-parallel request (v1::DdpSpec): its checks and defaults, the runs
// it expands into (the one list the daemon, the worker and benchctl share),
// and the names benchctl and the views use for its enums.
#ifndef BENCHD_COMMON_DDP_SPEC_H_
#define BENCHD_COMMON_DDP_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// The request's defaults.
inline constexpr int64_t kDefaultDdpGlobalBatch = 8;
inline constexpr double kDefaultDdpBucketMb[] = {1, 10, 100, 1000};
// Bucket sizes are 0 < MB <= this (1 TB: no model comes near it).
inline constexpr double kMaxDdpBucketMb = 1e6;

// Every default written out: the step as a train_step benchmark
// (ResolveBenchmark's defaults and checks; options a data-parallel step does
// not run are refused, naming ddp.step.<field>), variants (the four, and
// reducer with step.autograd), bucket_mb (the course's 1, 10, 100, 1000,
// only when bucketed or reducer runs),
// optimizers (adamw), gradient_compressions (none), timeout_seconds (300). The target is checked as
// a collective's (a group id, or 2+ devices of one kind with a backend, the backend written out).
// With devices, the batch is resolved against their count: step.batch_size per rank,
// global_batch_size = per rank x world; a global batch that does not split evenly is refused. With
// a group the world size is the daemon's to know: ResolveDdpBatch does it then.
absl::StatusOr<v1::DdpSpec> ResolveDdp(const v1::DdpSpec& in);

// Sets step.batch_size and global_batch_size for `world` ranks, or
// INVALID_ARGUMENT naming the field (a global batch that does not split).
absl::Status ResolveDdpBatch(int world, v1::DdpSpec* spec);

// One run of a resolved request, in the order the worker runs them (after
// the compute-only run): variants x (bucket sizes, for bucketed) x optimizers
// x gradient compressions.
struct DdpRunSpec {
  v1::DdpVariant variant = v1::DDP_VARIANT_UNSPECIFIED;  // unspecified: compute only
  double bucket_mb = 0;                                  // bucketed and reducer only
  v1::DdpOptimizer optimizer = v1::DDP_OPTIMIZER_ADAMW;
  v1::DdpGradientCompression compression = v1::DDP_GRADIENT_COMPRESSION_NONE;
};
std::vector<DdpRunSpec> DdpRuns(const v1::DdpSpec& resolved);
// The run a result row reports.
DdpRunSpec DdpRunOf(const v1::DdpRow& row);

// "naive", "flat", "overlap", "bucketed"; "adamw", "sharded_adamw"; and back
// (short or full enum names, any case), INVALID_ARGUMENT listing what is
// accepted otherwise. The lists are derived from the enums.
std::string DdpVariantName(v1::DdpVariant v);
absl::StatusOr<v1::DdpVariant> ParseDdpVariant(const std::string& name);
std::string DdpVariantChoices();  // "naive, flat, overlap, bucketed or reducer"
std::string DdpOptimizerName(v1::DdpOptimizer o);
absl::StatusOr<v1::DdpOptimizer> ParseDdpOptimizer(const std::string& name);
std::string DdpOptimizerChoices();
std::string DdpGradientCompressionName(v1::DdpGradientCompression c);
absl::StatusOr<v1::DdpGradientCompression> ParseDdpGradientCompression(const std::string& name);
std::string DdpGradientCompressionChoices();
// bucketed and reducer: one run per bucket size (DdpSpec.bucket_mb).
bool DdpVariantTakesBuckets(v1::DdpVariant variant);
// "bucketed 25 MB + sharded_adamw", "overlap + bf16 gradients", "reducer 25 MB",
// "compute only": a run's label.
std::string DdpRunLabel(const DdpRunSpec& run);

}  // namespace benchd

#endif  // BENCHD_COMMON_DDP_SPEC_H_
