// One member's part of a collective job (internal::CollectiveRun): for each
// size, the op on the group's c10d backend, warm-up then measured
// iterations, each timed on this rank, then one checked run on inputs whose
// result is known exactly. The daemon gets every size's figures as they come
// (CollectiveRankSize) and takes the slowest rank per iteration.
//
// Timing: on CUDA, events on the current stream around each launch+wait
// (c10d makes the current stream wait for its NCCL stream), launches back to
// back as nccl-tests does, the device synchronized once per size; on a CPU,
// the host steady clock around each launch+wait.
//
// The check's inputs (m(j) = j mod 7, r = rank, n = world size, all small
// integers, exact in every dtype up to n = 16):
//   all_reduce       in_r[j] = r+1+m(j)           out[j] = n(n+1)/2 + n m(j)
//   broadcast        in_0[j] = 1+m(j), others -1  out[j] = 1+m(j)
//   all_gather       in_r[i] = r+1+m(i)           out[c*k+i] = c+1+m(i)
//   reduce_scatter   in_r[j] = r+1+m(j)           out_r[i] = n(n+1)/2 + n m(r*k+i)
//   all_to_all       in_r[j] = r+1+m(j)           out_r[s*k+i] = s+1+m(r*k+i)
// (k = elements per chunk). Timed iterations run on zeros, so repeated
// in-place sums cannot overflow.
//
// Ranks agree before every size whether to go on (an all_reduce MAX of a
// cancel flag), so a cancelled job stops on every rank at the same size.
#ifndef BENCHD_WORKER_COLLECTIVE_RUN_H_
#define BENCHD_WORKER_COLLECTIVE_RUN_H_

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "benchd/internal/worker.pb.h"
#include "worker/process_groups.h"

namespace benchd::worker {

struct CollectiveHooks {
  // Each size's figures as soon as they are known.
  std::function<void(const internal::CollectiveRankSize&)> on_size;
  // Polled once per size.
  std::function<bool()> cancelled;
};

// OK; CANCELLED (every rank agreed to stop); DEADLINE_EXCEEDED (a collective
// did not finish within the group's timeout: the backend was aborted);
// ABORTED (the backend failed, e.g. a peer died). With the last two `*broken`
// is set: the group cannot be used again and the caller drops it.
// Raised by the waits below when the device has not finished by the
// deadline (the backend was aborted, which ends NCCL's kernels).
struct CollectiveTimeout {
  std::string what;
};

// Waits for `work`: on a CPU through Work::wait (Gloo's own timeout throws);
// on CUDA the current stream waits for it, then WaitForDevice.
void CompleteWork(const c10::intrusive_ptr<c10d::Work>& work, GroupMember& m,
                  std::chrono::steady_clock::time_point deadline);
// On CUDA: polls an event recorded now on the current stream until the
// device reaches it, or aborts the backend and throws CollectiveTimeout at
// the deadline. Nothing on a CPU.
void WaitForDevice(GroupMember& m, std::chrono::steady_clock::time_point deadline);
// Every rank agrees whether to stop (an all_reduce MAX of `stop`), so a
// cancel ends every rank at the same point. Waits within the group's timeout.
bool AgreeToStop(GroupMember& m, bool stop);

absl::Status RunCollective(const internal::CollectiveRun& run, GroupMember& member,
                           const CollectiveHooks& hooks, bool* broken);

// The check, on its own (tested without a group): inputs of `rank` and the
// exact output for `op` at world size `world` with `count` elements per
// rank's input (the op's ShapeFor count), int64 on `device`.
torch::Tensor CheckInput(v1::CollectiveOp op, int rank, int world, int64_t count,
                         torch::Device device = torch::kCPU);
torch::Tensor CheckExpected(v1::CollectiveOp op, int rank, int world, int64_t count,
                            torch::Device device = torch::kCPU);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_COLLECTIVE_RUN_H_
