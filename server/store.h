// The daemon's results store: every job, its state and its result, in one
// SQLite file. The serialized Job proto is the record; the other columns exist
// only for queries, so new Job fields need no migration.
#ifndef BENCHD_SERVER_STORE_H_
#define BENCHD_SERVER_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

struct sqlite3;

namespace benchd::server {

// ListJobs' filters, ANDed; unspecified / "" = any.
struct JobFilter {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  v1::JobKind kind = v1::JOB_KIND_UNSPECIFIED;
  std::string device;  // jobs that run on it (any of a collective's devices)
};

struct JobPage {
  std::vector<v1::Job> jobs;
  int64_t next_before_id = 0;  // the next page's before_id; 0 when this is the last page
};

inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 1000;

class Store {
 public:
  // Opens or creates the database at `path` (parent dir must exist); WAL mode, busy timeout.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Stores a new job and returns its id: the decimal string of an INTEGER PRIMARY KEY
  // AUTOINCREMENT (ids never reused). job.id() is ignored; the stored Job carries the new id.
  absl::StatusOr<std::string> Insert(const v1::Job& job);
  // Rewrites the stored job with this id (whole proto). NOT_FOUND if absent.
  absl::Status Update(const v1::Job& job);
  // NOT_FOUND "job 'X' not found" if absent; INVALID_ARGUMENT if X is not a job id
  // (common/job_id.h).
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // One page of jobs matching `filter`, newest first: at most `page_size`
  // (<= 0 means 50) with ids below `before_id` (0 = from the newest). Indexed
  // for every filter, so a page costs the same with 100,000 jobs as with 10.
  absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size, int64_t before_id = 0);
  // EXPLAIN QUERY PLAN's lines for List's query under `filter` (for the tests
  // that keep every filter on an index).
  absl::StatusOr<std::vector<std::string>> ListPlan(const JobFilter& filter);
  // Called once at daemon start: every RUNNING job becomes INTERRUPTED with finished = now,
  // error_code 10 (ABORTED) and error_message "the daemon stopped while this job was running";
  // returns the QUEUED jobs, oldest first, for the scheduler to take up again.
  absl::StatusOr<std::vector<v1::Job>> Recover();

 private:
  explicit Store(sqlite3* db) : db_(db) {}

  // One connection, used by one thread at a time.
  std::mutex mu_;
  sqlite3* const db_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_H_
