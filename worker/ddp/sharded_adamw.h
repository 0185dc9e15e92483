// The sharded optimizer (ZeRO stage 1, CS336 "Systems" §2.4): each rank
// keeps AdamW state (m, v) only for its shard of the parameters and steps
// only those; then every parameter reaches every rank from its owner by
// broadcast: a parameter of kInPlaceBytes or more in place, smaller ones of
// one owner packed into flat buffers of at most kPackBytes (fewer calls; the
// extra memory stays that small, so the optimizer step's peak is ZeRO-1's
// formula: a flat copy of a whole shard was 3.7 GiB more for xl on 2
// ranks). The gradients must
// already be the mean over the ranks (GradientSync), so each shard steps
// exactly as an unsharded optimizer would and the parameters stay equal on
// every rank.
//
// Shards are balanced by bytes as PyTorch's ZeroRedundancyOptimizer balances
// them: parameters by size, largest first, each to the rank holding the
// fewest bytes so far (ties to the lower rank).
#ifndef BENCHD_WORKER_DDP_SHARDED_ADAMW_H_
#define BENCHD_WORKER_DDP_SHARDED_ADAMW_H_

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "worker/adamw.h"

namespace benchd::worker::ddp {

// The owner rank of each parameter (by index) over `world` ranks.
std::vector<int> AssignShards(const std::vector<int64_t>& param_bytes, int world);

class ShardedAdamW {
 public:
  static constexpr int64_t kInPlaceBytes = 16 << 20;
  static constexpr int64_t kPackBytes = 64 << 20;
  struct Moved {
    int64_t bytes = 0;  // this rank's broadcasts' bytes
    int64_t calls = 0;  // broadcasts
  };

  ShardedAdamW(std::vector<torch::Tensor> params, c10::intrusive_ptr<c10d::Backend> group,
               AdamWOptions options = {});

  // This rank's shard steps (the course's AdamW; `step`, when given, steps
  // it another way, e.g. through RunOptimizerStep's foreach or fused path),
  // then every shard is broadcast from its owner.
  Moved Step(const std::function<void(AdamW&)>& step = {});

  // Bytes of AdamW state on this rank (m and v of its shard).
  int64_t StateBytes() const { return optimizer_->StateBytes(); }
  // Bytes of this rank's shard of the parameters.
  int64_t ShardBytes() const { return shard_bytes_; }
  const std::vector<int>& owners() const { return owners_; }

 private:
  std::vector<torch::Tensor> params_;
  c10::intrusive_ptr<c10d::Backend> group_;
  std::vector<int> owners_;
  std::unique_ptr<AdamW> optimizer_;
  int64_t shard_bytes_ = 0;
};

}  // namespace benchd::worker::ddp

#endif  // BENCHD_WORKER_DDP_SHARDED_ADAMW_H_
