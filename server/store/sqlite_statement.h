// SQLite statements for the Store: one-off ones (finalized when dropped) and
// ones kept prepared per connection (reset when dropped). Compiling the SQL
// was ~15% of the daemon's CPU under load (docs/results/load.md): GetJob and
// ListJobs compiled their SELECT on every call.
#ifndef BENCHD_SERVER_STORE_SQLITE_STATEMENT_H_
#define BENCHD_SERVER_STORE_SQLITE_STATEMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace benchd::server {

// SQLITE_FULL (a write that found the disk full) is RESOURCE_EXHAUSTED;
// SQLITE_NOTADB / SQLITE_CORRUPT are DATA_LOSS; the rest INTERNAL.
absl::Status SqliteErrorFor(int code, std::string msg);
// The connection's last error, as "store: <op>: <SQLite's message>".
absl::Status SqliteError(sqlite3* db, absl::string_view op);

// A prepared statement in use. Bind errors are kept and reported by the next
// Step, so call sites stay flat. When dropped, a one-off statement is
// finalized and a cached one is reset, its bindings cleared, and handed back.
class Statement {
 public:
  // A one-off statement (schema steps, EXPLAIN, anything run once).
  static absl::StatusOr<Statement> Prepare(sqlite3* db, std::string op, const char* sql);

  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  void Bind(int i, int64_t v);
  void Bind(int i, const std::string& text);
  void BindBlob(int i, const std::string& bytes);

  // True with a row to read, false when done.
  absl::StatusOr<bool> Step();

  int64_t Int(int col);
  std::string Blob(int col);
  // The column's bytes, valid until the next Step (no copy).
  absl::string_view BlobView(int col);
  const std::string& op() const { return op_; }

 private:
  friend class StatementCache;
  Statement(sqlite3* db, std::string op, sqlite3_stmt* stmt, bool* in_use);
  void Check(int rc);

  sqlite3* db_;
  std::string op_;
  sqlite3_stmt* stmt_;
  bool* in_use_;  // the cache's flag for a cached statement; null for a one-off
  absl::Status status_;
};

// One connection's statements, prepared once per SQL text and kept until
// Clear (SQLITE_PREPARE_PERSISTENT). Not thread-safe: the Store's mutex
// guards it, as it guards the connection.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache() { Clear(); }

  // The statement for `sql`, ready to bind. A statement still in use (a second
  // Get for the same SQL before the first is dropped) is not shared: that
  // caller gets a one-off one.
  absl::StatusOr<Statement> Get(std::string op, absl::string_view sql);
  // Finalizes every statement; call before closing the connection. No
  // statement from Get may be alive.
  void Clear();
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    // Where Statement reports it is dropped; boxed so rehashing keeps it put.
    std::unique_ptr<bool> in_use = std::make_unique<bool>(false);
  };
  sqlite3* const db_;
  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_STORE_SQLITE_STATEMENT_H_
