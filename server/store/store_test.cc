#include "server/store/store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::IsSubstring;

// A fresh directory per test, removed with everything in it.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "benchd-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/benchd.sqlite3";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::unique_ptr<Store> OpenStore() {
    auto store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  static v1::Job MakeJob(v1::JobState state, const std::string& device = "cuda:0") {
    v1::Job job;
    job.set_state(state);
    job.set_kind(v1::JOB_KIND_BENCHMARK);
    job.add_devices(device);
    job.mutable_spec()->set_device(device);
    job.mutable_spec()->mutable_benchmark()->mutable_model()->set_preset("tiny");
    job.mutable_created()->set_seconds(1700000000);
    job.mutable_created()->set_nanos(123000000);
    return job;
  }

  std::string dir_;
  std::string path_;
};

// The first page of jobs in `state`, as the older List(limit, state) answered.
absl::StatusOr<std::vector<v1::Job>> ListJobs(Store& store, int limit, v1::JobState state) {
  JobFilter filter;
  filter.state = state;
  auto page = store.List(filter, limit);
  if (!page.ok()) return page.status();
  return page->jobs;
}

std::vector<std::string> Ids(const std::vector<v1::Job>& jobs) {
  std::vector<std::string> ids;
  for (const auto& j : jobs) ids.push_back(j.id());
  return ids;
}

// A store whose pages are damaged is refused at open with what to do.
TEST_F(StoreTest, ADamagedStoreIsRefusedAtOpen) {
  {
    auto store = OpenStore();
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(store->Insert(MakeJob(v1::JOB_STATE_QUEUED)).ok());
  }
  // Scribble over the middle of the file (past the header), as a bad disk would.
  const auto size = std::filesystem::file_size(path_);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string junk(8192, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto damaged = Store::Open(path_);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss) << damaged.status();
  EXPECT_THAT(std::string(damaged.status().message()), ::testing::HasSubstr("is damaged ("));
}

TEST_F(StoreTest, InsertGetRoundTripWithResult) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  v1::Job job = MakeJob(v1::JOB_STATE_SUCCEEDED);
  job.set_id("ignored");
  v1::BenchmarkResult* r = job.mutable_result()->mutable_benchmark();
  r->set_parameter_count(259392);
  r->mutable_step()->set_median(0.0125);
  v1::StepTiming* t = r->add_steps();
  t->set_index(0);
  t->set_warmup(true);
  t->set_step_seconds(0.5);
  r->set_device_name("NVIDIA H100 80GB HBM3");

  auto id = store->Insert(job);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "1");
  auto got = store->Get(*id);
  ASSERT_TRUE(got.ok()) << got.status();
  job.set_id(*id);
  EXPECT_EQ(got->SerializeAsString(), job.SerializeAsString()) << got->DebugString();
  EXPECT_EQ(got->result().benchmark().steps(0).step_seconds(), 0.5);
}

TEST_F(StoreTest, IdsIncreaseAndAreNeverReused) {
  std::string last;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "1");
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "2");
    last = *store->Insert(MakeJob(v1::JOB_STATE_QUEUED));
    EXPECT_EQ(last, "3");
  }
  {
    auto store = OpenStore();  // same file again
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "4");
  }
  // Even with the newest row deleted behind the store's back, AUTOINCREMENT
  // never hands its id out again.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM jobs WHERE id = 4", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "5");
}

