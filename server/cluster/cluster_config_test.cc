#include "server/cluster/cluster_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSecretInFile[] = "0123456789abcdef0123";

// The launcher's variables; a cluster secret unless `vars` names one ("" =
// none).
ClusterEnvironment Env(std::map<std::string, std::string> vars) {
  vars.emplace("BENCHD_CLUSTER_SECRET", kSecretInFile);
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ExpandHostlist, SlurmsSyntaxWithPaddingAndLists) {
  EXPECT_THAT(*ExpandHostlist("gpu[01-03,7],login", "x"),
              ElementsAre("gpu01", "gpu02", "gpu03", "gpu7", "login"));
  EXPECT_THAT(*ExpandHostlist("n1", "x"), ElementsAre("n1"));
  EXPECT_THAT(*ExpandHostlist("a[8-10]-ib", "x"), ElementsAre("a8-ib", "a9-ib", "a10-ib"));
}

TEST(ExpandHostlist, BadListsNameTheOriginAndWhatCame) {
  for (const char* bad : {"gpu[01-03", "gpu[3-1]", "gpu[a-b]", "gpu[1-]", "", "n[1]x[2]"}) {
    auto hosts = ExpandHostlist(bad, "SLURM_JOB_NODELIST");
    ASSERT_FALSE(hosts.ok()) << bad;
    EXPECT_THAT(hosts.status().message(), HasSubstr("SLURM_JOB_NODELIST")) << bad;
  }
  auto huge = ExpandHostlist("n[1-5000]", "SLURM_JOB_NODELIST");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("at most 1024"));
}

TEST(ResolveClusterOptions, NothingGivenIsALoneDaemon) {
  auto options = ResolveClusterOptions({}, "127.0.0.1:7531", "h", Env({}));
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->enabled);
}

TEST(ResolveClusterOptions, FromFlags) {
  ClusterFlags flags;
  flags.coordinator = "10.0.0.1:7531";
  flags.rank = 2;
  flags.nodes = 3;
  auto options = ResolveClusterOptions(flags, "10.0.0.3:7531", "h", Env({}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->enabled);
  EXPECT_EQ(options->name, "node2");
  EXPECT_EQ(options->advertise, "10.0.0.3:7531");
  EXPECT_EQ(options->launcher, "flags");
  // A wildcard listen address is reached by the host's name.
  options = ResolveClusterOptions(flags, "0.0.0.0:7600", "gpu7", Env({}));
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->advertise, "gpu7:7600");
}

TEST(ResolveClusterOptions, FlagsMustComeTogetherAndInRange) {
  ClusterFlags flags;
  flags.coordinator = "10.0.0.1:7531";
  auto options = ResolveClusterOptions(flags, "10.0.0.3:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--node-rank N and --nodes M together"));
  flags.rank = 3;
  flags.nodes = 3;
  options = ResolveClusterOptions(flags, "10.0.0.3:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--node-rank"));
  EXPECT_THAT(options.status().message(), HasSubstr("0..2"));
  flags.rank = 0;
  flags.coordinator = "nohost";
  options = ResolveClusterOptions(flags, "10.0.0.3:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--cluster-coordinator"));
  flags.coordinator = "a:1";
  flags.name = "Node_1";
  options = ResolveClusterOptions(flags, "10.0.0.3:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--node-name"));
  flags.name = "";
  options = ResolveClusterOptions(flags, "127.0.0.1:0", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("fixed port"));
}

