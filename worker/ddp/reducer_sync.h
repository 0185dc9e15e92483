// The in-daemon reference for the gradients' synchronisation: c10d's
// Reducer, the C++ engine under PyTorch's DistributedDataParallel, set up and
// driven as DistributedDataParallel drives it with its defaults
// (torch/nn/parallel/distributed.py): every parameter in one bucket for the
// first step, which records the order gradients become final; from the
// second step on, buckets rebuilt in that order, the first of at most 1 MiB
// (DDP's _DEFAULT_FIRST_BUCKET_BYTES) and the rest of at most `bucket_bytes`;
// no unused parameters, gradients copied into and out of the buckets (not
// bucket views), the default all-reduce and division by the world size.
//
// The Reducer learns that a gradient is final from hooks on the autograd
// engine's AccumulateGrad nodes and waits for its buckets in a callback at
// the end of the backward, so it needs the autograd engine: DdpSpec.step.
// autograd. It takes a c10d::ProcessGroup; the group's resident backend is
// wrapped in one for the run (the wrapper owns nothing: the backend stays
// the group's).
#ifndef BENCHD_WORKER_DDP_REDUCER_SYNC_H_
#define BENCHD_WORKER_DDP_REDUCER_SYNC_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "worker/process_groups.h"

namespace c10d {
class Reducer;
class ProcessGroup;
}  // namespace c10d

namespace benchd::worker::ddp {

class ReducerSync {
 public:
  ReducerSync(const std::vector<torch::Tensor>& params, const GroupMember& member,
              int64_t bucket_bytes);
  ~ReducerSync();

  // Before the forward, as DDP's _pre_forward: after the first step, the
  // buckets are rebuilt once in the order the gradients became final (a
  // broadcast from rank 0 keeps every rank's buckets the same).
  void BeforeForward();
  // After the forward, before loss.backward(): the backward's hooks will
  // reduce. When backward() returns, every gradient holds the ranks' mean.
  void BeforeBackward();

  // The buckets now (calls per step) and their bytes: counted when they are
  // made or rebuilt, not in every step.
  int64_t Buckets() const { return buckets_; }
  int64_t Bytes() const { return bytes_; }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  void CountBuckets();

  std::unique_ptr<c10d::Reducer> reducer_;
  int64_t buckets_ = 0, bytes_ = 0;
};

}  // namespace benchd::worker::ddp

#endif  // BENCHD_WORKER_DDP_REDUCER_SYNC_H_
