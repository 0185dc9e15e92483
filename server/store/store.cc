#include "server/store/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_id.h"
#include "common/job_spec.h"
#include "server/core/job_state.h"
#include "server/core/timestamp.h"
#include "server/store/disk_space.h"
#include "server/store/sqlite_statement.h"

namespace benchd::server {
namespace {

// Bump with a new step in Migrate whenever the table layout changes.
constexpr int kSchemaVersion = 3;
// Long enough to ride out another process's checkpoint, short enough that a
// stuck lock surfaces as an error instead of a hung RPC.
constexpr int kBusyTimeoutMs = 5000;

// A store file that is not a database, or fails SQLite's quick_check: said
// plainly, with what to do. benchd never replaces or repairs one itself: the
// jobs in it may matter to someone.
absl::Status DamagedStoreError(const std::string& path, absl::string_view detail) {
  return absl::DataLossError(absl::StrCat(
      "store '", path, "' is damaged (", detail,
      "); benchd does not replace or repair a store: move it aside to start a new one (the "
      "job folders in artifacts/ are then adopted, ids continuing after them), or put back a "
      "copy"));
}

// SQLite's own check of the file's structure (quick: no index contents).
absl::Status QuickCheck(sqlite3* db, const std::string& path) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA quick_check(5)", -1, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return DamagedStoreError(path, sqlite3_errmsg(db));
  }
  std::vector<std::string> problems;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    if (text != nullptr && std::string_view(text) != "ok") problems.emplace_back(text);
  }
  if (rc != SQLITE_DONE) problems.emplace_back(sqlite3_errmsg(db));
  sqlite3_finalize(stmt);
  if (problems.empty()) return absl::OkStatus();
  return DamagedStoreError(path, absl::StrCat("quick_check: ", absl::StrJoin(problems, "; ")));
}

absl::Status Exec(sqlite3* db, const std::string& op, const std::string& sql) {
  char* err = nullptr;
  if (const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string msg = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return SqliteErrorFor(rc, absl::StrCat("store: ", op, ": ", msg));
  }
  return absl::OkStatus();
}

// BEGIN IMMEDIATE on Begin; rolled back on scope exit unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status Begin(const std::string& op) {
    absl::Status s = Exec(db_, op + ": begin", "BEGIN IMMEDIATE");
    open_ = s.ok();
    return s;
  }
  absl::Status Commit(const std::string& op) {
    absl::Status s = Exec(db_, op + ": commit", "COMMIT");
    if (s.ok()) open_ = false;
    return s;
  }

 private:
  sqlite3* db_;
  bool open_ = false;
};

int64_t UnixMillis(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

// Ids are what AUTOINCREMENT hands out: the one job id rule (common/job_id.h).
absl::StatusOr<int64_t> ParseId(const std::string& id) { return ParseJobId(id); }

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
}

// Every query that reads jobs selects these columns, in this order: id, job,
// kind, device, state, created_unix_ms (ReadJob, DamagedRow, ListSql).
constexpr char kGetSql[] =
    "SELECT id, job, kind, device, state, created_unix_ms FROM jobs WHERE id = ?1";
constexpr char kJobsInStateSql[] =
    "SELECT id, job, kind, device, state, created_unix_ms FROM jobs WHERE state = ?1 "
    "ORDER BY id ASC";

// One row read: the job, or (damaged) what its query columns still say.
struct Row {
  v1::Job job;
  bool damaged = false;
};

// A row whose record does not parse: the job as its query columns describe
// it, so that a listing still shows it (with why) and the others stay readable.
Row DamagedRow(Statement& stmt, int64_t id, size_t bytes) {
  Row row;
  row.damaged = true;
  v1::Job& job = row.job;
  job.set_id(absl::StrCat(id));
  const std::string kind = stmt.Blob(2);
  for (int k = v1::JobKind_MIN; k <= v1::JobKind_MAX; ++k) {
    if (v1::JobKind_IsValid(k) && JobKindName(static_cast<v1::JobKind>(k)) == kind) {
      job.set_kind(static_cast<v1::JobKind>(k));
    }
  }
  for (absl::string_view d : absl::StrSplit(stmt.Blob(3), ',', absl::SkipEmpty())) {
    job.add_devices(std::string(d));
  }
  const int64_t state = stmt.Int(4);
  job.set_state(v1::JobState_IsValid(static_cast<int>(state)) && state != 0
                    ? static_cast<v1::JobState>(state)
                    : v1::JOB_STATE_FAILED);
  const int64_t created_ms = stmt.Int(5);
  job.mutable_created()->set_seconds(created_ms / 1000);
  job.mutable_created()->set_nanos(static_cast<int32_t>(created_ms % 1000) * 1'000'000);
  job.set_error_code(static_cast<int>(absl::StatusCode::kDataLoss));
  job.set_error_message(absl::StrCat(
      "the stored record of job ", id, " is damaged (", bytes,
      " bytes that do not parse as a Job): its spec and result are lost; it is listed from its "
      "index columns and skipped by the scheduler"));
  return row;
}

