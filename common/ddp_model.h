// The write-up's overhead model of data-parallel gradient synchronisation
// (CS336 "Systems" §2.3): an all-reduce of s bytes costs o + s / w on a
// group, fitted to a sweep on it; a variant's calls are replayed on one
// communication stream against when the backward made each gradient final,
// and what outlasts the backward is the predicted exposed communication.
// Torch-free, so the daemon predicts and CI tests it.
#ifndef BENCHD_COMMON_DDP_MODEL_H_
#define BENCHD_COMMON_DDP_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// The bucketed variant's assignment: parameter indices (model order) in
// reverse, packed into buckets of at most `bucket_bytes`; a parameter larger
// than a bucket is a bucket of its own. The worker syncs with it and the
// model predicts with it.
std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& param_bytes,
                                               int64_t bucket_bytes);

// c10d's Reducer's buckets once rebuilt (compute_bucket_assignment_by_size
// with DDP's limits): parameters in the order their gradients became final
// (`ready_order`), each added to the open bucket, which closes once it
// holds at least its limit: the first's min(1 MiB, bucket_bytes), then
// bucket_bytes (so a bucket may pass its limit by its last parameter).
std::vector<std::vector<size_t>> ReducerBuckets(const std::vector<int64_t>& param_bytes,
                                                const std::vector<size_t>& ready_order,
                                                int64_t bucket_bytes);

struct AllReduceFit {
  double per_call_seconds = 0;  // o
  double bandwidth = 0;         // w, bytes per second
  double Seconds(double bytes) const { return per_call_seconds + bytes / bandwidth; }
};

// Least squares of t = o + s / w weighted by 1 / t^2 (relative error, so the
// small sizes fix o and the large ones w), o clamped at 0. INVALID_ARGUMENT
// for fewer than two distinct sizes, lengths that differ or a time <= 0;
// FAILED_PRECONDITION when the times do not grow with size (no bandwidth).
absl::StatusOr<AllReduceFit> FitAllReduce(const std::vector<int64_t>& bytes,
                                          const std::vector<double>& seconds);

// When each parameter's gradient became final, from the compute-only run.
struct BackwardTiming {
  std::vector<int64_t> param_bytes;         // model order
  std::vector<double> param_ready_seconds;  // after the backward began
  double backward_seconds = 0;
};

// Predicted exposed communication of one variant's synchronisation;
// `bucket_bytes` for bucketed and reducer only.
double PredictExposedSeconds(v1::DdpVariant variant, int64_t bucket_bytes,
                             const BackwardTiming& backward, const AllReduceFit& fit);

struct BestBucket {
  double bucket_mb = 0;
  double exposed_seconds = 0;
};
// The bucket size with the least predicted exposure, over a log grid from
// 1 KB to every gradient in one bucket; of sizes within 1% of the least,
// the largest (the fewest calls).
BestBucket PredictBestBucket(const BackwardTiming& backward, const AllReduceFit& fit);

// DdpResult.overhead_model's figures from rank 0's compute-only run (its
// sweep and backward timing), all but the measured best bucket. The error
// (a sweep that does not fit) is the result's to report, not the job's.
absl::StatusOr<v1::DdpOverheadModel> MakeOverheadModel(const BackwardTiming& backward,
                                                       const std::vector<int64_t>& sweep_bytes,
                                                       const std::vector<double>& sweep_seconds);

// A row's predicted_exposed_comm_seconds (adamw rows; a sharded optimizer's
// broadcasts are not modelled).
void PredictRow(const BackwardTiming& backward, const v1::DdpOverheadModel& model, v1::DdpRow* row);

// Once every row is in: the measured best bucket (the fastest adamw bucketed
// row) and predicted / measured. Nothing without bucketed adamw rows.
void CompareBestBucket(v1::DdpResult* result);

}  // namespace benchd

#endif  // BENCHD_COMMON_DDP_MODEL_H_
