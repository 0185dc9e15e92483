#include "server/daemon/daemon_config.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/benchd-config-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string path = dir_ + "/benchd.json";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(ConfigFileTest, ReadsEveryKey) {
  DaemonConfig c;
  ASSERT_TRUE(LoadConfigFile(Write(R"({"listen_address": "0.0.0.0:1", "metrics_address": "",
      "data_dir": "/d", "devices": ["cuda:0", "cuda:1"], "worker_path": "/w",
      "worker_start_timeout_s": 9, "worker_heartbeat_timeout_s": 4,
      "progress_timeout_s": {"profile": 1200}})"),
                             &c)
                  .ok());
  EXPECT_EQ(c.listen_address, "0.0.0.0:1");
  EXPECT_EQ(c.metrics_address, "");
  EXPECT_EQ(c.data_dir, "/d");
  EXPECT_EQ(c.devices, (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_EQ(c.worker_path, "/w");
  EXPECT_EQ(c.worker_start_timeout_s, 9);
  EXPECT_EQ(c.worker_heartbeat_timeout_s, 4);
  EXPECT_EQ(c.progress_timeout_s, (std::map<std::string, double>{{"profile", 1200}}));
}

// A setting has one name: --worker-start-timeout is "worker_start_timeout"
// in the file (the older keys are still read, above).
TEST_F(ConfigFileTest, KeysAreTheFlagsNames) {
  DaemonConfig c;
  ASSERT_TRUE(LoadConfigFile(Write(R"({"listen": "127.0.0.1:9", "metrics": "off",
      "device": ["cpu:0"], "worker_start_timeout": 7, "stop_grace": 0, "insecure": true,
      "progress_timeout": ["memory=60"], "node_rank": 1, "nodes": 2,
      "cluster_coordinator": "h:1", "cluster_lost_after": 2.5})"),
                             &c)
                  .ok());
  EXPECT_EQ(c.listen_address, "127.0.0.1:9");
  EXPECT_EQ(c.metrics_address, "");
  EXPECT_EQ(c.devices, (std::vector<std::string>{"cpu:0"}));
  EXPECT_EQ(c.worker_start_timeout_s, 7);
  EXPECT_EQ(c.stop_grace_s, 0);
  EXPECT_TRUE(c.insecure);
  EXPECT_EQ(c.progress_timeout_s, (std::map<std::string, double>{{"memory", 60}}));
  EXPECT_EQ(c.cluster.rank, 1);
  EXPECT_EQ(c.cluster.nodes, 2);
  EXPECT_EQ(c.cluster.coordinator, "h:1");
  EXPECT_EQ(c.cluster.lost_after_s, 2.5);
  EXPECT_EQ(c.worker_idle_exit_s, 0);  // unset: never parked
  ASSERT_TRUE(LoadConfigFile(Write(R"({"worker_idle_exit": 120})"), &c).ok());
  EXPECT_EQ(c.worker_idle_exit_s, 120);
  auto bad = LoadConfigFile(Write(R"({"stop_grace": "soon"})"), &c);
  EXPECT_EQ(bad.message(), "config file '" + dir_ +
                               "/benchd.json': stop_grace: expected a whole number, got 'soon'");
  EXPECT_FALSE(LoadConfigFile(Write(R"({"insecure": "yes"})"), &c).ok());
  EXPECT_FALSE(LoadConfigFile(Write(R"({"cluster_from": "pbs"})"), &c).ok());
}