// The row's proto, with the id from its key (the key is the authority).
Row ReadJob(Statement& stmt) {
  const int64_t id = stmt.Int(0);
  Row row;
  v1::Job& job = row.job;
  // Parsed from SQLite's buffer: no copy of the record.
  const absl::string_view bytes = stmt.BlobView(1);
  if (!job.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return DamagedRow(stmt, id, bytes.size());
  }
  job.set_id(absl::StrCat(id));
  // Records written before the kind was an enum and the devices a list.
  if (job.kind() == v1::JOB_KIND_UNSPECIFIED) job.set_kind(JobKindOf(job.spec()));
  if (job.devices_size() == 1 && job.devices(0).find(',') != std::string::npos) {
    const std::vector<std::string> devices = absl::StrSplit(job.devices(0), ',');
    job.clear_devices();
    for (const auto& d : devices) job.add_devices(d);
  }
  return row;
}

absl::StatusOr<std::vector<Row>> ReadAll(Statement& stmt) {
  std::vector<Row> rows;
  while (true) {
    absl::StatusOr<bool> more = stmt.Step();
    if (!more.ok()) return more.status();
    if (!*more) return rows;
    rows.push_back(ReadJob(stmt));
  }
}

// Writes the whole job and its query columns to row `id`; false if no such row.
absl::StatusOr<bool> WriteJob(StatementCache& statements, sqlite3* db, const std::string& op,
                              int64_t id, v1::Job job) {
  job.set_id(absl::StrCat(id));
  std::string bytes;
  if (!job.SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat("store: ", op, ": job ", id, " does not serialize"));
  }
  absl::StatusOr<Statement> stmt = statements.Get(
      op,
      "UPDATE jobs SET kind = ?1, device = ?2, state = ?3, created_unix_ms = ?4, job = ?5 "
      "WHERE id = ?6");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, JobKindName(job.kind()));
  stmt->Bind(2, absl::StrJoin(job.devices(), ","));
  stmt->Bind(3, static_cast<int64_t>(job.state()));
  stmt->Bind(4, UnixMillis(job.created()));
  stmt->BindBlob(5, bytes);
  stmt->Bind(6, id);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return sqlite3_changes(db) > 0;
}

absl::StatusOr<std::vector<Row>> JobsInState(StatementCache& statements, const std::string& op,
                                             v1::JobState state) {
  absl::StatusOr<Statement> stmt = statements.Get(op, kJobsInStateSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, static_cast<int64_t>(state));
  return ReadAll(*stmt);
}