TEST_F(StoreTest, Update) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto id = store->Insert(MakeJob(v1::JOB_STATE_QUEUED));
  ASSERT_TRUE(id.ok());
  v1::Job job = *store->Get(*id);
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error_code(8);
  job.set_error_message("CUDA out of memory");
  ASSERT_TRUE(store->Update(job).ok());
  v1::Job got = *store->Get(*id);
  EXPECT_EQ(got.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(got.error_code(), 8);
  EXPECT_EQ(got.error_message(), "CUDA out of memory");
  // The state column follows the proto.
  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_FAILED)), std::vector<std::string>{*id});
  EXPECT_TRUE(ListJobs(*store, 0, v1::JOB_STATE_QUEUED)->empty());

  job.set_id("99");
  EXPECT_EQ(store->Update(job).code(), absl::StatusCode::kNotFound);
  job.set_id("x");
  EXPECT_EQ(store->Update(job).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ListOrderLimitAndStateFilter) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const v1::JobState states[] = {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_QUEUED,
                                 v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED,
                                 v1::JOB_STATE_SUCCEEDED};
  for (v1::JobState s : states) ASSERT_TRUE(store->Insert(MakeJob(s)).ok());

  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_UNSPECIFIED)),
            (std::vector<std::string>{"5", "4", "3", "2", "1"}));
  EXPECT_EQ(Ids(*ListJobs(*store, 2, v1::JOB_STATE_UNSPECIFIED)),
            (std::vector<std::string>{"5", "4"}));
  EXPECT_EQ(Ids(*ListJobs(*store, -1, v1::JOB_STATE_UNSPECIFIED)).size(), 5u);
  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_SUCCEEDED)),
            (std::vector<std::string>{"5", "3", "1"}));
  EXPECT_EQ(Ids(*ListJobs(*store, 1, v1::JOB_STATE_SUCCEEDED)), (std::vector<std::string>{"5"}));
  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_QUEUED)), (std::vector<std::string>{"2"}));
  EXPECT_TRUE(ListJobs(*store, 0, v1::JOB_STATE_RUNNING)->empty());
}

TEST_F(StoreTest, DefaultListLimitIsFifty) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(store->Insert(MakeJob(v1::JOB_STATE_SUCCEEDED)).ok());
  auto jobs = ListJobs(*store, 0, v1::JOB_STATE_UNSPECIFIED);
  ASSERT_EQ(jobs->size(), 50u);
  EXPECT_EQ(jobs->front().id(), "60");
  EXPECT_EQ(jobs->back().id(), "11");
  EXPECT_EQ(ListJobs(*store, 100, v1::JOB_STATE_UNSPECIFIED)->size(), 60u);
}

TEST_F(StoreTest, GetUnknownAndMalformedIds) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Insert(MakeJob(v1::JOB_STATE_QUEUED)).ok());

  auto missing = store->Get("42");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "job '42' not found");

  for (const std::string bad : {"", "0", "-1", "abc", "1.5", " 1", "1 ", "+1", "01", "0x1",
                                "99999999999999999999", "1; DROP TABLE jobs"}) {
    auto got = store->Get(bad);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_PRED_FORMAT2(IsSubstring, absl::StrCat("'", bad, "'"),
                        std::string(got.status().message()));
  }
  EXPECT_TRUE(store->Get("1").ok());  // the table survived
}

TEST_F(StoreTest, EverythingSurvivesReopen) {
  std::vector<v1::Job> before;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (v1::JobState s : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED}) {
      v1::Job job = MakeJob(s, absl::StrCat("cuda:", static_cast<int>(s)));
      job.mutable_result()->mutable_benchmark()->set_tokens_per_second(1000.0 *
                                                                       static_cast<int>(s));
      ASSERT_TRUE(store->Insert(job).ok());
    }
    before = *ListJobs(*store, 0, v1::JOB_STATE_UNSPECIFIED);
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto after = ListJobs(*store, 0, v1::JOB_STATE_UNSPECIFIED);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ((*after)[i].SerializeAsString(), before[i].SerializeAsString());
  }
}

TEST_F(StoreTest, Recover) {
  std::string queued1, running, succeeded, queued2;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    queued1 = *store->Insert(MakeJob(v1::JOB_STATE_QUEUED));
    running = *store->Insert(MakeJob(v1::JOB_STATE_RUNNING));
    succeeded = *store->Insert(MakeJob(v1::JOB_STATE_SUCCEEDED));
    queued2 = *store->Insert(MakeJob(v1::JOB_STATE_QUEUED, "cuda:1"));
  }
  auto store = OpenStore();  // as after a daemon restart
  ASSERT_NE(store, nullptr);
  const v1::Job succeeded_before = *store->Get(succeeded);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();

  auto queued = store->Recover();
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(Ids(*queued), (std::vector<std::string>{queued1, queued2}));
  EXPECT_EQ((*queued)[1].devices(0), "cuda:1");

  v1::Job r = *store->Get(running);
  EXPECT_EQ(r.state(), v1::JOB_STATE_INTERRUPTED);
  EXPECT_EQ(r.error_code(), 10);
  EXPECT_EQ(r.error_message(), "the daemon stopped while this job was running");
  EXPECT_NEAR(r.finished().seconds(), now, 5);
  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_INTERRUPTED)),
            std::vector<std::string>{running});
  EXPECT_TRUE(ListJobs(*store, 0, v1::JOB_STATE_RUNNING)->empty());

  EXPECT_EQ(store->Get(succeeded)->SerializeAsString(), succeeded_before.SerializeAsString());
  EXPECT_EQ(store->Get(queued1)->state(), v1::JOB_STATE_QUEUED);  // left for the scheduler

  // A second Recover finds nothing running any more and the same queue.
  EXPECT_EQ(Ids(*store->Recover()), (std::vector<std::string>{queued1, queued2}));
}

