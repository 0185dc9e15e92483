// FIFO job queues, one per device. The scheduler's policy lives here: one job
// at a time per device, in submission order, and a queued job can be taken out
// (cancelled) before it starts.
#ifndef BENCHD_SERVER_JOBS_JOB_QUEUE_H_
#define BENCHD_SERVER_JOBS_JOB_QUEUE_H_

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace benchd::server {

class JobQueue {
 public:
  explicit JobQueue(const std::vector<std::string>& devices);

  // False if the device is unknown or the queue is closed.
  bool Push(const std::string& device, const std::string& job_id);
  // Blocks until a job for `device` is queued (returns it) or the queue closes (nullopt).
  std::optional<std::string> Pop(const std::string& device);
  // Takes a queued job out; false if it is not queued (running, finished, unknown).
  bool Remove(const std::string& job_id);
  size_t Depth(const std::string& device) const;
  // Wakes every Pop with nullopt; later Pushes fail.
  void Close();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<std::string>> queues_;
  bool closed_ = false;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_JOB_QUEUE_H_