absl::Status InsertJobDevice(StatementCache& statements, const std::string& op, int64_t id,
                             const std::string& device) {
  absl::StatusOr<Statement> stmt =
      statements.Get(op, "INSERT OR IGNORE INTO job_devices (device, job_id) VALUES (?1, ?2)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, device);
  stmt->Bind(2, id);
  return stmt->Step().status();
}

// The SELECT of one ListJobs page: ?1 state, ?2 kind, ?3 device, ?4 the id
// to start below, ?5 the page size (+1, to learn whether more follow).
std::string ListSql(const JobFilter& f, bool explain) {
  std::string sql = explain ? "EXPLAIN QUERY PLAN " : "";
  if (f.device.empty()) {
    absl::StrAppend(&sql,
                    "SELECT j.id, j.job, j.kind, j.device, j.state, j.created_unix_ms "
                    "FROM jobs j WHERE j.id < ?4");
  } else {
    // CROSS JOIN keeps job_devices outside: its key walks one device's jobs in id order.
    absl::StrAppend(&sql,
                    "SELECT j.id, j.job, j.kind, j.device, j.state, j.created_unix_ms "
                    "FROM job_devices d CROSS JOIN jobs j ON j.id = d.job_id "
                    "WHERE d.device = ?3 AND d.job_id < ?4");
  }
  if (f.state != v1::JOB_STATE_UNSPECIFIED) absl::StrAppend(&sql, " AND j.state = ?1");
  if (f.kind != v1::JOB_KIND_UNSPECIFIED) absl::StrAppend(&sql, " AND j.kind = ?2");
  absl::StrAppend(&sql, f.device.empty() ? " ORDER BY j.id DESC" : " ORDER BY d.job_id DESC",
                  " LIMIT ?5");
  return sql;
}

// ListSql for each combination of filters (state, kind, device), made once.
const std::string& CachedListSql(const JobFilter& f) {
  static const std::array<std::string, 8> kSql = [] {
    std::array<std::string, 8> sql;
    for (int shape = 0; shape < 8; ++shape) {
      JobFilter g;
      if (shape & 1) g.state = v1::JOB_STATE_QUEUED;
      if (shape & 2) g.kind = v1::JOB_KIND_BENCHMARK;
      if (shape & 4) g.device = "-";
      sql[shape] = ListSql(g, false);
    }
    return sql;
  }();
  return kSql[(f.state != v1::JOB_STATE_UNSPECIFIED ? 1 : 0) |
              (f.kind != v1::JOB_KIND_UNSPECIFIED ? 2 : 0) | (!f.device.empty() ? 4 : 0)];
}

// ListJobs' statement, bound; kept prepared, except EXPLAIN's (tests only).
absl::StatusOr<Statement> PrepareList(StatementCache& statements, sqlite3* db, const JobFilter& f,
                                      bool explain, int64_t before_id, int64_t limit) {
  absl::StatusOr<Statement> stmt = explain
                                       ? Statement::Prepare(db, "list", ListSql(f, true).c_str())
                                       : statements.Get("list", CachedListSql(f));
  if (!stmt.ok()) return stmt.status();
  if (f.state != v1::JOB_STATE_UNSPECIFIED) stmt->Bind(1, static_cast<int64_t>(f.state));
  if (f.kind != v1::JOB_KIND_UNSPECIFIED) stmt->Bind(2, JobKindName(f.kind));
  if (!f.device.empty()) stmt->Bind(3, f.device);
  stmt->Bind(4, before_id > 0 ? before_id : std::numeric_limits<int64_t>::max());
  stmt->Bind(5, limit);
  return stmt;
}

// Brings the schema from whatever version the file has to kSchemaVersion, in
// one transaction so a crash leaves either the old schema or the new one.
absl::Status Migrate(sqlite3* db, StatementCache& statements, const std::string& path) {
  const std::string op = absl::StrCat("open '", path, "': migrate");
  Transaction txn(db);
  if (absl::Status s = txn.Begin(op); !s.ok()) return s;
  absl::StatusOr<Statement> stmt = Statement::Prepare(db, op, "PRAGMA user_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  const int64_t version = *row ? stmt->Int(0) : 0;
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store: '", path, "' has schema version ", version, ", newer than this benchd's (",
        kSchemaVersion, "); run a newer benchd or use another data directory"));
  }
  if (version < 1) {
    absl::Status s = Exec(db, op,
                          "CREATE TABLE IF NOT EXISTS jobs ("
                          "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
                          "  kind TEXT NOT NULL,"
                          "  device TEXT NOT NULL,"
                          "  state INTEGER NOT NULL,"
                          "  created_unix_ms INTEGER NOT NULL,"
                          "  job BLOB NOT NULL);"
                          "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);");
    if (!s.ok()) return s;
  }
  if (version < 2) {
    // ListJobs filters by device (any of a collective's) and pages newest
    // first: one row per (device, job), keyed for that order. An index on a
    // column also orders by rowid (= id), so (state) serves "state = ? ORDER
    // BY id DESC" without sorting, and (kind, state) both filters together.
    absl::Status s = Exec(db, op,
                          "CREATE TABLE IF NOT EXISTS job_devices ("
                          "  device TEXT NOT NULL,"
                          "  job_id INTEGER NOT NULL,"
                          "  PRIMARY KEY (device, job_id)) WITHOUT ROWID;"
                          "CREATE INDEX IF NOT EXISTS jobs_kind ON jobs(kind);"
                          "CREATE INDEX IF NOT EXISTS jobs_kind_state ON jobs(kind, state);");
    if (!s.ok()) return s;
    // Jobs of version 1 name their devices joined by ','.
    absl::StatusOr<Statement> old = Statement::Prepare(db, op, "SELECT id, device FROM jobs");
    if (!old.ok()) return old.status();
    while (true) {
      absl::StatusOr<bool> row = old->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const int64_t id = old->Int(0);
      for (absl::string_view d : absl::StrSplit(old->Blob(1), ',', absl::SkipEmpty())) {
        if (absl::Status s = InsertJobDevice(statements, op, id, std::string(d)); !s.ok()) {
          return s;
        }
      }
    }
  }
  if (version < 3) {
    // The store's identity: artifacts/<job id>/ folders are claimed by it
    // (server/store/artifact_owner.h), so a new store is never served an old one's.
    absl::Status s = Exec(db, op,
                          "CREATE TABLE IF NOT EXISTS meta ("
                          "  key TEXT PRIMARY KEY,"
                          "  value TEXT NOT NULL) WITHOUT ROWID;"
                          "INSERT OR IGNORE INTO meta (key, value) "
                          "  VALUES ('store_id', lower(hex(randomblob(16))));");
    if (!s.ok()) return s;
  }
  // Later versions add `if (version < N)` steps here.
  if (version != kSchemaVersion) {
    absl::Status s = Exec(db, op, absl::StrCat("PRAGMA user_version = ", kSchemaVersion));
    if (!s.ok()) return s;
  }
  return txn.Commit(op);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenOnce(path);
  if (store.ok() || path.empty()) return store;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  absl::StatusOr<DiskSpace> space = GetDiskSpace(dir.empty() ? "." : dir);
  if (!space.ok() || space->free_bytes >= 2 * static_cast<uint64_t>(kDiskReserveBytes) ||
      unlink((path + ".reserve").c_str()) != 0) {
    return store;
  }
  fprintf(stderr,
          "benchd: store '%s': the data dir is full (%s): released the %lld MiB disk reserve to "
          "open the store; new jobs are refused until there is room for it again\n",
          path.c_str(), DescribeDiskSpace(dir.empty() ? "." : dir).c_str(),
          static_cast<long long>(kDiskReserveBytes >> 20));
  return OpenOnce(path);
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenOnce(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("store: empty database path");
  // SQLite says only "unable to open database file"; name the real cause.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return absl::NotFoundError(absl::StrCat("store: cannot open '", path, "': directory '",
                                            parent.string(), "' does not exist"));
  }

  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  // Owns the handle from here on, so every early return below closes it.
  std::unique_ptr<Store> store(new Store(db, path));
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat(
        "store: open '", path, "': ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  const std::string op = absl::StrCat("open '", path, "'");
  // WAL: readers (Watch, ListJobs) never wait for the writer. NORMAL sync is
  // safe from corruption in WAL mode; a power cut may lose the last commits.
  if (absl::Status s = Exec(db, op + ": journal_mode", "PRAGMA journal_mode = WAL"); !s.ok()) {
    if (absl::IsDataLoss(s)) return DamagedStoreError(path, sqlite3_errmsg(db));
    return store->Explain(s);
  }
  if (absl::Status s = QuickCheck(db, path); !s.ok()) return s;
  if (absl::Status s = Exec(db, op + ": synchronous", "PRAGMA synchronous = NORMAL"); !s.ok()) {
    return store->Explain(s);
  }
  if (absl::Status s = Migrate(db, store->statements_, path); !s.ok()) return store->Explain(s);
  absl::StatusOr<Statement> meta =
      Statement::Prepare(db, op + ": store id", "SELECT value FROM meta WHERE key = 'store_id'");
  if (!meta.ok()) return meta.status();
  absl::StatusOr<bool> row = meta->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::DataLossError(
        absl::StrCat("store: '", path, "' has no store id in its meta table"));
  }
  store->store_id_ = meta->Blob(0);
  store->RestoreReserve();
  return store;
}

