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
  // NOT_FOUND "job 'X' not found" if absent; INVALID_ARGUMENT if X is not a job id (not a
  // positive integer).
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // Newest first; limit <= 0 means 50; state JOB_STATE_UNSPECIFIED means any.
  absl::StatusOr<std::vector<v1::Job>> List(int limit, v1::JobState state);
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
