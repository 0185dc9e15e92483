#include "server/jobs/pending_results.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "server/core/job_state.h"

namespace benchd::server {
namespace {

std::string Ended(const v1::Job& job) {
  return absl::StrCat("ended ", JobStateName(job.state()), " at ",
                      google::protobuf::util::TimeUtil::ToString(job.finished()));
}

// `job` without its result: what is stored when the result itself cannot be.
v1::Job WithoutResult(v1::Job job, absl::StatusCode code, const std::string& message) {
  job.clear_result();
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error_code(static_cast<int>(code));
  job.set_error_message(message);
  return job;
}

}  // namespace

PendingResults::PendingResults(Store* store, OnStored on_stored, OnCount on_count, Options options)
    : store_(store),
      on_stored_(std::move(on_stored)),
      on_count_(std::move(on_count)),
      options_(options),
      thread_([this] { Loop(); }) {}

PendingResults::~PendingResults() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PendingResults::Add(v1::Job job, const absl::Status& why) {
  size_t bytes = job.ByteSizeLong();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + bytes > options_.max_bytes && job.has_result()) {
      job = WithoutResult(job, absl::StatusCode::kResourceExhausted,
                          absl::StrCat("the job ", Ended(job), " but its result (", bytes,
                                       " bytes) could not be stored (", why.message(),
                                       ") and the daemon already holds ", bytes_,
                                       " bytes of unstored results (at most ", options_.max_bytes,
                                       "): the result was dropped"));
      bytes = job.ByteSizeLong();
    }
    bytes_ += bytes;
    const std::string id = job.id();
    jobs_[id] = Entry{std::move(job), std::string(why.message()), bytes};
    if (on_count_) on_count_(jobs_.size());
  }
  cv_.notify_all();
}

std::optional<std::string> PendingResults::Reason(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return absl::StrCat("the job ", Ended(it->second.job),
                      " but its record is not stored yet: ", it->second.why,
                      "; retried with back-off until it is");
}

size_t PendingResults::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

bool PendingResults::TryAll() {
  std::vector<v1::Job> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, e] : jobs_) todo.push_back(e.job);
  }
  std::vector<v1::Job> stored;
  for (const v1::Job& job : todo) {
    absl::Status s = store_->Update(job);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job.id());
    if (s.ok() || s.code() == absl::StatusCode::kNotFound) {
      bytes_ -= it->second.bytes;
      jobs_.erase(it);
      stored.push_back(job);
    } else {
      it->second.why = std::string(s.message());
    }
  }
  bool empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    empty = jobs_.empty();
    if (on_count_ && !stored.empty()) on_count_(jobs_.size());
  }
  for (const v1::Job& job : stored) {
    fprintf(stderr, "benchd: job %s is stored now (%s)\n", job.id().c_str(),
            JobStateName(job.state()).c_str());
    on_stored_(job);
  }
  if (empty && !stored.empty()) store_->RestoreReserve();
  return empty;
}

void PendingResults::Loop() {
  std::chrono::milliseconds wait = options_.first_retry;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (jobs_.empty()) {
      wait = options_.first_retry;
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      continue;
    }
    if (cv_.wait_for(lock, wait, [&] { return stopping_; })) break;
    lock.unlock();
    const bool done = TryAll();
    lock.lock();
    wait = done ? options_.first_retry : std::min(wait * 2, options_.max_retry);
  }
}

void PendingResults::Flush() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (TryAll()) return;
  // The reserve exists for this moment: a full disk at stop must not lose a
  // result silently.
  if (store_->ReleaseReserve() && TryAll()) return;
  std::map<std::string, Entry> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(jobs_);
    bytes_ = 0;
  }
  for (auto& [id, e] : left) {
    const v1::Job small =
        WithoutResult(e.job, absl::StatusCode::kDataLoss,
                      absl::StrCat("the job ", Ended(e.job),
                                   " but the daemon stopped before its result could be stored (",
                                   e.why, "): the result is lost"));
    if (store_->Update(small).ok()) {
      fprintf(stderr,
              "benchd: job %s: its result could not be stored before stopping (%s); "
              "stored as FAILED without it\n",
              id.c_str(), e.why.c_str());
      on_stored_(small);
    } else {
      fprintf(stderr,
              "benchd: job %s %s but could not be stored before stopping (%s): it will "
              "show INTERRUPTED at the next start and its result is lost\n",
              id.c_str(), Ended(e.job).c_str(), e.why.c_str());
    }
  }
  if (on_count_) on_count_(0);
}

}  // namespace benchd::server
