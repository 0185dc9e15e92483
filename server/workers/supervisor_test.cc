#include "server/workers/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "benchd/internal/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

int StatusOfChild(void (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(DescribeExitTest, SaysCodeOrSignal) {
  EXPECT_EQ(DescribeExit(StatusOfChild([] { _exit(3); })), "exited with code 3");
  const std::string killed = DescribeExit(StatusOfChild([] { raise(SIGKILL); }));
  EXPECT_EQ(killed, "killed by signal 9 (SIGKILL: Killed)");
}

TEST(WorkerThreadShareTest, AnEqualShareOfTheCpusAtLeastOne) {
  EXPECT_EQ(WorkerThreadShare(64, 4), 16);
  EXPECT_EQ(WorkerThreadShare(64, 1), 64);
  EXPECT_EQ(WorkerThreadShare(2, 3), 1);
  EXPECT_EQ(WorkerThreadShare(8, 0), 8);
  EXPECT_GE(UsableCpus(), 1);
}

TEST(SupervisorTest, MissingWorkerBinaryIsReportedNotHung) {
  char tmpl[] = "/tmp/benchd-sup-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    Supervisor sup({dir + "/no-such-worker", dir, dir, std::chrono::seconds(5), ""}, {"cpu:0"},
                   nullptr);
    sup.Start();
    auto up = sup.WaitUntilUp("cpu:0", std::chrono::milliseconds(1500));
    ASSERT_FALSE(up.ok());
    EXPECT_EQ(up.status().code(), absl::StatusCode::kUnavailable);
    // posix_spawn reports a missing file either itself or as exit code 127.
    const std::string msg(up.status().message());
    EXPECT_TRUE(msg.find("No such file") != std::string::npos ||
                msg.find("exited with code 127") != std::string::npos)
        << msg;
    EXPECT_EQ(sup.Devices().at(0).worker_state(), v1::WORKER_STATE_DOWN);
    sup.Stop();
  }
  std::filesystem::remove_all(dir);
}

TEST(SupervisorTest, ServesAsWorkersBeforeAnyWorkerIsUp) {
  Supervisor sup({"/no-such-worker", "/tmp", "/tmp/logs", std::chrono::seconds(5), ""},
                 {"cpu:0", "cpu:1"}, nullptr);
  Workers& workers = sup;  // what JobManager, GroupRegistry and BenchService see
  auto unknown = workers.WaitUntilUp("cpu:9", std::chrono::milliseconds(0));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  auto down = workers.WaitUntilUp("cpu:1", std::chrono::milliseconds(0));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(down.status().message(),
            "the worker for cpu:1 is not running; see /tmp/logs/worker-cpu-1.log");
  EXPECT_EQ(workers.Health("cpu:0").state, v1::WORKER_STATE_DOWN);
  EXPECT_EQ(workers.Health("cpu:0").client, nullptr);
  EXPECT_EQ(workers.WaitForExit("cpu:0", 1, std::chrono::milliseconds(0)), "");
  ASSERT_EQ(workers.Devices().size(), 2u);
  EXPECT_EQ(workers.Devices()[1].name(), "cpu:1");
  EXPECT_EQ(workers.LogPath("cpu:0"), "/tmp/logs/worker-cpu-0.log");
}

// ---------------------------------------------------------------- parking

