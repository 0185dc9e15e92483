#include "server/jobs/event_hub.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace benchd::server {

bool IsTerminal(const v1::JobEvent& e) {
  return e.has_result() || e.has_failed() || e.has_cancelled() || e.has_interrupted();
}

EventHub::EventHub(size_t max_finished, size_t max_finished_bytes, size_t max_history_bytes)
    : max_finished_(max_finished),
      max_finished_bytes_(max_finished_bytes),
      max_history_bytes_(max_history_bytes) {}

void EventHub::Publish(const v1::JobEvent& event) {
  bool dropped_long_history = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped_long_history = PublishLocked(event);
  }
#ifdef __GLIBC__
  // 100,000 small step events freed at once stay in glibc's heap (the
  // daemon's RSS would keep them); hand them back to the system.
  if (dropped_long_history) malloc_trim(0);
#endif
}

bool EventHub::PublishLocked(const v1::JobEvent& event) {
  JobHistory& h = jobs_[event.job_id()];
  if (h.finished) return false;  // nothing follows a terminal event
  h.events.push_back(event);
  h.bytes += event.ByteSizeLong();
  for (auto& [id, cb] : h.subscribers) cb(event);
  if (IsTerminal(event)) {
    h.finished = true;
    h.subscribers.clear();  // they have had everything
    const bool too_long = h.bytes > max_history_bytes_;
    if (too_long) {
      // A long run (100,000 steps): later watchers read the store.
      std::vector<v1::JobEvent>().swap(h.events);
      h.bytes = 0;
    }
    finished_bytes_ += h.bytes;
    finished_order_.push_back(event.job_id());
    DropOldFinished();
    return too_long;
  }
  return false;
}

void EventHub::DropOldFinished() {
  while (!finished_order_.empty() &&
         (finished_order_.size() > max_finished_ || finished_bytes_ > max_finished_bytes_)) {
    auto it = jobs_.find(finished_order_.front());
    if (it != jobs_.end()) {
      finished_bytes_ -= it->second.bytes;
      jobs_.erase(it);
    }
    finished_order_.pop_front();
  }
}

EventHub::Subscription EventHub::Subscribe(const std::string& job_id, Callback cb) {
  std::lock_guard<std::mutex> lock(mu_);
  Subscription sub;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || (it->second.finished && it->second.events.empty())) return sub;
  sub.history = it->second.events;
  sub.id = next_id_++;
  // A finished job's history is whole; nothing more will come.
  if (!it->second.finished) it->second.subscribers.emplace(sub.id, std::move(cb));
  return sub;
}

size_t EventHub::HeldEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, h] : jobs_) n += h.events.size();
  return n;
}

void EventHub::Unsubscribe(const std::string& job_id, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.subscribers.erase(id);
}

}  // namespace benchd::server
