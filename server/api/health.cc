#include "server/api/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace benchd::server {

std::string DeviceHealthName(const std::string& device) {
  return absl::StrCat(kBenchServiceName, "/", device);
}

NodeHealth::NodeHealth(std::vector<std::string> devices, Publish publish)
    : publish_(std::move(publish)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& d : devices) {
    serving_[d] = false;
    publish_(DeviceHealthName(d), false);
  }
  publish_("", false);
  publish_(kBenchServiceName, false);
}

void NodeHealth::Set(const std::string& device, bool serving) {
  // Under the lock so that two changes reach the health service in order.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = serving_.find(device);
  if (it == serving_.end()) return;
  if (it->second != serving) {
    it->second = serving;
    publish_(DeviceHealthName(device), serving);
  }
  const bool node =
      std::all_of(serving_.begin(), serving_.end(), [](const auto& kv) { return kv.second; });
  if (node != node_serving_) {
    node_serving_ = node;
    publish_("", node);
    publish_(kBenchServiceName, node);
  }
}

}  // namespace benchd::server