// Answers GetInfo and Ping on the socket the supervisor dials, in this
// process; the "worker" the supervisor spawns is a shell script that sleeps
// (or fails, when the test rewrites it), so the process side (spawn, SIGTERM,
// waitpid) is real and the gRPC side is this.
class ParkingTestWorker final : public internal::Worker::Service {
 public:
  grpc::Status GetInfo(grpc::ServerContext*, const internal::GetInfoRequest*,
                       internal::WorkerInfo* info) override {
    info->mutable_device()->set_name("cpu:0");
    return grpc::Status::OK;
  }
  grpc::Status Ping(grpc::ServerContext*, const internal::PingRequest*,
                    internal::PingResponse* answer) override {
    std::lock_guard<std::mutex> lock(mu);
    answer->set_running_job_id(running_job_id);
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::string running_job_id;  // what Ping says runs
};

class SupervisorParkingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/benchd-park-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    WriteWorker("exec sleep 600");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + dir_ + "/worker-cpu-0.sock",
                             grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (sup_) sup_->Stop(std::chrono::seconds(2));
    sup_.reset();
    if (server_) server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }
  void WriteWorker(const std::string& body) {
    const std::string path = dir_ + "/worker.sh";
    std::filesystem::remove(path);  // not rewritten in place: a running one may read it
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  void StartSupervisor(std::chrono::milliseconds idle_exit,
                       std::chrono::milliseconds park_grace = std::chrono::seconds(10)) {
    Supervisor::Options o;
    o.park_grace = park_grace;
    o.worker_path = dir_ + "/worker.sh";
    o.run_dir = o.log_dir = dir_;
    o.start_timeout = std::chrono::seconds(5);
    o.heartbeat_interval = std::chrono::milliseconds(50);
    o.idle_exit = idle_exit;
    sup_ = std::make_unique<Supervisor>(o, std::vector<std::string>{"cpu:0"}, nullptr);
    sup_->SetHealthListener([this](const std::string&, bool serving) {
      std::lock_guard<std::mutex> lock(mu_);
      serving_.push_back(serving);
    });
    sup_->Start();
  }
  // Polls (10 ms) until `device`'s state is `state`, up to `limit`.
  bool WaitForState(v1::WorkerState state,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (sup_->Health("cpu:0").state == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::vector<bool> Serving() {
    std::lock_guard<std::mutex> lock(mu_);
    return serving_;
  }

  std::string dir_;
  ParkingTestWorker service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Supervisor> sup_;
  std::mutex mu_;
  std::vector<bool> serving_;  // what the health listener heard, in order
};

TEST_F(SupervisorParkingTest, AnIdleWorkerIsParkedNotRestartedAndAHoldStartsItAgain) {
  StartSupervisor(std::chrono::milliseconds(300));
  auto up = sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5));
  ASSERT_TRUE(up.ok()) << up.status();
  const pid_t first = (*up)->pid();
  ASSERT_TRUE(WaitForState(v1::WORKER_STATE_PARKED));
  // The process is gone (shown parked from when it is told to exit), and
  // nothing replaces it.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (kill(first, 0) == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(kill(first, 0), -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  v1::Device d = sup_->Devices().at(0);
  EXPECT_EQ(d.worker_state(), v1::WORKER_STATE_PARKED);
  EXPECT_EQ(d.worker_pid(), 0);
  EXPECT_EQ(d.worker_restarts(), 0);  // a park is not a restart
  EXPECT_NE(d.worker_detail().find("parked after"), std::string::npos) << d.worker_detail();
  EXPECT_NE(d.worker_detail().find("--worker-idle-exit 0.3 s"), std::string::npos);
  EXPECT_TRUE(sup_->WorkerPids().empty());  // its pid may be another process's by now
  EXPECT_FALSE(sup_->Health("cpu:0").failing_to_start);
  // Not up, but waiting for it does not start it; it says why.
  auto parked = sup_->WaitUntilUp("cpu:0", std::chrono::milliseconds(0));
  EXPECT_EQ(parked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(parked.status().message().find("the worker for cpu:0 is parked after"),
            std::string::npos)
      << parked.status();

  {
    std::shared_ptr<void> hold = sup_->Hold("cpu:0", "a test");
    auto again = sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_NE((*again)->pid(), first);
    EXPECT_EQ((*again)->generation(), 2u);
    // Held: idle past the bound and still up.
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    EXPECT_EQ(sup_->Health("cpu:0").state, v1::WORKER_STATE_UP);
  }
  ASSERT_TRUE(WaitForState(v1::WORKER_STATE_PARKED));
  EXPECT_EQ(sup_->Devices().at(0).worker_restarts(), 0);
  // Ready throughout: not serving only before the first start.
  const std::vector<bool> serving = Serving();
  ASSERT_GE(serving.size(), 2u);
  EXPECT_FALSE(serving[0]);
  for (size_t i = 1; i < serving.size(); ++i) EXPECT_TRUE(serving[i]) << i;
}

TEST_F(SupervisorParkingTest, AWorkerBeingParkedTakesNoCallsAndIsKilledPastTheGrace) {
  WriteWorker("trap '' TERM\nwhile true; do sleep 0.1; done");  // ignores SIGTERM
  StartSupervisor(std::chrono::milliseconds(200), std::chrono::milliseconds(800));
  auto up = sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5));
  ASSERT_TRUE(up.ok()) << up.status();
  const pid_t pid = (*up)->pid();
  ASSERT_TRUE(WaitForState(v1::WORKER_STATE_PARKED));
  // Told to exit, still there: shown parked, and no caller gets it.
  EXPECT_EQ(kill(pid, 0), 0);
  EXPECT_EQ(sup_->Health("cpu:0").client, nullptr);
  EXPECT_FALSE(sup_->WaitUntilUp("cpu:0", std::chrono::milliseconds(0)).ok());
  // Past the grace it is killed, and parked all the same (not restarted).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(kill(pid, 0), -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sup_->Health("cpu:0").state, v1::WORKER_STATE_PARKED);
  EXPECT_EQ(sup_->Devices().at(0).worker_restarts(), 0);
}

TEST_F(SupervisorParkingTest, AWorkerRunningAJobIsNotParked) {
  {
    std::lock_guard<std::mutex> lock(service_.mu);
    service_.running_job_id = "7";  // e.g. another member's Node.Run, held nowhere here
  }
  StartSupervisor(std::chrono::milliseconds(200));
  ASSERT_TRUE(sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(sup_->Health("cpu:0").state, v1::WORKER_STATE_UP);
  {
    std::lock_guard<std::mutex> lock(service_.mu);
    service_.running_job_id.clear();
  }
  EXPECT_TRUE(WaitForState(v1::WORKER_STATE_PARKED));
}

TEST_F(SupervisorParkingTest, WithoutIdleExitAWorkerStaysUp) {
  StartSupervisor(std::chrono::milliseconds(0));
  ASSERT_TRUE(sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(sup_->Health("cpu:0").state, v1::WORKER_STATE_UP);
  EXPECT_EQ(sup_->Hold("cpu:0", "a test").use_count(), 1);  // harmless there too
}

TEST_F(SupervisorParkingTest, AParkedWorkerThatFailsToStartIsDownAndNotReady) {
  StartSupervisor(std::chrono::milliseconds(200));
  ASSERT_TRUE(sup_->WaitUntilUp("cpu:0", std::chrono::seconds(5)).ok());
  ASSERT_TRUE(WaitForState(v1::WORKER_STATE_PARKED));
  WriteWorker("exit 3");
  // Nothing answers on the socket now, so the start fails as a real one would.
  server_->Shutdown();
  server_.reset();
  std::shared_ptr<void> hold = sup_->Hold("cpu:0", "a test");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!sup_->Health("cpu:0").failing_to_start && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const WorkerHealth health = sup_->Health("cpu:0");
  EXPECT_TRUE(health.failing_to_start);
  EXPECT_EQ(health.detail, "exited with code 3");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a heartbeat or more
  const std::vector<bool> serving = Serving();
  ASSERT_FALSE(serving.empty());
  EXPECT_FALSE(serving.back());  // a failed start is a failure: the device is not ready
}

}  // namespace
}  // namespace benchd::server