Store::Store(sqlite3* db, std::string path)
    : path_(std::move(path)),
      dir_(std::filesystem::path(path_).parent_path().string()),
      db_(db),
      statements_(db) {}

Store::~Store() {
  statements_.Clear();  // a connection closes only once its statements are gone
  sqlite3_close_v2(db_);
}

absl::Status Store::Explain(absl::Status s) const {
  if (s.code() != absl::StatusCode::kResourceExhausted) return s;
  return DataDirFullError(dir_.empty() ? "." : dir_, std::string(s.message()));
}

void Store::SetBadRowListener(std::function<void(int64_t id, const std::string& what)> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  bad_row_listener_ = std::move(listener);
}

void Store::ReportBadRow(int64_t id, const std::string& what) {
  if (!reported_bad_rows_.insert(id).second) return;  // once per row and process
  fprintf(stderr, "benchd: store '%s': %s\n", path_.c_str(), what.c_str());
  if (bad_row_listener_) bad_row_listener_(id, what);
}

absl::StatusOr<std::string> Store::Insert(const v1::Job& job) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string op = "insert";
  // After a start on a full disk the reserve is gone: what is left of the
  // disk is for the results of jobs already taken, as on a running daemon.
  if (!RestoreReserve()) {
    return DataDirFullError(dir_.empty() ? "." : dir_,
                            "the disk reserve was spent opening the store and there is no room "
                            "to make it again");
  }
  // The proto must carry its own id, which exists only once the row does:
  // insert a placeholder row, then write the job into it, atomically.
  Transaction txn(db_);
  if (absl::Status s = txn.Begin(op); !s.ok()) return Explain(s);
  absl::StatusOr<Statement> stmt = statements_.Get(
      op,
      "INSERT INTO jobs (kind, device, state, created_unix_ms, job) VALUES ('', '', 0, 0, x'')");
  if (!stmt.ok()) return Explain(stmt.status());
  if (absl::StatusOr<bool> row = stmt->Step(); !row.ok()) return Explain(row.status());
  const int64_t id = sqlite3_last_insert_rowid(db_);
  absl::StatusOr<bool> written = WriteJob(statements_, db_, op, id, job);
  if (!written.ok()) return Explain(written.status());
  for (const std::string& d : job.devices()) {
    if (absl::Status s = InsertJobDevice(statements_, op, id, d); !s.ok()) return Explain(s);
  }
  if (absl::Status s = txn.Commit(op); !s.ok()) return Explain(s);
  return absl::StrCat(id);
}

