#include "server/jobs/progress_deadline.h"

namespace benchd::server {

ProgressDeadline::ProgressDeadline(std::chrono::milliseconds deadline, std::string doing,
                                   Expired on_expired)
    : deadline_(deadline),
      on_expired_(std::move(on_expired)),
      last_(std::chrono::steady_clock::now()),
      doing_(std::move(doing)) {
  watcher_ = std::thread([this] { Watch(); });
}

ProgressDeadline::~ProgressDeadline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  watcher_.join();
}

void ProgressDeadline::Progress(std::string doing) {
  std::lock_guard<std::mutex> lock(mu_);
  last_ = std::chrono::steady_clock::now();
  doing_ = std::move(doing);
}

bool ProgressDeadline::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

std::string ProgressDeadline::doing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return doing_;
}

void ProgressDeadline::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    // Progress moves last_ on; wake when the current deadline would pass.
    const auto due = last_ + deadline_;
    if (std::chrono::steady_clock::now() >= due) {
      expired_ = true;
      const std::string doing = doing_;
      lock.unlock();
      on_expired_(doing);
      return;
    }
    cv_.wait_until(lock, due, [&] { return stopping_; });
  }
}

}  // namespace benchd::server