TEST(ResolveClusterOptions, FromSlurm) {
  ClusterFlags flags;
  flags.from = "slurm";
  auto options = ResolveClusterOptions(flags, "0.0.0.0:7531", "ignored",
                                       Env({{"SLURM_NODEID", "1"},
                                            {"SLURM_NNODES", "3"},
                                            {"SLURM_JOB_NODELIST", "n[1-3]"},
                                            {"SLURMD_NODENAME", "n2"}}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->rank, 1);
  EXPECT_EQ(options->nodes, 3);
  EXPECT_EQ(options->coordinator, "n1:7531");
  EXPECT_EQ(options->advertise, "n2:7531");
  EXPECT_EQ(options->name, "node1");
  EXPECT_EQ(options->launcher, "slurm");
}

TEST(ResolveClusterOptions, SlurmWithoutItsVariablesSaysWhich) {
  ClusterFlags flags;
  flags.from = "slurm";
  auto options = ResolveClusterOptions(flags, "0.0.0.0:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("SLURM_JOB_NODELIST is not set"));
  options =
      ResolveClusterOptions(flags, "0.0.0.0:7531", "h", Env({{"SLURM_JOB_NODELIST", "n[1-3]"}}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("SLURM_NODEID is not set"));
  options = ResolveClusterOptions(
      flags, "0.0.0.0:7531", "h",
      Env({{"SLURM_NODEID", "0"}, {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_JOB_NODELIST", "n[1-3]"}}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("SLURM_JOB_NUM_NODES is 2"));
  options =
      ResolveClusterOptions(flags, "0.0.0.0:7531", "h",
                            Env({{"SLURMD_NODENAME", "login"}, {"SLURM_JOB_NODELIST", "n[1-3]"}}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("SLURMD_NODENAME login is not in"));
}

TEST(ResolveClusterOptions, SlurmRankIsTheHostsPlaceInTheJobNotTheStep) {
  // srun -N1 -w n2 inside a 3-node job: the step's SLURM_NODEID is 0.
  ClusterFlags flags;
  flags.from = "slurm";
  auto options = ResolveClusterOptions(flags, "0.0.0.0:7531", "h",
                                       Env({{"SLURM_NODEID", "0"},
                                            {"SLURM_NNODES", "1"},
                                            {"SLURM_JOB_NUM_NODES", "3"},
                                            {"SLURM_JOB_NODELIST", "n[1-3]"},
                                            {"SLURMD_NODENAME", "n2"}}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->rank, 1);
  EXPECT_EQ(options->nodes, 3);
  EXPECT_EQ(options->name, "node1");
  EXPECT_EQ(options->advertise, "n2:7531");
}

TEST(ResolveClusterOptions, FromKubernetes) {
  ClusterFlags flags;
  flags.from = "kubernetes";
  auto options = ResolveClusterOptions(flags, "0.0.0.0:7531", "ignored",
                                       Env({{"JOB_COMPLETION_INDEX", "2"},
                                            {"BENCHD_NODES", "4"},
                                            {"BENCHD_CLUSTER_JOB", "bench"},
                                            {"BENCHD_CLUSTER_SERVICE", "benchd-cluster"},
                                            {"HOSTNAME", "bench-2"}}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->rank, 2);
  EXPECT_EQ(options->nodes, 4);
  EXPECT_EQ(options->coordinator, "bench-0.benchd-cluster:7531");
  EXPECT_EQ(options->advertise, "bench-2.benchd-cluster:7531");
  // A flag wins over the environment.
  flags.nodes = 5;
  options = ResolveClusterOptions(flags, "0.0.0.0:7531", "ignored",
                                  Env({{"JOB_COMPLETION_INDEX", "2"},
                                       {"BENCHD_CLUSTER_JOB", "bench"},
                                       {"BENCHD_CLUSTER_SERVICE", "s"}}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->nodes, 5);
  EXPECT_EQ(options->advertise, "ignored.s:7531");
}

TEST(ResolveClusterOptions, LostAfterIsBounded) {
  ClusterFlags flags;
  flags.coordinator = "a:1";
  flags.rank = 0;
  flags.nodes = 1;
  flags.lost_after_s = 0.5;
  auto options = ResolveClusterOptions(flags, "127.0.0.1:7531", "h", Env({}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--cluster-lost-after"));
  flags.lost_after_s = 3;
  options = ResolveClusterOptions(flags, "127.0.0.1:7531", "h", Env({}));
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->lost_after.count(), 3000);
}

TEST(ResolveClusterOptions, AMemberNeedsTheClustersSecret) {
  ClusterFlags flags;
  flags.coordinator = "10.0.0.1:7531";
  flags.rank = 1;
  flags.nodes = 2;
  auto options = ResolveClusterOptions(flags, "10.0.0.2:7531", "h", Env({}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->secret, kSecretInFile);
  options =
      ResolveClusterOptions(flags, "10.0.0.2:7531", "h", Env({{"BENCHD_CLUSTER_SECRET", ""}}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(),
              HasSubstr("needs the cluster's secret (--cluster-secret-file FILE or "
                        "BENCHD_CLUSTER_SECRET)"));
  options =
      ResolveClusterOptions(flags, "10.0.0.2:7531", "h", Env({{"BENCHD_CLUSTER_SECRET", "short"}}));
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(),
              HasSubstr("BENCHD_CLUSTER_SECRET: a secret of 5 bytes; expected 16..1024"));
}

TEST(LoadClusterSecret, AFileOfOneLineThatOthersCannotRead) {
  char dir[] = "/tmp/benchd-secret-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/secret";
  std::ofstream(path) << "  s3cret-s3cret-s3cret  \nsecond line\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  // The file wins over the variable; surrounding blanks are not the secret.
  auto secret = LoadClusterSecret(path, Env({}));
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, "s3cret-s3cret-s3cret");
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);  // a Kubernetes Secret volume's mode
  EXPECT_TRUE(LoadClusterSecret(path, Env({})).ok());
  for (mode_t mode : {0644, 0620, 0602}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    secret = LoadClusterSecret(path, Env({}));
    ASSERT_FALSE(secret.ok()) << mode;
    EXPECT_THAT(secret.status().message(), HasSubstr("--cluster-secret-file " + path));
    EXPECT_THAT(secret.status().message(), HasSubstr("chmod 600"));
  }
  secret = LoadClusterSecret(std::string(dir) + "/missing", Env({}));
  ASSERT_FALSE(secret.ok());
  EXPECT_THAT(secret.status().message(), HasSubstr("not a readable file"));
  unlink(path.c_str());
  rmdir(dir);
}

// What a c10d store or Gloo dials: the host without its port or IPv6 brackets.
TEST(HostOfAddressTest, DropsThePortAndIpv6Brackets) {
  EXPECT_EQ(HostOfAddress("gpu01:7531"), "gpu01");
  EXPECT_EQ(HostOfAddress("10.0.0.2:1"), "10.0.0.2");
  EXPECT_EQ(HostOfAddress("[::1]:7531"), "::1");
  EXPECT_EQ(HostOfAddress("[fe80::1]:0"), "fe80::1");
}

}  // namespace
}  // namespace benchd::server
