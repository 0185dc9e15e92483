// A finished job the store refuses (a full disk, here a page cap) is kept,
// retried, and announced only once it is stored; bounded; flushed at stop.
#include "server/jobs/pending_results.h"

#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

class PendingResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "benchd-pending-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = Store::Open(dir_ + "/benchd.sqlite3");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    v1::Job running;
    running.set_state(v1::JOB_STATE_RUNNING);
    running.add_devices("cpu:0");
    id_ = *store_->Insert(running);
    finished_ = *store_->Get(id_);
    finished_.set_state(v1::JOB_STATE_SUCCEEDED);
    finished_.mutable_finished()->set_seconds(1700000000);
    // Larger than the free room of the store's pages.
    finished_.mutable_result()->mutable_benchmark()->set_device_name(std::string(200000, 'x'));
  }
  void TearDown() override {
    pending_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Make(PendingResults::Options options) {
    pending_ = std::make_unique<PendingResults>(
        store_.get(),
        [this](const v1::Job& job) {
          std::lock_guard<std::mutex> lock(mu_);
          announced_.push_back(job);
        },
        [this](size_t n) { count_ = n; }, options);
  }
  // The store refuses to grow, as on a full disk; Update then fails.
  absl::Status Fill() {
    EXPECT_TRUE(store_->LimitPagesForTesting(1).ok());
    return store_->Update(finished_);
  }
  std::vector<v1::Job> Announced() {
    std::lock_guard<std::mutex> lock(mu_);
    return announced_;
  }
  bool WaitAnnounced(size_t n) {
    for (int i = 0; i < 500 && Announced().size() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Announced().size() >= n;
  }

  static PendingResults::Options Fast() {
    PendingResults::Options o;
    o.first_retry = std::chrono::milliseconds(10);
    o.max_retry = std::chrono::milliseconds(40);
    return o;
  }

  std::string dir_, id_;
  std::unique_ptr<Store> store_;
  v1::Job finished_;
  std::mutex mu_;
  std::vector<v1::Job> announced_;
  std::atomic<size_t> count_{0};
  std::unique_ptr<PendingResults> pending_;
};

TEST_F(PendingResultsTest, RetriedUntilStoredAndAnnouncedOnlyThen) {
  Make(Fast());
  const absl::Status full = Fill();
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  pending_->Add(finished_, full);
  EXPECT_EQ(count_, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // several retries
  EXPECT_TRUE(Announced().empty());
  EXPECT_EQ(store_->Get(id_)->state(), v1::JOB_STATE_RUNNING);
  auto why = pending_->Reason(id_);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("ended succeeded"));
  EXPECT_THAT(*why, HasSubstr("is full"));

  ASSERT_TRUE(store_->LimitPagesForTesting(0).ok());  // space again
  ASSERT_TRUE(WaitAnnounced(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Announced().size(), 1u);  // once
  const v1::Job stored = *store_->Get(id_);
  EXPECT_EQ(stored.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(stored.result().benchmark().device_name().size(), 200000u);
  EXPECT_FALSE(pending_->Reason(id_).has_value());
  EXPECT_EQ(count_, 0u);
}

TEST_F(PendingResultsTest, PastItsBoundAJobIsKeptWithoutItsResultSayingSo) {
  PendingResults::Options o = Fast();
  o.max_bytes = 10000;
  Make(o);
  pending_->Add(finished_, Fill());
  ASSERT_TRUE(store_->LimitPagesForTesting(0).ok());
  ASSERT_TRUE(WaitAnnounced(1));
  const v1::Job stored = *store_->Get(id_);
  EXPECT_EQ(stored.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(stored.error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(stored.error_message(), HasSubstr("ended succeeded"));
  EXPECT_THAT(stored.error_message(), HasSubstr("the result was dropped"));
  EXPECT_FALSE(stored.has_result());
}

TEST_F(PendingResultsTest, AtStopAResultThatStillCannotBeStoredIsRecordedAsLost) {
  Make(Fast());
  pending_->Add(finished_, Fill());
  pending_->Flush();  // the page cap stays: even the reserve cannot help
  const v1::Job stored = *store_->Get(id_);
  EXPECT_EQ(stored.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(stored.error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_THAT(stored.error_message(), HasSubstr("the result is lost"));
  EXPECT_THAT(stored.error_message(), HasSubstr("is full"));
  ASSERT_EQ(Announced().size(), 1u);
  EXPECT_EQ(Announced()[0].state(), v1::JOB_STATE_FAILED);
}

TEST_F(PendingResultsTest, AtStopWhatCanBeStoredIsStoredWhole) {
  Make(Fast());
  pending_->Add(finished_, Fill());
  ASSERT_TRUE(store_->LimitPagesForTesting(0).ok());
  pending_->Flush();
  EXPECT_EQ(store_->Get(id_)->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Announced().size(), 1u);
}

}  // namespace
}  // namespace benchd::server
