#include "worker/ddp/gradient_sync.h"

#include <chrono>
#include <utility>

#include "common/ddp_model.h"

namespace benchd::worker::ddp {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t BytesOf(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// The parameter's gradient; zeros when the step gave it none.
torch::Tensor& FinalGrad(torch::Tensor& param) {
  torch::Tensor& grad = param.mutable_grad();
  if (!grad.defined()) grad = torch::zeros_like(param);
  return grad;
}

}  // namespace

const char* SyncVariantName(SyncVariant variant) {
  switch (variant) {
    case SyncVariant::kNaive:
      return "naive";
    case SyncVariant::kFlat:
      return "flat";
    case SyncVariant::kOverlap:
      return "overlap";
    case SyncVariant::kBucketed:
      return "bucketed";
  }
  return "?";
}

GradientSync::GradientSync(SyncVariant variant, std::vector<torch::Tensor> params,
                           c10::intrusive_ptr<c10d::Backend> group, int64_t bucket_bytes,
                           bool compress_bf16)
    : variant_(variant),
      compress_bf16_(compress_bf16),
      params_(std::move(params)),
      group_(std::move(group)) {
  TORCH_CHECK(variant_ != SyncVariant::kBucketed || bucket_bytes > 0,
              "GradientSync: bucket size must be > 0 bytes, got ", bucket_bytes);
  TORCH_CHECK(group_, "GradientSync: no process group");
  backend_averages_ = group_->getBackendName() == "nccl";
  for (size_t i = 0; i < params_.size(); ++i) index_of_[params_[i].unsafeGetTensorImpl()] = i;
  if (variant_ == SyncVariant::kBucketed) {
    std::vector<int64_t> bytes;
    for (const auto& p : params_) bytes.push_back(BytesOf(p));
    buckets_ = AssignBuckets(bytes, bucket_bytes);
    bucket_of_.resize(params_.size());
    bucket_state_.resize(buckets_.size());
    for (size_t b = 0; b < buckets_.size(); ++b) {
      bucket_state_[b].params = buckets_[b];
      for (size_t i : buckets_[b]) {
        bucket_of_[i] = b;
        bucket_state_[b].numel += params_[i].numel();
      }
    }
  }
  per_param_.resize(params_.size());
  per_param_wire_.resize(params_.size());
  launched_.assign(params_.size(), false);
}

torch::Tensor& GradientSync::GradOf(size_t index) { return FinalGrad(params_[index]); }

// bf16_compress_hook's order: round to bf16, then divide (in bf16) unless
// the all_reduce averages.
torch::Tensor GradientSync::ToWire(torch::Tensor& grad) const {
  if (!compress_bf16_) return grad;
  torch::Tensor wire = grad.to(torch::kBFloat16);
  if (!backend_averages_) wire.div_(group_->getSize());
  return wire;
}

void GradientSync::FromWire(torch::Tensor& grad, const torch::Tensor& wire) const {
  if (compress_bf16_) {
    grad.copy_(wire);
  } else if (!backend_averages_) {
    grad.div_(group_->getSize());
  }
}

c10::intrusive_ptr<c10d::Work> GradientSync::AllReduce(torch::Tensor& tensor) {
  const auto start = Clock::now();
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = backend_averages_ ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
  auto work = group_->allreduce(tensors, options);
  stats_.host_seconds += SecondsSince(start);
  stats_.calls += 1;
  stats_.bytes += BytesOf(tensor);
  return work;
}

void GradientSync::Wait(const c10::intrusive_ptr<c10d::Work>& work) {
  const auto start = Clock::now();
  work->wait();
  stats_.host_seconds += SecondsSince(start);
}

void GradientSync::BeginStep() {
  stats_ = SyncStats{};
  launched_.assign(params_.size(), false);
  launch_order_.clear();
  for (auto& w : per_param_) w.reset();
  for (auto& w : per_param_wire_) w = torch::Tensor();
  for (auto& b : bucket_state_) {
    b.pending = b.params.size();
    b.work.reset();
    b.flat = torch::Tensor();
  }
}

void GradientSync::Launch(Bucket& bucket) {
  if (compress_bf16_) {
    // Straight into the bf16 buffer: one pass over the gradients.
    bucket.flat =
        torch::empty({bucket.numel}, params_[bucket.params[0]].options().dtype(torch::kBFloat16));
    int64_t offset = 0;
    for (size_t i : bucket.params) {
      torch::Tensor& grad = GradOf(i);
      bucket.flat.narrow(0, offset, grad.numel()).copy_(grad.reshape({-1}));
      offset += grad.numel();
    }
    if (!backend_averages_) bucket.flat.div_(group_->getSize());
  } else {
    std::vector<torch::Tensor> views;
    views.reserve(bucket.params.size());
    for (size_t i : bucket.params) views.push_back(GradOf(i).reshape({-1}));
    bucket.flat = torch::cat(views);
  }
  bucket.work = AllReduce(bucket.flat);
}

void GradientSync::Unpack(Bucket& bucket) {
  Wait(bucket.work);
  if (!compress_bf16_ && !backend_averages_) bucket.flat.div_(group_->getSize());
  int64_t offset = 0;
  for (size_t i : bucket.params) {
    torch::Tensor& grad = GradOf(i);
    torch::Tensor mean = bucket.flat.narrow(0, offset, grad.numel()).view_as(grad);
    offset += grad.numel();
    if (compress_bf16_) {
      grad.copy_(mean);
    } else {
      // The gradient becomes its view of the bucket, as DDP's
      // gradient_as_bucket_view: no copy back, and the backward's own
      // gradient is freed now instead of living beside the bucket (the next
      // step's zero_grad drops the views, and the bucket with them).
      grad = std::move(mean);
    }
  }
  bucket.flat = torch::Tensor();
  bucket.work.reset();
}

void GradientSync::GradsReady(const std::vector<torch::Tensor>& params) {
  if (variant_ != SyncVariant::kOverlap && variant_ != SyncVariant::kBucketed) return;
  for (const auto& p : params) {
    auto it = index_of_.find(p.unsafeGetTensorImpl());
    TORCH_CHECK(it != index_of_.end(), "GradientSync: a parameter outside the synchronised model");
    const size_t i = it->second;
    if (variant_ == SyncVariant::kOverlap) {
      if (launched_[i]) continue;
      launched_[i] = true;
      launch_order_.push_back(i);
      per_param_wire_[i] = ToWire(GradOf(i));
      per_param_[i] = AllReduce(per_param_wire_[i]);
    } else {
      Bucket& bucket = bucket_state_[bucket_of_[i]];
      if (launched_[i]) continue;
      launched_[i] = true;
      if (--bucket.pending == 0) Launch(bucket);
    }
  }
}

void GradientSync::Finish(const Averaged& averaged) {
  switch (variant_) {
    case SyncVariant::kNaive:
      for (size_t i = 0; i < params_.size(); ++i) {
        torch::Tensor wire = ToWire(GradOf(i));
        Wait(AllReduce(wire));
        FromWire(GradOf(i), wire);
        if (averaged) averaged({i});
      }
      break;
    case SyncVariant::kFlat: {
      Bucket all;
      for (size_t i = 0; i < params_.size(); ++i) {
        all.params.push_back(i);
        all.numel += params_[i].numel();
      }
      Launch(all);
      Unpack(all);
      if (averaged) averaged(all.params);
      break;
    }
    case SyncVariant::kOverlap:
      // Parameters the backward did not announce go last, in model order.
      for (size_t i = 0; i < params_.size(); ++i) {
        if (!launched_[i]) {
          launched_[i] = true;
          launch_order_.push_back(i);
          per_param_wire_[i] = ToWire(GradOf(i));
          per_param_[i] = AllReduce(per_param_wire_[i]);
        }
      }
      // In launch order: the first launched is the first done.
      for (size_t i : launch_order_) {
        Wait(per_param_[i]);
        per_param_[i].reset();
        FromWire(GradOf(i), per_param_wire_[i]);
        per_param_wire_[i] = torch::Tensor();
        if (averaged) averaged({i});
      }
      break;
    case SyncVariant::kBucketed:
      for (auto& bucket : bucket_state_) {
        if (!bucket.work) {
          for (size_t i : bucket.params) launched_[i] = true;
          bucket.pending = 0;
          Launch(bucket);
        }
      }
      for (auto& bucket : bucket_state_) {
        Unpack(bucket);
        if (averaged) averaged(bucket.params);
      }
      break;
  }
}

int64_t BroadcastFromRankZero(const std::vector<torch::Tensor>& params, c10d::Backend& group) {
  torch::NoGradGuard no_grad;
  int64_t bytes = 0;
  for (const auto& p : params) {
    std::vector<torch::Tensor> tensors{p.detach()};
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    group.broadcast(tensors, options)->wait();
    bytes += BytesOf(p);
  }
  return bytes;
}

}  // namespace benchd::worker::ddp
