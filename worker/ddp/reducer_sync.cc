#include "worker/ddp/reducer_sync.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <limits>

namespace benchd::worker::ddp {
namespace {

c10d::ProcessGroup::BackendType BackendTypeOf(v1::CollectiveBackend backend) {
  return backend == v1::COLLECTIVE_BACKEND_NCCL ? c10d::ProcessGroup::BackendType::NCCL
                                                : c10d::ProcessGroup::BackendType::GLOO;
}

}  // namespace

ReducerSync::ReducerSync(const std::vector<torch::Tensor>& params, const GroupMember& member,
                         int64_t bucket_bytes) {
  group_ = c10::make_intrusive<c10d::ProcessGroup>(member.store, member.rank, member.world_size);
  const auto type = BackendTypeOf(member.backend);
  group_->setBackend(member.tensor_device.type(), type, member.pg);
  group_->setDefaultBackend(type);

  // DDP with find_unused_parameters=False: one bucket of everything until
  // the buckets are rebuilt (in reverse, the order DDP hands them over).
  const std::vector<bool> sparse(params.size(), false);
  auto [indices, limits] =
      c10d::compute_bucket_assignment_by_size(params, {std::numeric_limits<size_t>::max()}, sparse);
  std::reverse(indices.begin(), indices.end());
  reducer_ = std::make_unique<c10d::Reducer>(
      params, std::move(indices), group_, sparse, bucket_bytes,
      /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
      /*param_names=*/std::unordered_map<size_t, std::string>{},
      /*first_bucket_bytes_cap=*/std::min<int64_t>(c10d::kDefaultFirstBucketBytes, bucket_bytes),
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
      /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
  CountBuckets();
}

ReducerSync::~ReducerSync() = default;

void ReducerSync::BeforeForward() {
  reducer_->prepare_for_forward();
  if (reducer_->rebuild_buckets()) CountBuckets();
}

void ReducerSync::BeforeBackward() { reducer_->prepare_for_backward({}); }

void ReducerSync::CountBuckets() {
  const std::vector<c10d::GradBucket> buckets =
      reducer_->get_grad_buckets(/*return_zero_tensors=*/false);
  buckets_ = static_cast<int64_t>(buckets.size());
  bytes_ = 0;
  for (const c10d::GradBucket& b : buckets) {
    bytes_ += b.getBuffer().numel() * static_cast<int64_t>(b.getBuffer().element_size());
  }
}

}  // namespace benchd::worker::ddp
