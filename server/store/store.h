// The daemon's results store: every job, its state and its result, in one
// SQLite file. The serialized Job proto is the record; the other columns exist
// only for queries, so new Job fields need no migration.
#ifndef BENCHD_SERVER_STORE_STORE_H_
#define BENCHD_SERVER_STORE_STORE_H_

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "server/store/sqlite_statement.h"

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

// A file of this size beside the database, made at Open while there is room:
// removed by ReleaseReserve so that a daemon stopping on a full disk can still
// write the results it holds (see PendingResults).
inline constexpr int64_t kDiskReserveBytes = 8 << 20;

class Store {
 public:
  // Opens or creates the database at `path` (parent dir must exist); WAL mode, busy timeout.
  // A new database gets a random store id (store_id()).
  // On a full disk SQLite cannot make its WAL and shared-memory files: the
  // disk reserve beside the store is released for them (logged), and Insert
  // refuses new jobs until there is room for the reserve again.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Every write that fails because the disk is full answers RESOURCE_EXHAUSTED
  // naming the data dir and its free space (statvfs); reads keep working.
  //
  // A row whose record does not parse is never an error for the reads: it is
  // read as a Job with its id, kind, devices and state from its columns,
  // error_code DATA_LOSS and an error_message saying the record is damaged;
  // it is reported once (stderr and the bad-row listener).

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
  // A damaged QUEUED or RUNNING row is not taken up: its state column becomes
  // FAILED (the damaged record is kept as it is, for whoever investigates).
  absl::StatusOr<std::vector<v1::Job>> Recover();

  // Called once for every damaged row met (id, what is wrong); for the metric.
  void SetBadRowListener(std::function<void(int64_t id, const std::string& what)> listener);

  // This store's random id (32 hex digits), made when the file was created;
  // a new file is a new store even at the same path.
  const std::string& store_id() const { return store_id_; }
  // The highest id handed out so far (0 for none).
  absl::StatusOr<int64_t> LastId();
  // Makes every later Insert hand out ids above `id` (no-op if they already do).
  absl::Status ReserveIdsThrough(int64_t id);

  // Test hook: caps the database at its current size or `pages` pages, whichever
  // is more (PRAGMA max_page_count), so that growing it fails as on a full disk
  // (SQLITE_FULL); 0 lifts the cap.
  absl::Status LimitPagesForTesting(int64_t pages);

  // Removes the disk reserve (kDiskReserveBytes); true if there was one.
  bool ReleaseReserve();
  // Makes the reserve again when there is room for it and as much to spare.
  // False while it is missing and cannot be made: a new job is then refused
  // (Insert), so what remains of the disk is kept for running jobs' results.
  bool RestoreReserve();

 private:
  Store(sqlite3* db, std::string path);
  static absl::StatusOr<std::unique_ptr<Store>> OpenOnce(const std::string& path);

  // RESOURCE_EXHAUSTED from SQLite (a full disk) gets the data dir's figures.
  absl::Status Explain(absl::Status s) const;
  // Logs and reports a damaged row the first time it is met (takes mu_ held).
  void ReportBadRow(int64_t id, const std::string& what);

  const std::string path_;
  const std::string dir_;
  std::string store_id_;
  // One connection, used by one thread at a time.
  std::mutex mu_;
  sqlite3* const db_;
  // Prepared once per SQL text: compiling GetJob's and ListJobs' SELECT on
  // every call cost more than running it.
  StatementCache statements_;                                          // under mu_
  std::set<int64_t> reported_bad_rows_;                                // under mu_
  std::function<void(int64_t, const std::string&)> bad_row_listener_;  // under mu_
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_STORE_H_
