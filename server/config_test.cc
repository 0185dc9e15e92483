#include "server/config.h"

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

TEST_F(ConfigFileTest, UnknownKeyIsNamed) {
  DaemonConfig c;
  auto s = LoadConfigFile(Write(R"({"listen": "x"})"), &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown key 'listen'"), std::string::npos) << s;
}

TEST_F(ConfigFileTest, WrongTypeAndBadJsonAreErrors) {
  DaemonConfig c;
  EXPECT_EQ(LoadConfigFile(Write(R"({"devices": "cuda:0"})"), &c).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfigFile(Write("{not json"), &c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadConfigFile(dir_ + "/missing.json", &c).code(), absl::StatusCode::kNotFound);
}

TEST(DeviceNameTest, AcceptsCpuAndCudaOrdinals) {
  EXPECT_TRUE(CheckDeviceName("cpu:0").ok());
  EXPECT_TRUE(CheckDeviceName("cuda:12").ok());
  for (const char* bad : {"", "cuda", "gpu:0", "cuda:-1", "cuda:0 ", "CUDA:0", "cuda:1234"}) {
    EXPECT_EQ(CheckDeviceName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DeviceNameTest, ServedDevicesNameTheFieldAndWhatIsServed) {
  const std::vector<std::string> served = {"cpu:0", "cpu:1"};
  EXPECT_TRUE(CheckServedDevice("device", "cpu:1", served).ok());
  const absl::Status other = CheckServedDevice("targets[0].devices", "cuda:0", served);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(),
            "targets[0].devices: cuda:0 is not served by this daemon; it serves cpu:0, cpu:1");
  const absl::Status bad = CheckServedDevice("device", "gpu\n0", served);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "device: 'gpu\\n0' is not a device name; expected cpu:N or cuda:N, one of cpu:0, "
            "cpu:1");
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
