#include "server/jobs/device_tickets.h"

#include <algorithm>

namespace benchd::server {

DeviceTickets::DeviceTickets(const std::vector<std::string>& devices) {
  for (const auto& d : devices) queues_[d];
}

uint64_t DeviceTickets::Acquire(const std::vector<std::string>& devices,
                                const std::function<bool()>& give_up) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_++;
  for (const auto& d : devices) queues_[d].push_back(ticket);
  auto mine = [&] {
    return std::all_of(devices.begin(), devices.end(),
                       [&](const std::string& d) { return queues_[d].front() == ticket; });
  };
  while (!mine()) {
    if (give_up && give_up()) {
      for (const auto& d : devices) {
        auto& q = queues_[d];
        q.erase(std::find(q.begin(), q.end(), ticket));
      }
      cv_.notify_all();
      return 0;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
  held_[ticket] = devices;
  return ticket;
}

void DeviceTickets::Release(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(ticket);
  if (it == held_.end()) return;
  for (const auto& d : it->second) {
    auto& q = queues_[d];
    q.erase(std::find(q.begin(), q.end(), ticket));
  }
  held_.erase(it);
  cv_.notify_all();
}

void DeviceTickets::Poke() { cv_.notify_all(); }

}  // namespace benchd::server
