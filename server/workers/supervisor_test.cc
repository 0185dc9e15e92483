#include "server/workers/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace benchd::server
