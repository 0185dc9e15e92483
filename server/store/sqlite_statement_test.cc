#include "server/store/sqlite_statement.h"

#include <sqlite3.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

class StatementCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db_,
                           "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
                           "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    cache_ = std::make_unique<StatementCache>(db_);
  }
  void TearDown() override {
    cache_.reset();
    EXPECT_EQ(sqlite3_close(db_), SQLITE_OK);  // BUSY if a statement was left unfinalized
  }

  sqlite3* db_ = nullptr;
  std::unique_ptr<StatementCache> cache_;
};

TEST_F(StatementCacheTest, OneStatementPerSqlResetBetweenUses) {
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<Statement> stmt = cache_->Get("read", "SELECT v FROM t WHERE id >= ?1");
    ASSERT_TRUE(stmt.ok()) << stmt.status();
    stmt->Bind(1, int64_t{2});
    // Only the first row is read: the next use must start over, not go on.
    ASSERT_TRUE(*stmt->Step());
    EXPECT_EQ(stmt->Blob(0), "b");
  }
  EXPECT_EQ(cache_->size(), 1u);
  // Every statement is back and reset: nothing holds a read open.
  sqlite3_stmt* kept = sqlite3_next_stmt(db_, nullptr);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(sqlite3_stmt_busy(kept), 0);
}

TEST_F(StatementCacheTest, BindingsAreClearedAfterUse) {
  {
    absl::StatusOr<Statement> stmt = cache_->Get("read", "SELECT count(*) FROM t WHERE v = ?1");
    ASSERT_TRUE(stmt.ok()) << stmt.status();
    stmt->Bind(1, std::string("a"));
    ASSERT_TRUE(*stmt->Step());
    EXPECT_EQ(stmt->Int(0), 1);
  }
  absl::StatusOr<Statement> stmt = cache_->Get("read", "SELECT count(*) FROM t WHERE v = ?1");
  ASSERT_TRUE(stmt.ok()) << stmt.status();
  ASSERT_TRUE(*stmt->Step());  // unbound: NULL, which matches nothing
  EXPECT_EQ(stmt->Int(0), 0);
}

TEST_F(StatementCacheTest, ANestedUseOfTheSameSqlGetsItsOwnStatement) {
  const char* sql = "SELECT id FROM t ORDER BY id";
  absl::StatusOr<Statement> outer = cache_->Get("outer", sql);
  ASSERT_TRUE(outer.ok()) << outer.status();
  ASSERT_TRUE(*outer->Step());
  EXPECT_EQ(outer->Int(0), 1);
  {
    absl::StatusOr<Statement> inner = cache_->Get("inner", sql);
    ASSERT_TRUE(inner.ok()) << inner.status();
    int rows = 0;
    while (*inner->Step()) ++rows;
    EXPECT_EQ(rows, 3);
  }
  ASSERT_TRUE(*outer->Step());  // the outer statement was not disturbed
  EXPECT_EQ(outer->Int(0), 2);
  EXPECT_EQ(cache_->size(), 1u);
}

TEST_F(StatementCacheTest, BadSqlNamesTheOperation) {
  absl::StatusOr<Statement> stmt = cache_->Get("list jobs", "SELECT nope FROM t");
  ASSERT_FALSE(stmt.ok());
  EXPECT_EQ(stmt.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(stmt.status().message()), HasSubstr("store: list jobs: "));
  EXPECT_THAT(std::string(stmt.status().message()), HasSubstr("nope"));
  EXPECT_EQ(cache_->size(), 0u);
}

TEST_F(StatementCacheTest, SchemaChangesAreFollowed) {
  {
    absl::StatusOr<Statement> stmt = cache_->Get("read", "SELECT * FROM t WHERE id = 1");
    ASSERT_TRUE(stmt.ok()) << stmt.status();
    ASSERT_TRUE(*stmt->Step());
  }
  ASSERT_EQ(
      sqlite3_exec(db_, "ALTER TABLE t ADD COLUMN w INTEGER DEFAULT 7", nullptr, nullptr, nullptr),
      SQLITE_OK);
  absl::StatusOr<Statement> stmt = cache_->Get("read", "SELECT * FROM t WHERE id = 1");
  ASSERT_TRUE(stmt.ok()) << stmt.status();
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->Int(2), 7);  // the kept statement was compiled again for the new column
}

TEST_F(StatementCacheTest, OneOffStatementsAreNotKept) {
  absl::StatusOr<Statement> stmt = Statement::Prepare(db_, "once", "SELECT 1");
  ASSERT_TRUE(stmt.ok()) << stmt.status();
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(cache_->size(), 0u);
}

}  // namespace
}  // namespace benchd::server
