// The collective request's arithmetic, torch-free (the daemon aggregates, the
// worker sizes its buffers, benchctl parses and prints): names of ops,
// backends and dtypes, the sizes of a sweep, how many elements a size means
// per rank, the slowest-rank aggregation and the nccl-tests bandwidths.
#ifndef BENCHD_COMMON_COLLECTIVE_MATH_H_
#define BENCHD_COMMON_COLLECTIVE_MATH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

inline constexpr int64_t kMaxCollectiveBytes = int64_t{16} << 30;  // 16 GiB per buffer
inline constexpr int64_t kMaxCollectiveSizes = 64;
inline constexpr int64_t kDefaultCollectiveMinBytes = int64_t{1} << 20;
inline constexpr int64_t kDefaultCollectiveFactor = 2;
inline constexpr int64_t kDefaultCollectiveWarmup = 5;
inline constexpr int64_t kDefaultCollectiveIters = 20;
inline constexpr double kDefaultCollectiveTimeoutSeconds = 300;

// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all".
std::string CollectiveOpName(v1::CollectiveOp op);
// Accepts those names (and "allreduce", "all-reduce", ... spellings).
absl::StatusOr<v1::CollectiveOp> ParseCollectiveOp(const std::string& text);
std::string BackendName(v1::CollectiveBackend backend);  // "nccl", "gloo", ""
absl::StatusOr<v1::CollectiveBackend> ParseBackend(const std::string& text);
std::string DtypeName(v1::CollectiveDtype dtype);  // "fp32", "fp16", "bf16", "fp64", "int32"
absl::StatusOr<v1::CollectiveDtype> ParseDtype(const std::string& text);
int64_t DtypeBytes(v1::CollectiveDtype dtype);

// "1MiB", "64 KiB", "1GiB", "4096", "1MB" (10^6), "2k" (KiB). INVALID_ARGUMENT
// naming `field` otherwise.
absl::StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& field);
// "1 MiB", "512 B", "1.5 GiB" (whole units print without decimals).
std::string FormatBytes(int64_t bytes);

// min, min*factor, ... while <= max (max itself is included only if reached).
std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, int64_t factor);

// What a requested size means for one rank: nccl-tests' convention, where the
// size is the whole buffer (all_gather's output, reduce_scatter's input,
// all_to_all's either). `count` is each rank's input elements, rounded down
// so that the buffer splits evenly over the ranks (at least 1);
// `size_bytes` the buffer as run.
struct CollectiveShape {
  int64_t count = 0;         // elements of each rank's input
  int64_t output_count = 0;  // elements of each rank's output
  int64_t size_bytes = 0;    // the whole buffer, nccl-tests' "size"
};
CollectiveShape ShapeFor(v1::CollectiveOp op, int64_t size_bytes, int64_t element_bytes, int world);

// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather,
// reduce_scatter, all_to_all (n-1)/n; broadcast 1.
double BusBandwidthFactor(v1::CollectiveOp op, int world);

// Per iteration, the slowest rank's time: out[i] = max_r per_rank[r][i].
// INVALID_ARGUMENT when the ranks report different numbers of iterations.
absl::StatusOr<std::vector<double>> SlowestRankPerIteration(
    const std::vector<std::vector<double>>& per_rank);

// One row from every rank's iteration times: duration statistics, algbw =
// size / median (GB/s, 1e9), busbw, each rank's median. Identity fields
// (backend, devices, group, timer, wrong elements) are the caller's.
absl::StatusOr<v1::CollectiveRow> AggregateRow(v1::CollectiveOp op, int64_t size_bytes,
                                               const std::vector<std::vector<double>>& per_rank);

}  // namespace benchd

#endif  // BENCHD_COMMON_COLLECTIVE_MATH_H_
