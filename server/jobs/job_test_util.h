// Test-only: a JobManager over a real Store (SQLite in a temporary
// directory), a real EventHub and FakeWorkers, and ways to wait for a job's
// events without sleeping.
#ifndef BENCHD_SERVER_JOBS_JOB_TEST_UTIL_H_
#define BENCHD_SERVER_JOBS_JOB_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/jobs/event_hub.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/job_manager.h"
#include "server/store/store.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {

class JobManagerFixture : public ::testing::Test {
 protected:
  explicit JobManagerFixture(std::vector<std::string> devices)
      : devices_(devices), workers_(std::move(devices)) {}

  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "benchd-jobs-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto store = Store::Open(dir_ + "/benchd.sqlite3");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    jobs_.reset();  // stops the dispatchers before the fakes go
    groups_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The job manager, started; with collectives on a GroupRegistry over the
  // same fake workers (whose exits break its groups, as the supervisor's do).
  void StartJobs(bool collectives = false, std::map<std::string, double> progress_timeouts = {}) {
    JobManagerOptions options;
    options.progress_timeouts = std::move(progress_timeouts);
    options.gpu_sharing = gpu_sharing_;
    if (collectives) {
      groups_ = std::make_unique<GroupRegistry>(&workers_, nullptr, devices_);
      workers_.SetExitListener(
          [this](const std::string& device, uint64_t generation, pid_t pid,
                 const std::string& how) { groups_->OnWorkerExit(device, generation, pid, how); });
      options.groups = groups_.get();
      options.artifacts_dir = dir_ + "/artifacts";
    }
    jobs_ = std::make_unique<JobManager>(store_.get(), &hub_, &workers_, nullptr, devices_,
                                         std::move(options));
    ASSERT_TRUE(jobs_->Start().ok());
  }

  static v1::JobSpec Benchmark(const std::string& device) {
    v1::JobSpec spec;
    spec.set_device(device);
    spec.mutable_benchmark()->mutable_model()->set_preset("tiny");
    return spec;
  }

  std::string Submit(const v1::JobSpec& spec) {
    auto job = jobs_->Submit(spec);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  v1::Job Get(const std::string& id) {
    auto job = store_->Get(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job();
  }

  // Waits (on the hub, no polling) for the job's terminal event; the store
  // holds the final job before that event goes out.
  v1::Job WaitFinal(const std::string& id) {
    Gate ended;
    auto sub = hub_.Subscribe(id, [&](const v1::JobEvent& e) {
      if (IsTerminal(e)) ended.Open();
    });
    for (const auto& e : sub.history) {
      if (IsTerminal(e)) ended.Open();
    }
    const bool ok = sub.id == 0 || ended.Wait();
    if (sub.id != 0) hub_.Unsubscribe(id, sub.id);
    EXPECT_TRUE(ok) << "job " << id << " did not end; it is " << v1::JobState_Name(Get(id).state());
    return Get(id);
  }

  // Every event published for the job so far.
  std::vector<v1::JobEvent> History(const std::string& id) {
    auto sub = hub_.Subscribe(id, [](const v1::JobEvent&) {});
    if (sub.id != 0) hub_.Unsubscribe(id, sub.id);
    return sub.history;
  }

  const std::vector<std::string> devices_;
  std::string dir_;
  std::unique_ptr<Store> store_;
  EventHub hub_;
  FakeWorkers workers_;
  std::unique_ptr<GroupRegistry> groups_;
  const GpuSharing* gpu_sharing_ = nullptr;  // set before StartJobs: --gpu-sharing when-idle
  std::unique_ptr<JobManager> jobs_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_JOB_TEST_UTIL_H_