absl::Status Store::Update(const v1::Job& job) {
  absl::StatusOr<int64_t> id = ParseId(job.id());
  if (!id.ok()) return id.status();
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<bool> written = WriteJob(statements_, db_, "update", *id, job);
  if (!written.ok()) return Explain(written.status());
  return *written ? absl::OkStatus() : NotFound(job.id());
}

absl::StatusOr<v1::Job> Store::Get(const std::string& id) {
  absl::StatusOr<int64_t> key = ParseId(id);
  if (!key.ok()) return key.status();
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Statement> stmt = statements_.Get("get", kGetSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, *key);
  absl::StatusOr<bool> more = stmt->Step();
  if (!more.ok()) return more.status();
  if (!*more) return NotFound(id);
  Row row = ReadJob(*stmt);
  if (row.damaged) ReportBadRow(*key, row.job.error_message());
  return std::move(row.job);
}

absl::StatusOr<JobPage> Store::List(const JobFilter& filter, int page_size, int64_t before_id) {
  if (page_size <= 0) page_size = kDefaultPageSize;
  std::lock_guard<std::mutex> lock(mu_);
  // Ids follow insertion order, unlike `created`, which follows the wall clock.
  absl::StatusOr<Statement> stmt =
      PrepareList(statements_, db_, filter, false, before_id, page_size + 1);
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<std::vector<Row>> rows = ReadAll(*stmt);
  if (!rows.ok()) return rows.status();
  JobPage page;
  for (Row& row : *rows) {
    if (row.damaged) ReportBadRow(*ParseId(row.job.id()), row.job.error_message());
    page.jobs.push_back(std::move(row.job));
  }
  if (page.jobs.size() > static_cast<size_t>(page_size)) {
    page.jobs.pop_back();
    page.next_before_id = *ParseId(page.jobs.back().id());
  }
  return page;
}

absl::StatusOr<std::vector<std::string>> Store::ListPlan(const JobFilter& filter) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Statement> stmt = PrepareList(statements_, db_, filter, true, 0, 1);
  if (!stmt.ok()) return stmt.status();
  std::vector<std::string> plan;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return plan;
    plan.push_back(stmt->Blob(3));  // id, parent, notused, detail
  }
}

