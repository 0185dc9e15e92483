#include "worker/ddp/sharded_adamw.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace benchd::worker::ddp {

std::vector<int> AssignShards(const std::vector<int64_t>& param_bytes, int world) {
  TORCH_CHECK(world > 0, "AssignShards: world size must be > 0, got ", world);
  std::vector<size_t> order(param_bytes.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; equal sizes in model order, so every rank computes the same.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return param_bytes[a] > param_bytes[b]; });
  std::vector<int64_t> load(world, 0);
  std::vector<int> owners(param_bytes.size(), 0);
  for (size_t i : order) {
    const int rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[i] = rank;
    load[rank] += param_bytes[i];
  }
  return owners;
}

ShardedAdamW::ShardedAdamW(std::vector<torch::Tensor> params,
                           c10::intrusive_ptr<c10d::Backend> group, AdamWOptions options)
    : params_(std::move(params)), group_(std::move(group)) {
  TORCH_CHECK(group_, "ShardedAdamW: no process group");
  std::vector<int64_t> bytes;
  for (const auto& p : params_) bytes.push_back(p.numel() * static_cast<int64_t>(p.element_size()));
  owners_ = AssignShards(bytes, group_->getSize());
  std::vector<torch::Tensor> mine;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owners_[i] == group_->getRank()) {
      mine.push_back(params_[i]);
      shard_bytes_ += bytes[i];
    }
  }
  optimizer_ = std::make_unique<AdamW>(std::move(mine), options);
}

ShardedAdamW::Moved ShardedAdamW::Step(const std::function<void(AdamW&)>& step) {
  if (step) {
    step(*optimizer_);
  } else {
    optimizer_->Step();
  }
  torch::NoGradGuard no_grad;
  Moved moved;
  const int me = group_->getRank();
  auto broadcast = [&](torch::Tensor& t, int owner) {
    std::vector<torch::Tensor> tensors{t};
    c10d::BroadcastOptions options;
    options.rootRank = owner;
    group_->broadcast(tensors, options)->wait();
    moved.bytes += t.numel() * static_cast<int64_t>(t.element_size());
    moved.calls += 1;
  };
  for (int owner = 0; owner < group_->getSize(); ++owner) {
    std::vector<size_t> pack;
    int64_t pack_bytes = 0;
    auto send_pack = [&] {
      if (pack.empty()) return;
      std::vector<torch::Tensor> parts;
      for (size_t i : pack) parts.push_back(params_[i].detach().reshape({-1}));
      torch::Tensor flat = torch::cat(parts);
      broadcast(flat, owner);
      if (owner != me) {
        int64_t offset = 0;
        for (size_t i : pack) {
          params_[i].detach().copy_(flat.narrow(0, offset, params_[i].numel()).view_as(params_[i]));
          offset += params_[i].numel();
        }
      }
      pack.clear();
      pack_bytes = 0;
    };
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owners_[i] != owner) continue;
      const int64_t bytes = params_[i].numel() * static_cast<int64_t>(params_[i].element_size());
      if (bytes >= kInPlaceBytes && params_[i].is_contiguous()) {
        torch::Tensor p = params_[i].detach();
        broadcast(p, owner);
        continue;
      }
      if (pack_bytes + bytes > kPackBytes) send_pack();
      pack.push_back(i);
      pack_bytes += bytes;
    }
    send_pack();
  }
  return moved;
}

}  // namespace benchd::worker::ddp