TEST_F(StoreTest, MissingDirectoryIsAClearError) {
  const std::string path = dir_ + "/no/such/dir/benchd.sqlite3";
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_PRED_FORMAT2(IsSubstring, dir_ + "/no/such/dir", std::string(store.status().message()));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));
}

TEST_F(StoreTest, NotADatabaseIsAnError) {
  {
    FILE* f = fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("this is not an SQLite database, just some text that is long enough........", f);
    fclose(f);
  }
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_PRED_FORMAT2(IsSubstring, path_, std::string(store.status().message()));
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::HasSubstr("is damaged (file is not a database); benchd does not "
                                   "replace or repair a store: move it aside"));
}

TEST_F(StoreTest, NewerSchemaRefused) {
  { ASSERT_NE(OpenStore(), nullptr); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, ConcurrentInsertsAllLand) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto id = store->Insert(MakeJob(v1::JOB_STATE_QUEUED, absl::StrCat("cuda:", t)));
        ASSERT_TRUE(id.ok()) << id.status();
        ids[t].push_back(*id);
        ASSERT_TRUE(store->Get(*id).ok());  // reads interleave with writes
      }
    });
  }
  for (auto& th : threads) th.join();

  std::set<std::string> all;
  for (const auto& v : ids) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  auto listed = ListJobs(*store, 1000, v1::JOB_STATE_UNSPECIFIED);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(kThreads * kPerThread));
  for (const auto& j : *listed) EXPECT_EQ(store->Get(j.id())->id(), j.id());
}

TEST_F(StoreTest, PagesFollowOneAnotherAndFiltersCombine) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // 1..9: cpu:0 / cpu:1 alternate; 3, 6, 9 are collectives on both; 4 and 8 failed.
  for (int i = 1; i <= 9; ++i) {
    v1::Job job = MakeJob(i % 4 == 0 ? v1::JOB_STATE_FAILED : v1::JOB_STATE_SUCCEEDED,
                          i % 2 ? "cpu:0" : "cpu:1");
    if (i % 3 == 0) {
      job.set_kind(v1::JOB_KIND_COLLECTIVE);
      job.clear_devices();
      job.add_devices("cpu:0");
      job.add_devices("cpu:1");
    }
    ASSERT_TRUE(store->Insert(job).ok());
  }
  auto page = [&](const JobFilter& f, int size, int64_t before) {
    auto p = store->List(f, size, before);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : JobPage{};
  };
  JobFilter all;
  JobPage first = page(all, 4, 0);
  EXPECT_EQ(Ids(first.jobs), (std::vector<std::string>{"9", "8", "7", "6"}));
  EXPECT_EQ(first.next_before_id, 6);
  JobPage second = page(all, 4, first.next_before_id);
  EXPECT_EQ(Ids(second.jobs), (std::vector<std::string>{"5", "4", "3", "2"}));
  JobPage last = page(all, 4, second.next_before_id);
  EXPECT_EQ(Ids(last.jobs), (std::vector<std::string>{"1"}));
  EXPECT_EQ(last.next_before_id, 0);
  // A page that ends exactly at the last job says there is no next one.
  EXPECT_EQ(page(all, 9, 0).next_before_id, 0);

  JobFilter cpu1;
  cpu1.device = "cpu:1";  // 2, 4, 8 alone and every collective
  EXPECT_EQ(Ids(page(cpu1, 50, 0).jobs), (std::vector<std::string>{"9", "8", "6", "4", "3", "2"}));
  EXPECT_EQ(Ids(page(cpu1, 2, 8).jobs), (std::vector<std::string>{"6", "4"}));
  JobFilter collectives;
  collectives.kind = v1::JOB_KIND_COLLECTIVE;
  EXPECT_EQ(Ids(page(collectives, 50, 0).jobs), (std::vector<std::string>{"9", "6", "3"}));
  JobFilter failed_on_cpu1;
  failed_on_cpu1.device = "cpu:1";
  failed_on_cpu1.state = v1::JOB_STATE_FAILED;
  EXPECT_EQ(Ids(page(failed_on_cpu1, 50, 0).jobs), (std::vector<std::string>{"8", "4"}));
  JobFilter failed_collectives;
  failed_collectives.state = v1::JOB_STATE_FAILED;
  failed_collectives.kind = v1::JOB_KIND_COLLECTIVE;
  EXPECT_TRUE(page(failed_collectives, 50, 0).jobs.empty());
  JobFilter nowhere;
  nowhere.device = "cuda:7";
  EXPECT_TRUE(page(nowhere, 50, 0).jobs.empty());
  // The collective's devices come back as the list they were stored as.
  EXPECT_EQ(store->Get("9")->devices_size(), 2);
}

