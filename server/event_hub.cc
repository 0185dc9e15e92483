#include "server/event_hub.h"

namespace benchd::server {

bool IsTerminal(const v1::JobEvent& e) {
  return e.has_result() || e.has_failed() || e.has_cancelled() || e.has_interrupted();
}

EventHub::EventHub(size_t max_finished_histories) : max_finished_(max_finished_histories) {}

void EventHub::Publish(const v1::JobEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  JobHistory& h = jobs_[event.job_id()];
  if (h.finished) return;  // nothing follows a terminal event
  h.events.push_back(event);
  for (auto& [id, cb] : h.subscribers) cb(event);
  if (IsTerminal(event)) {
    h.finished = true;
    finished_order_.push_back(event.job_id());
    while (finished_order_.size() > max_finished_) {
      auto it = jobs_.find(finished_order_.front());
      // A history with live watchers stays until they are gone.
      if (it != jobs_.end() && it->second.subscribers.empty()) jobs_.erase(it);
      finished_order_.pop_front();
    }
  }
}

EventHub::Subscription EventHub::Subscribe(const std::string& job_id, Callback cb) {
  std::lock_guard<std::mutex> lock(mu_);
  Subscription sub;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return sub;
  sub.history = it->second.events;
  if (!it->second.finished) {
    sub.id = next_id_++;
    it->second.subscribers.emplace(sub.id, std::move(cb));
  } else {
    sub.id = next_id_++;  // nothing more will come; no registration needed
  }
  return sub;
}

void EventHub::Unsubscribe(const std::string& job_id, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.subscribers.erase(id);
}

}  // namespace benchd::server
