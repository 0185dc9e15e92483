// Who may use which devices now. A job holds every device it runs on: one
// for a benchmark, all members for a collective. Acquire queues one ticket
// per device, all at once, and waits until each is at the front of its
// device's queue; tickets are served in the order they were taken. As every
// job enqueues all its tickets in one step, the job that took its tickets
// first is ahead on every device it shares with a later one, so two jobs
// can never wait for each other (no deadlock) and none waits forever.
#ifndef BENCHD_SERVER_JOBS_DEVICE_TICKETS_H_
#define BENCHD_SERVER_JOBS_DEVICE_TICKETS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace benchd::server {

class DeviceTickets {
 public:
  explicit DeviceTickets(const std::vector<std::string>& devices);

  // Waits until the job holds all `devices` (returns its ticket, > 0), or
  // `give_up` returns true (polled every 200 ms; returns 0, nothing held).
  uint64_t Acquire(const std::vector<std::string>& devices, const std::function<bool()>& give_up);
  void Release(uint64_t ticket);
  // Wakes every waiter so that it polls give_up now.
  void Poke();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<uint64_t>> queues_;
  std::map<uint64_t, std::vector<std::string>> held_;
  uint64_t next_ = 1;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_DEVICE_TICKETS_H_
