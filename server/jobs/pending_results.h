// Finished jobs whose final record the store refused (a full data disk,
// mostly). Nobody may be told a job is done before its result is stored: the
// job is kept here (in memory, bounded) and written again with back-off; only
// once it is stored does `on_stored` run (the terminal event, the metrics).
// Meanwhile the store still says RUNNING and GetJob says why it waits
// (Job.result_pending).
#ifndef BENCHD_SERVER_JOBS_PENDING_RESULTS_H_
#define BENCHD_SERVER_JOBS_PENDING_RESULTS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "benchd/v1/bench.pb.h"
#include "server/store/store.h"

namespace benchd::server {

class PendingResults {
 public:
  struct Options {
    std::chrono::milliseconds first_retry{200};
    std::chrono::milliseconds max_retry{5000};
    // Unstored jobs held at most; a job that would pass it is kept without
    // its result, FAILED RESOURCE_EXHAUSTED saying so.
    size_t max_bytes = 64 << 20;
  };
  using OnStored = std::function<void(const v1::Job&)>;
  using OnCount = std::function<void(size_t)>;  // jobs waiting now (for the gauge)

  PendingResults(Store* store, OnStored on_stored, OnCount on_count, Options options);
  PendingResults(Store* store, OnStored on_stored, OnCount on_count)
      : PendingResults(store, std::move(on_stored), std::move(on_count), Options()) {}
  ~PendingResults();

  PendingResults(const PendingResults&) = delete;
  PendingResults& operator=(const PendingResults&) = delete;

  // `job` (final) could not be stored: `why`. Retried until it is.
  void Add(v1::Job job, const absl::Status& why);
  // For a job waiting here: how it ended and why it is not stored yet.
  std::optional<std::string> Reason(const std::string& id);
  size_t size();

  // Before the daemon stops: tries once more, then again after releasing the
  // store's disk reserve; a job that still cannot be stored is tried without
  // its result (FAILED DATA_LOSS, saying the result was lost and why), and
  // what even that cannot store is logged. No retries after this.
  void Flush();

 private:
  struct Entry {
    v1::Job job;
    std::string why;
    size_t bytes = 0;
  };
  void Loop();
  // Tries every entry once; true when none is left.
  bool TryAll();

  Store* const store_;
  const OnStored on_stored_;
  const OnCount on_count_;
  const Options options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> jobs_;  // by id
  size_t bytes_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_PENDING_RESULTS_H_
