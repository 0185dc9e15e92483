// Data-parallel gradient synchronisation (CS336 "Systems" §2.2-2.3): after a
// step's backward every rank's gradient of every parameter is the mean of
// all ranks' gradients, whichever variant moved them.
//
//   kNaive     after the backward, one all_reduce per parameter, each waited
//              for before the next is issued
//   kFlat      after the backward, one all_reduce of every gradient
//              flattened into one buffer, unflattened after
//   kOverlap   one asynchronous all_reduce per parameter as soon as its
//              gradient is final (GradsReady, layer by layer from the back),
//              all waited for in Finish
//   kBucketed  parameters packed into buckets of at most bucket_bytes in
//              reverse model order (the order gradients become final); a
//              bucket's all_reduce starts when its last gradient is final;
//              a parameter larger than a bucket is a bucket of its own
//
// NCCL averages in the all_reduce itself (ReduceOp::AVG, ncclAvg: the
// division folded into the reduction, as PyTorch's Reducer folds it into its
// copy into the bucket); Gloo has no AVG, so there the sum is divided by the
// world size after, one more pass over the gradients. With bf16 compression
// (PyTorch DDP's bf16_compress_hook) each unit travels as a bfloat16 copy
// (divided by the world size before the sum where the backend cannot
// average) and the mean is copied back into the gradients: half the bytes. Communication runs where
// the backend runs it: NCCL on its own stream, ordered after the gradient's kernels on the current
// stream, and waited for by making the current stream wait (the host does not block); Gloo on its
// own threads, waited for on the host.
#ifndef BENCHD_WORKER_DDP_GRADIENT_SYNC_H_
#define BENCHD_WORKER_DDP_GRADIENT_SYNC_H_

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace benchd::worker::ddp {

enum class SyncVariant { kNaive, kFlat, kOverlap, kBucketed };
const char* SyncVariantName(SyncVariant variant);

// What one step's synchronisation did on this rank.
struct SyncStats {
  int64_t calls = 0;  // collectives issued
  int64_t bytes = 0;  // bytes all-reduced (this rank's buffers)
  // Host time inside the backend's calls (issue and wait). With Gloo that is
  // the communication itself; with NCCL only its launch, the transfer being
  // asynchronous on the device (the step's exposed communication is measured
  // against a compute-only step instead).
  double host_seconds = 0;
};

class GradientSync {
 public:
  // `params` in the model's order (Module::parameters()); their gradients
  // must have the parameters' dtype and device. `bucket_bytes` > 0 for
  // kBucketed (buckets are sized by the gradients' own bytes, compressed or
  // not, as DDP's bucket_cap_mb is).
  GradientSync(SyncVariant variant, std::vector<torch::Tensor> params,
               c10::intrusive_ptr<c10d::Backend> group, int64_t bucket_bytes = 0,
               bool compress_bf16 = false);

  // Starts a step: nothing is in flight, no gradient is final.
  void BeginStep();
  // These parameters' gradients are final for this step (ExplicitStep's
  // GradsReady); kOverlap and kBucketed issue their all_reduce here.
  void GradsReady(const std::vector<torch::Tensor>& params);
  // Issues what is left, waits for everything, and leaves the mean in every
  // parameter's gradient. A parameter without a gradient gets zeros first, so
  // every rank issues the same collectives. `averaged`, when given, is called
  // with each unit's parameter indices (a parameter, a bucket, all of them)
  // as soon as the current stream has their mean, in the order the units
  // finish communicating: work issued there runs while later units still
  // communicate (DDP_OPTIMIZER_ADAMW_OVERLAPPED steps their AdamW there).
  using Averaged = std::function<void(const std::vector<size_t>& params)>;
  void Finish(const Averaged& averaged = nullptr);

  const SyncStats& stats() const { return stats_; }
  // kBucketed's buckets as parameter indices (model order), in launch order;
  // for the others, empty.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  SyncVariant variant() const { return variant_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    int64_t numel = 0;
    size_t pending = 0;
    torch::Tensor flat;  // what travels: the gradients' dtype, or bf16
    c10::intrusive_ptr<c10d::Work> work;
  };
  torch::Tensor& GradOf(size_t index);
  // What travels for one gradient (the gradient itself, or its bf16 copy
  // already divided by the world size), and the mean back from it.
  torch::Tensor ToWire(torch::Tensor& grad) const;
  void FromWire(torch::Tensor& grad, const torch::Tensor& wire) const;
  c10::intrusive_ptr<c10d::Work> AllReduce(torch::Tensor& tensor);
  void Wait(const c10::intrusive_ptr<c10d::Work>& work);
  void Launch(Bucket& bucket);
  void Unpack(Bucket& bucket);

  const SyncVariant variant_;
  const bool compress_bf16_;
  bool backend_averages_ = false;  // NCCL: ReduceOp::AVG, no division after
  std::vector<torch::Tensor> params_;
  c10::intrusive_ptr<c10d::Backend> group_;
  std::unordered_map<const void*, size_t> index_of_;  // TensorImpl* -> index
  std::vector<std::vector<size_t>> buckets_;
  std::vector<Bucket> bucket_state_;
  std::vector<size_t> bucket_of_;                          // parameter index -> bucket (kBucketed)
  std::vector<c10::intrusive_ptr<c10d::Work>> per_param_;  // kOverlap
  std::vector<torch::Tensor> per_param_wire_;              // kOverlap
  std::vector<bool> launched_;                             // kOverlap
  std::vector<size_t> launch_order_;                       // kOverlap, this step
  SyncStats stats_;
};

// Every rank's parameters become rank 0's (one broadcast per parameter), so
// ranks built with different seeds start equal. Returns the calls' bytes.
int64_t BroadcastFromRankZero(const std::vector<torch::Tensor>& params, c10d::Backend& group);

}  // namespace benchd::worker::ddp

#endif  // BENCHD_WORKER_DDP_GRADIENT_SYNC_H_