// Every filter, alone and together, reads an index in id order: no full scan
// of the jobs and no sort, so a page costs the same at 100,000 jobs as at 10
// (bench/list_jobs.py times it).
TEST_F(StoreTest, EveryFilterIsServedByAnIndexWithoutSorting) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int state : {0, 1}) {
    for (int kind : {0, 1}) {
      for (int device : {0, 1}) {
        JobFilter f;
        if (state) f.state = v1::JOB_STATE_FAILED;
        if (kind) f.kind = v1::JOB_KIND_PROFILE;
        if (device) f.device = "cuda:0";
        auto plan = store->ListPlan(f);
        ASSERT_TRUE(plan.ok()) << plan.status();
        const std::string all = absl::StrJoin(*plan, " | ");
        SCOPED_TRACE(all);
        EXPECT_EQ(all.find("TEMP B-TREE"), std::string::npos);
        if (device) {
          // One device's jobs in id order, each looked up by its key.
          EXPECT_NE(all.find("SEARCH d USING PRIMARY KEY (device=? AND job_id<?)"),
                    std::string::npos);
        } else if (!state && !kind) {
          EXPECT_NE(all.find("SEARCH j USING INTEGER PRIMARY KEY (rowid<?)"), std::string::npos);
        } else {
          EXPECT_NE(all.find("USING INDEX jobs_"), std::string::npos);
        }
      }
    }
  }
}

}  // namespace
}  // namespace benchd::server

namespace benchd::server {
namespace {

// Overwrites job `id`'s record with bytes that do not parse as a Job.
void Damage(const std::string& path, const std::string& id) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql = absl::StrCat("UPDATE jobs SET job = x'ffffffff0a' WHERE id = ", id);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST_F(StoreTest, ADamagedRowIsListedWithAnErrorAndTheOthersStayReadable) {
  std::string good1, bad, good2;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    v1::Job done = MakeJob(v1::JOB_STATE_SUCCEEDED, "cpu:0");
    done.mutable_result()->mutable_benchmark()->set_tokens_per_second(123);
    good1 = *store->Insert(done);
    bad = *store->Insert(MakeJob(v1::JOB_STATE_SUCCEEDED, "cpu:0"));
    good2 = *store->Insert(done);
  }
  Damage(path_, bad);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> reported;
  store->SetBadRowListener([&](int64_t id, const std::string&) { reported.push_back(id); });

