// Per-job event history and live subscribers, behind Bench.Watch. A watcher
// gets the whole history first and then every new event, with no gap and no
// repeat, because both happen under one lock.
#ifndef BENCHD_SERVER_JOBS_EVENT_HUB_H_
#define BENCHD_SERVER_JOBS_EVENT_HUB_H_

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

  // Finished jobs' histories stay for late watchers (`benchctl watch` just
  // after a short job ended replays it all), within bounds, because a result
  // may be large and memory must not grow with finished jobs: a history over
  // `max_history_bytes` is dropped at its terminal event, and the oldest
  // finished ones go while there are more than `max_finished` or they hold
  // more than `max_finished_bytes`. A dropped job's Subscribe gets id 0 and
  // Watch answers from the store, which holds the final job before its
  // terminal event is published.
  explicit EventHub(size_t max_finished = 256, size_t max_finished_bytes = 16 << 20,
                    size_t max_history_bytes = 1 << 20);

  // Appends to the job's history and calls its subscribers (under the hub's
  // lock: callbacks must be quick and must not call back into the hub).
  void Publish(const v1::JobEvent& event);

  struct Subscription {
    uint64_t id = 0;  // 0: the job has no history here
    std::vector<v1::JobEvent> history;
  };
  // Returns the history so far and registers `cb` for later events, atomically.
  // A job with no history here gets id 0; a finished one its history and no
  // registration (nothing more will come).
  Subscription Subscribe(const std::string& job_id, Callback cb);
  // After this returns, `cb` is never called again.
  void Unsubscribe(const std::string& job_id, uint64_t id);

  // Events held for all jobs (for tests of what is kept).
  size_t HeldEvents();

 private:
  struct JobHistory {
    std::vector<v1::JobEvent> events;
    size_t bytes = 0;  // of `events`, serialized
    std::map<uint64_t, Callback> subscribers;
    bool finished = false;
  };
  // Publish under mu_; true when it dropped a long finished history.
  bool PublishLocked(const v1::JobEvent& event);
  void DropOldFinished();  // under mu_
  std::mutex mu_;
  std::map<std::string, JobHistory> jobs_;
  std::deque<std::string> finished_order_;
  size_t finished_bytes_ = 0;  // the kept finished histories
  const size_t max_finished_;
  const size_t max_finished_bytes_;
  const size_t max_history_bytes_;
  uint64_t next_id_ = 1;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_EVENT_HUB_H_