// Flags win over the file; a flag given twice takes its last value.
TEST_F(ConfigFileTest, FlagsOverrideTheFile) {
  const std::string file = Write(R"({"data_dir": "/from-file", "listen": "127.0.0.1:1"})");
  std::vector<std::string> args = {"benchd",      "--config",    file,          "--listen",
                                   "127.0.0.1:2", "--listen",    "127.0.0.1:3", "--device",
                                   "cpu:0",       "--device",    "cpu:1",       "--metrics",
                                   "off",         "--node-rank", "0",           "--insecure"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  DaemonConfig c;
  EXPECT_EQ(ParseDaemonFlags(static_cast<int>(argv.size()), argv.data(), &c), std::nullopt);
  EXPECT_EQ(c.data_dir, "/from-file");
  EXPECT_EQ(c.listen_address, "127.0.0.1:3");
  EXPECT_EQ(c.devices, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  EXPECT_EQ(c.metrics_address, "");
  EXPECT_EQ(c.cluster.rank, 0);
  EXPECT_TRUE(c.insecure);

  std::vector<std::string> bad = {"benchd", "--stop-grace", "7200"};
  std::vector<char*> bad_argv;
  for (auto& a : bad) bad_argv.push_back(a.data());
  DaemonConfig d;
  EXPECT_EQ(ParseDaemonFlags(static_cast<int>(bad_argv.size()), bad_argv.data(), &d), 1);
}

// Who gets in, before anything starts: every refusal names the flag and
// what to give instead.
TEST(CheckDaemonConfigTest, AListenerOtherHostsReachNeedsTlsAndCallerChecks) {
  DaemonConfig c;
  EXPECT_TRUE(CheckDaemonConfig(c).ok());  // the defaults: loopback
  c.listen_address = "0.0.0.0:7531";
  EXPECT_NE(CheckDaemonConfig(c).message().find("without TLS anyone on the network"),
            std::string::npos);
  c.tls_cert = "cert.pem";
  EXPECT_EQ(CheckDaemonConfig(c).message(),
            "--tls-cert and --tls-key go together: give both, or neither");
  c.tls_key = "key.pem";
  EXPECT_NE(CheckDaemonConfig(c).message().find("without --auth-file or --tls-client-ca"),
            std::string::npos);
  c.auth_file = "auth";
  EXPECT_TRUE(CheckDaemonConfig(c).ok());
  c.metrics_address = "0.0.0.0:9531";
  EXPECT_NE(CheckDaemonConfig(c).message().find("/metrics has no TLS here"), std::string::npos);
  c.insecure = true;
  EXPECT_TRUE(CheckDaemonConfig(c).ok());

  DaemonConfig mtls;
  mtls.tls_client_ca = "ca.pem";
  EXPECT_NE(CheckDaemonConfig(mtls).message().find("--tls-client-ca (mTLS) needs"),
            std::string::npos);
  DaemonConfig ranges;
  ranges.worker_heartbeat_timeout_s = 0;
  EXPECT_EQ(CheckDaemonConfig(ranges).message(),
            "--worker-heartbeat-timeout: expected 1..3600 seconds, got 0");
  ranges.worker_heartbeat_timeout_s = 10;
  ranges.worker_idle_exit_s = -1;
  EXPECT_EQ(CheckDaemonConfig(ranges).message(),
            "--worker-idle-exit: expected 0 (never) or 1..604800 seconds, got -1");
  ranges.worker_idle_exit_s = 0;
  ranges.stop_grace_s = -1;
  EXPECT_EQ(CheckDaemonConfig(ranges).message(), "--stop-grace: expected 0..3600 seconds, got -1");
  ranges.stop_grace_s = 10;
  ranges.worker_start_timeout_s = 0;
  EXPECT_FALSE(CheckDaemonConfig(ranges).ok());
}

TEST(ProgressTimeoutFlagTest, KindEqualsSecondsElseNamed) {
  std::map<std::string, double> t;
  ASSERT_TRUE(ParseProgressTimeout("benchmark=30", &t).ok());
  ASSERT_TRUE(ParseProgressTimeout("collective=86400", &t).ok());
  ASSERT_TRUE(ParseProgressTimeout("attention=45", &t).ok());
  ASSERT_TRUE(ParseProgressTimeout("precision=20", &t).ok());
  EXPECT_EQ(t,
            (std::map<std::string, double>{
                {"benchmark", 30}, {"collective", 86400}, {"attention", 45}, {"precision", 20}}));
  EXPECT_EQ(ParseProgressTimeout("training=30", &t).message(),
            "progress timeout 'training=30': expected KIND=SECONDS with KIND benchmark, profile, "
            "memory, collective, attention, precision or ddp");
  ASSERT_TRUE(ParseProgressTimeout("ddp=1200", &t).ok());
  EXPECT_EQ(t["ddp"], 1200);
  EXPECT_EQ(ParseProgressTimeout("profile=0", &t).message(),
            "progress timeout 'profile=0': expected 1..86400 seconds for profile");
  EXPECT_FALSE(ParseProgressTimeout("profile=nan", &t).ok());
  EXPECT_FALSE(ParseProgressTimeout("profile", &t).ok());
}

// --gpu-sharing: dedicated unless asked; a value not known is refused naming both.
TEST_F(ConfigFileTest, GpuSharingIsDedicatedUnlessWhenIdleIsAsked) {
  EXPECT_EQ(DaemonConfig().gpu_sharing, GpuSharingMode::kDedicated);
  DaemonConfig c;
  ASSERT_TRUE(LoadConfigFile(Write(R"({"gpu_sharing": "when-idle"})"), &c).ok());
  EXPECT_EQ(c.gpu_sharing, GpuSharingMode::kWhenIdle);
  auto run = [](std::vector<std::string> args, DaemonConfig* out) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return ParseDaemonFlags(static_cast<int>(argv.size()), argv.data(), out);
  };
  DaemonConfig flag;
  EXPECT_EQ(run({"benchd", "--gpu-sharing=when-idle"}, &flag), std::nullopt);
  EXPECT_EQ(flag.gpu_sharing, GpuSharingMode::kWhenIdle);
  EXPECT_EQ(run({"benchd", "--gpu-sharing", "dedicated"}, &flag), std::nullopt);
  EXPECT_EQ(flag.gpu_sharing, GpuSharingMode::kDedicated);
  DaemonConfig bad;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run({"benchd", "--gpu-sharing", "whenidle"}, &bad), 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--gpu-sharing: expected dedicated"), std::string::npos) << err;
  EXPECT_NE(err.find("or when-idle"), std::string::npos) << err;
  EXPECT_NE(err.find("got 'whenidle'"), std::string::npos) << err;
  EXPECT_EQ(LoadConfigFile(Write(R"({"gpu_sharing": "shared"})"), &c).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ConfigFileTest, UnknownKeyIsNamed) {
  DaemonConfig c;
  auto s = LoadConfigFile(Write(R"({"listn": "x"})"), &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown key 'listn'; expected one of listen, metrics, data_dir"),
            std::string::npos)
      << s;
}

TEST_F(ConfigFileTest, WrongTypeAndBadJsonAreErrors) {
  DaemonConfig c;
  EXPECT_EQ(LoadConfigFile(Write(R"({"devices": "cuda:0"})"), &c).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfigFile(Write("{not json"), &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfigFile(dir_ + "/missing.json", &c).code(), absl::StatusCode::kNotFound);
}

TEST(DetectDevicesTest, FollowsCudaVisibleDevices) {
  setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  EXPECT_EQ(DetectDevices(), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(DetectDevices(), (std::vector<std::string>{"cpu:0"}));
  unsetenv("CUDA_VISIBLE_DEVICES");
}

// endpoints.json and the start log give what clients dial: the bound port
// for TCP, a unix socket's own name (gRPC reports port 1 for it).
TEST(BoundAddressTest, TcpGetsTheBoundPortAUnixSocketStaysItself) {
  EXPECT_EQ(BoundAddress("127.0.0.1:0", 40123), "127.0.0.1:40123");
  EXPECT_EQ(BoundAddress("[::1]:0", 7), "[::1]:7");
  EXPECT_EQ(BoundAddress("unix:/run/benchd/benchd.sock", 1), "unix:/run/benchd/benchd.sock");
  EXPECT_EQ(BoundAddress("unix:///tmp/b.sock", 1), "unix:///tmp/b.sock");
  EXPECT_EQ(BoundAddress("unix-abstract:benchd", 1), "unix-abstract:benchd");
}

}  // namespace
}  // namespace benchd::server
