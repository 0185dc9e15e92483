#include "server/jobs/job_queue.h"

#include <algorithm>

namespace benchd::server {

JobQueue::JobQueue(const std::vector<std::string>& devices) {
  for (const auto& d : devices) queues_[d];
}

bool JobQueue::Push(const std::string& device, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(device);
  if (closed_ || it == queues_.end()) return false;
  it->second.push_back(job_id);
  cv_.notify_all();
  return true;
}

std::optional<std::string> JobQueue::Pop(const std::string& device) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = queues_.find(device);
  if (it == queues_.end()) return std::nullopt;
  cv_.wait(lock, [&] { return closed_ || !it->second.empty(); });
  if (closed_) return std::nullopt;
  std::string id = std::move(it->second.front());
  it->second.pop_front();
  return id;
}

bool JobQueue::Remove(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [device, q] : queues_) {
    auto it = std::find(q.begin(), q.end(), job_id);
    if (it != q.end()) {
      q.erase(it);
      return true;
    }
  }
  return false;
}

size_t JobQueue::Depth(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(device);
  return it == queues_.end() ? 0 : it->second.size();
}

void JobQueue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

}  // namespace benchd::server