absl::StatusOr<std::vector<v1::Job>> Store::Recover() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string op = "recover";
  Transaction txn(db_);
  if (absl::Status s = txn.Begin(op); !s.ok()) return Explain(s);
  // A damaged row cannot run again (its spec is gone): it leaves the queue
  // through its state column, its record kept as found.
  auto fail_damaged = [&](const Row& row) -> absl::Status {
    const int64_t id = *ParseId(row.job.id());
    ReportBadRow(id, row.job.error_message());
    absl::StatusOr<Statement> stmt =
        statements_.Get(op, "UPDATE jobs SET state = ?1 WHERE id = ?2");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, static_cast<int64_t>(v1::JOB_STATE_FAILED));
    stmt->Bind(2, id);
    return stmt->Step().status();
  };
  absl::StatusOr<std::vector<Row>> running = JobsInState(statements_, op, v1::JOB_STATE_RUNNING);
  if (!running.ok()) return running.status();
  const google::protobuf::Timestamp now = Now();
  for (Row& row : *running) {
    if (row.damaged) {
      if (absl::Status s = fail_damaged(row); !s.ok()) return Explain(s);
      continue;
    }
    v1::Job& job = row.job;
    job.set_state(v1::JOB_STATE_INTERRUPTED);
    *job.mutable_finished() = now;
    job.set_error_code(static_cast<int>(absl::StatusCode::kAborted));
    job.set_error_message("the daemon stopped while this job was running");
    absl::StatusOr<int64_t> id = ParseId(job.id());
    if (!id.ok()) return id.status();
    absl::StatusOr<bool> written = WriteJob(statements_, db_, op, *id, job);
    if (!written.ok()) return Explain(written.status());
  }
  absl::StatusOr<std::vector<Row>> queued = JobsInState(statements_, op, v1::JOB_STATE_QUEUED);
  if (!queued.ok()) return queued.status();
  std::vector<v1::Job> jobs;
  for (Row& row : *queued) {
    if (row.damaged) {
      if (absl::Status s = fail_damaged(row); !s.ok()) return Explain(s);
      continue;
    }
    jobs.push_back(std::move(row.job));
  }
  if (absl::Status s = txn.Commit(op); !s.ok()) return Explain(s);
  return jobs;
}

absl::StatusOr<int64_t> Store::LastId() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Statement> stmt = Statement::Prepare(
      db_, "last id",
      "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), "
      "COALESCE((SELECT max(id) FROM jobs), 0))");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->Int(0) : 0;
}

absl::Status Store::ReserveIdsThrough(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string op = absl::StrCat("reserve ids through ", id);
  Transaction txn(db_);
  if (absl::Status s = txn.Begin(op); !s.ok()) return Explain(s);
  // AUTOINCREMENT hands out max(seq, max(id)) + 1; sqlite_sequence may be
  // written (https://sqlite.org/autoinc.html), and has no row before the first insert.
  absl::StatusOr<Statement> update = Statement::Prepare(
      db_, op, "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'jobs'");
  if (!update.ok()) return update.status();
  update->Bind(1, id);
  if (absl::StatusOr<bool> r = update->Step(); !r.ok()) return Explain(r.status());
  if (sqlite3_changes(db_) == 0) {
    absl::StatusOr<Statement> insert =
        Statement::Prepare(db_, op, "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?1)");
    if (!insert.ok()) return insert.status();
    insert->Bind(1, id);
    if (absl::StatusOr<bool> r = insert->Step(); !r.ok()) return Explain(r.status());
  }
  return Explain(txn.Commit(op));
}

absl::Status Store::LimitPagesForTesting(int64_t pages) {
  std::lock_guard<std::mutex> lock(mu_);
  return Exec(db_, "max_page_count",
              absl::StrCat("PRAGMA max_page_count = ", pages > 0 ? pages : 2147483646));
}

bool Store::ReleaseReserve() { return unlink((path_ + ".reserve").c_str()) == 0; }

bool Store::RestoreReserve() {
  const std::string reserve = path_ + ".reserve";
  struct stat st;
  if (stat(reserve.c_str(), &st) == 0 && st.st_size >= kDiskReserveBytes) return true;
  absl::StatusOr<DiskSpace> space = GetDiskSpace(dir_.empty() ? "." : dir_);
  // Free space unknown: not a reason to refuse work.
  if (!space.ok()) return true;
  if (space->free_bytes < 2 * static_cast<uint64_t>(kDiskReserveBytes)) return false;
  const int fd = open(reserve.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return true;
  const bool made = posix_fallocate(fd, 0, kDiskReserveBytes) == 0;
  close(fd);
  if (!made) unlink(reserve.c_str());
  return true;  // the disk has room: a filesystem without fallocate still takes jobs
}

}  // namespace benchd::server
