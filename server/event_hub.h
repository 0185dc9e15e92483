// Per-job event history and live subscribers, behind Bench.Watch. A watcher
// gets the whole history first and then every new event, with no gap and no
// repeat, because both happen under one lock.
#ifndef BENCHD_SERVER_EVENT_HUB_H_
#define BENCHD_SERVER_EVENT_HUB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// True for result, failed, cancelled and interrupted events.
bool IsTerminal(const v1::JobEvent& event);

class EventHub {
 public:
  using Callback = std::function<void(const v1::JobEvent&)>;

  // Histories of finished jobs beyond this many are dropped (oldest first);
  // Watch then answers from the store.
  explicit EventHub(size_t max_finished_histories = 256);

  // Appends to the job's history and calls its subscribers (under the hub's
  // lock: callbacks must be quick and must not call back into the hub).
  void Publish(const v1::JobEvent& event);

  struct Subscription {
    uint64_t id = 0;  // 0: the job has no history here
    std::vector<v1::JobEvent> history;
  };
  // Returns the history so far and registers `cb` for later events, atomically.
  // A job with no history here gets id 0 and no registration.
  Subscription Subscribe(const std::string& job_id, Callback cb);
  // After this returns, `cb` is never called again.
  void Unsubscribe(const std::string& job_id, uint64_t id);

 private:
  struct JobHistory {
    std::vector<v1::JobEvent> events;
    std::map<uint64_t, Callback> subscribers;
    bool finished = false;
  };
  std::mutex mu_;
  std::map<std::string, JobHistory> jobs_;
  std::deque<std::string> finished_order_;
  size_t max_finished_;
  uint64_t next_id_ = 1;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_EVENT_HUB_H_