  for (int round = 0; round < 2; ++round) {
    auto page = store->List(JobFilter(), 0);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(Ids(page->jobs), (std::vector<std::string>{good2, bad, good1}));
    EXPECT_EQ(page->jobs[0].result().benchmark().tokens_per_second(), 123);
    EXPECT_EQ(page->jobs[2].result().benchmark().tokens_per_second(), 123);
    const v1::Job& damaged = page->jobs[1];
    EXPECT_EQ(damaged.error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
    EXPECT_PRED_FORMAT2(IsSubstring, absl::StrCat("the stored record of job ", bad, " is damaged"),
                        damaged.error_message());
    // What its index columns still say.
    EXPECT_EQ(damaged.state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(damaged.kind(), v1::JOB_KIND_BENCHMARK);
    EXPECT_EQ(damaged.devices().size(), 1);
    EXPECT_EQ(damaged.devices(0), "cpu:0");
    EXPECT_EQ(damaged.created().seconds(), 1700000000);
  }
  // Filters still work around it; Get answers it too.
  JobFilter by_device;
  by_device.device = "cpu:0";
  EXPECT_EQ(store->List(by_device, 0)->jobs.size(), 3u);
  auto got = store->Get(bad);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->error_code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_TRUE(store->Get(good1)->has_result());
  // Reported once however often it is read.
  EXPECT_EQ(reported, std::vector<int64_t>{std::stoll(bad)});
}

TEST_F(StoreTest, ADamagedQueuedOrRunningRowIsFailedNotTakenUp) {
  std::string queued_bad, running_bad, queued_good;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    queued_bad = *store->Insert(MakeJob(v1::JOB_STATE_QUEUED));
    running_bad = *store->Insert(MakeJob(v1::JOB_STATE_RUNNING));
    queued_good = *store->Insert(MakeJob(v1::JOB_STATE_QUEUED));
  }
  Damage(path_, queued_bad);
  Damage(path_, running_bad);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int reported = 0;
  store->SetBadRowListener([&](int64_t, const std::string&) { ++reported; });
  auto queued = store->Recover();
  ASSERT_TRUE(queued.ok()) << queued.status();  // the daemon starts
  EXPECT_EQ(Ids(*queued), std::vector<std::string>{queued_good});
  EXPECT_EQ(reported, 2);
  for (const std::string& id : {queued_bad, running_bad}) {
    const v1::Job job = *store->Get(id);
    EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED) << id;
    EXPECT_PRED_FORMAT2(IsSubstring, "is damaged", job.error_message());
  }
  EXPECT_EQ(Ids(*ListJobs(*store, 0, v1::JOB_STATE_FAILED)),
            (std::vector<std::string>{running_bad, queued_bad}));
  EXPECT_EQ(Ids(*store->Recover()), std::vector<std::string>{queued_good});
}

TEST_F(StoreTest, AFullStoreIsResourceExhaustedNamingTheDataDirAndReadsGoOn) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string first = *store->Insert(MakeJob(v1::JOB_STATE_RUNNING));
  ASSERT_TRUE(store->LimitPagesForTesting(1).ok());  // = its current size
  v1::Job big = *store->Get(first);
  big.set_state(v1::JOB_STATE_SUCCEEDED);
  big.mutable_result()->mutable_benchmark()->set_device_name(std::string(200000, 'x'));
  absl::Status s = store->Update(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_PRED_FORMAT2(IsSubstring, absl::StrCat("the data dir '", dir_, "' ("),
                      std::string(s.message()));
  EXPECT_PRED_FORMAT2(IsSubstring, " free of ", std::string(s.message()));
  absl::StatusOr<std::string> inserted = std::string();
  for (int i = 0; i < 1000 && inserted.ok(); ++i) inserted = store->Insert(big);
  EXPECT_EQ(inserted.status().code(), absl::StatusCode::kResourceExhausted);
  // Reads keep working.
  EXPECT_EQ(store->Get(first)->state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(store->List(JobFilter(), 0).ok());
  // Space again: the same write goes through.
  ASSERT_TRUE(store->LimitPagesForTesting(0).ok());
  EXPECT_TRUE(store->Update(big).ok());
  EXPECT_EQ(store->Get(first)->state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(StoreTest, EachStoreHasItsOwnIdAndIdsCanBeReservedAhead) {
  std::string id;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    id = store->store_id();
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(*store->LastId(), 0);
    ASSERT_TRUE(store->ReserveIdsThrough(41).ok());  // before any insert
    EXPECT_EQ(*store->LastId(), 41);
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "42");
    ASSERT_TRUE(store->ReserveIdsThrough(10).ok());  // never lowers
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "43");
    ASSERT_TRUE(store->ReserveIdsThrough(99).ok());
    EXPECT_EQ(*store->Insert(MakeJob(v1::JOB_STATE_QUEUED)), "100");
  }
  {
    auto store = OpenStore();  // the same file: the same store
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->store_id(), id);
    EXPECT_EQ(*store->LastId(), 100);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
  auto store = OpenStore();  // a new file: a new store
  ASSERT_NE(store, nullptr);
  EXPECT_NE(store->store_id(), id);
  EXPECT_EQ(*store->LastId(), 0);
}

}  // namespace
}  // namespace benchd::server
