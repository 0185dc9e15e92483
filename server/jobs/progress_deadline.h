// A running job's progress deadline: the job must show progress (a step, a
// log line, a collective size) at least every `deadline`, or `on_expired`
// runs once, on a thread of its own, naming what the job was doing. The
// dispatcher kills the job's worker from there (a stopped or deadlocked
// worker answers nothing else) and fails the job with DEADLINE_EXCEEDED.
#ifndef BENCHD_SERVER_JOBS_PROGRESS_DEADLINE_H_
#define BENCHD_SERVER_JOBS_PROGRESS_DEADLINE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace benchd::server {

class ProgressDeadline {
 public:
  using Expired = std::function<void(const std::string& doing)>;

  // `doing` says what the job does until its first Progress ("starting:
  // building or loading the model").
  ProgressDeadline(std::chrono::milliseconds deadline, std::string doing, Expired on_expired);
  // Stops watching; after it returns `on_expired` has either run to its end
  // or will never run.
  ~ProgressDeadline();
  ProgressDeadline(const ProgressDeadline&) = delete;
  ProgressDeadline& operator=(const ProgressDeadline&) = delete;

  // The job moved on; `doing` is what it does now ("measured step 17 of 100").
  void Progress(std::string doing);

  bool expired() const;
  // What it was doing when the deadline passed (or now).
  std::string doing() const;
  std::chrono::milliseconds deadline() const { return deadline_; }

 private:
  void Watch();

  const std::chrono::milliseconds deadline_;
  const Expired on_expired_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point last_;
  std::string doing_;
  bool expired_ = false;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_PROGRESS_DEADLINE_H_
