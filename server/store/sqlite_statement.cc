#include "server/store/sqlite_statement.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace benchd::server {

absl::Status SqliteErrorFor(int code, std::string msg) {
  if ((code & 0xff) == SQLITE_FULL) return absl::ResourceExhaustedError(std::move(msg));
  if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT) {
    return absl::DataLossError(std::move(msg));
  }
  return absl::InternalError(std::move(msg));
}

absl::Status SqliteError(sqlite3* db, absl::string_view op) {
  return SqliteErrorFor(sqlite3_extended_errcode(db),
                        absl::StrCat("store: ", op, ": ", sqlite3_errmsg(db)));
}

absl::StatusOr<Statement> Statement::Prepare(sqlite3* db, std::string op, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteError(db, op);
  }
  return Statement(db, std::move(op), stmt, nullptr);
}

Statement::Statement(sqlite3* db, std::string op, sqlite3_stmt* stmt, bool* in_use)
    : db_(db), op_(std::move(op)), stmt_(stmt), in_use_(in_use) {}

Statement::Statement(Statement&& o) noexcept
    : db_(o.db_),
      op_(std::move(o.op_)),
      stmt_(std::exchange(o.stmt_, nullptr)),
      in_use_(std::exchange(o.in_use_, nullptr)),
      status_(std::move(o.status_)) {}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (in_use_ == nullptr) {
    sqlite3_finalize(stmt_);
    return;
  }
  // Reset ends the statement's read transaction, so a kept statement never
  // holds the WAL back; the bindings go so no blob outlives its call.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  *in_use_ = false;
}

void Statement::Bind(int i, int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); }

void Statement::Bind(int i, const std::string& text) {
  Check(sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT));
}

void Statement::BindBlob(int i, const std::string& bytes) {
  Check(
      sqlite3_bind_blob(stmt_, i, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT));
}

absl::StatusOr<bool> Statement::Step() {
  if (!status_.ok()) return status_;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, op_);
}

int64_t Statement::Int(int col) { return sqlite3_column_int64(stmt_, col); }

std::string Statement::Blob(int col) { return std::string(BlobView(col)); }

absl::string_view Statement::BlobView(int col) {
  const void* p = sqlite3_column_blob(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? absl::string_view() : absl::string_view(static_cast<const char*>(p), n);
}

void Statement::Check(int rc) {
  if (rc != SQLITE_OK && status_.ok()) status_ = SqliteError(db_, op_);
}

absl::StatusOr<Statement> StatementCache::Get(std::string op, absl::string_view sql) {
  auto it = entries_.find(sql);
  if (it == entries_.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &stmt, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteError(db_, op);
    }
    it = entries_.emplace(std::string(sql), Entry{}).first;
    it->second.stmt = stmt;
  }
  Entry& e = it->second;
  if (*e.in_use) {
    // Rare (a nested use of the same SQL): compile a one-off rather than share.
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteError(db_, op);
    }
    return Statement(db_, std::move(op), stmt, nullptr);
  }
  *e.in_use = true;
  return Statement(db_, std::move(op), e.stmt, e.in_use.get());
}

void StatementCache::Clear() {
  for (auto& [sql, e] : entries_) sqlite3_finalize(e.stmt);
  entries_.clear();
}

}  // namespace benchd::server
