// Membership over real gRPC on loopback: a coordinator's ClusterService and
// members heartbeating to it, with short intervals.
#include "server/cluster/cluster.h"

#include <atomic>
#include <thread>

#include "common/limits.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cluster/cluster_secret.h"
#include "server/cluster/cluster_service.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kSecret[] = "the-cluster-secret-0123";

ClusterOptions Options(int rank, int nodes, const std::string& coordinator,
                       const std::string& advertise) {
  ClusterOptions o;
  o.enabled = true;
  o.rank = rank;
  o.nodes = nodes;
  o.name = "node" + std::to_string(rank);
  o.coordinator = coordinator;
  o.advertise = advertise;
  o.launcher = "flags";
  o.secret = kSecret;
  o.heartbeat_interval = 50ms;
  o.lost_after = 600ms;
  return o;
}

Cluster::DescribeSelf Describe(const std::string& device) {
  return [device] {
    v1::ClusterNode self;
    self.set_hostname("host-" + device);
    self.add_devices()->set_name(device);
    return self;
  };
}

// Polls `condition` for up to `timeout`.
template <typename F>
bool Eventually(F condition, std::chrono::milliseconds timeout = 5s) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

class ClusterTest : public ::testing::Test {
 protected:
  // The coordinator on a free loopback port; its address is only known once
  // it listens, so its options are finished after.
  // `watch` false: no watch loop, so only a heartbeat finds a member LOST.
  void StartCoordinator(int nodes, bool watch = true) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    auto options = Options(0, nodes, "", "");
    // The real address is set below; the Cluster only needs it for List.
    coordinator_options_ = options;
    coordinator_ = std::make_unique<Cluster>(options, Describe("cpu:0"), peers_);
    service_ = std::make_unique<ClusterService>(coordinator_.get(), &auth_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    address_ = "127.0.0.1:" + std::to_string(port_);
    coordinator_->SetNodeLostListener([this](const std::string& name, const std::string& why) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_.push_back(name + ": " + why);
    });
    if (watch) coordinator_->Start();
  }
  std::unique_ptr<Cluster> Member(int rank, int nodes, const std::string& advertise) {
    auto member = std::make_unique<Cluster>(Options(rank, nodes, address_, advertise),
                                            Describe("cpu:" + std::to_string(rank)), peers_);
    member->Start();
    return member;
  }
  v1::NodeState StateOf(Cluster& c, int rank) { return c.List().nodes(rank).state(); }
  std::vector<std::string> Lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }
  void TearDown() override {
    if (coordinator_) coordinator_->Stop();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }

  PeerChannels peers_{{}, kSecret};
  Authorizer auth_{{}, nullptr};
  ClusterOptions coordinator_options_;
  std::unique_ptr<Cluster> coordinator_;
  std::unique_ptr<ClusterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::mutex mu_;
  std::vector<std::string> lost_;
};

TEST_F(ClusterTest, MembersJoinAndEveryNodeListsTheWholeCluster) {
  StartCoordinator(3);
  auto before = coordinator_->List();
  ASSERT_EQ(before.nodes_size(), 3);
  EXPECT_EQ(before.expected_nodes(), 3);
  EXPECT_EQ(before.nodes(0).state(), v1::NODE_STATE_READY);
  EXPECT_TRUE(before.nodes(0).self());
  EXPECT_EQ(before.nodes(1).state(), v1::NODE_STATE_WAITING);

  auto one = Member(1, 3, "127.0.0.2:7001");
  auto two = Member(2, 3, "127.0.0.3:7002");
  ASSERT_TRUE(Eventually([&] {
    return StateOf(*coordinator_, 1) == v1::NODE_STATE_READY &&
           StateOf(*coordinator_, 2) == v1::NODE_STATE_READY;
  }));
  auto nodes = coordinator_->List();
  EXPECT_EQ(nodes.nodes(1).name(), "node1");
  EXPECT_EQ(nodes.nodes(1).address(), "127.0.0.2:7001");
  EXPECT_EQ(nodes.nodes(2).devices(0).name(), "cpu:2");
  EXPECT_EQ(nodes.nodes(2).hostname(), "host-cpu:2");
  EXPECT_FALSE(nodes.nodes(1).self());

  // A member learns the others from the coordinator's answers.
  ASSERT_TRUE(Eventually([&] { return StateOf(*one, 2) == v1::NODE_STATE_READY; }));
  auto seen = one->List();
  EXPECT_TRUE(seen.nodes(1).self());
  EXPECT_FALSE(seen.nodes(0).self());
  EXPECT_EQ(seen.nodes(0).name(), "node0");
  EXPECT_EQ(seen.nodes(2).address(), "127.0.0.3:7002");
  EXPECT_TRUE(one->ReadyNode("node2").ok());
  EXPECT_TRUE(Lost().empty());
}

TEST_F(ClusterTest, AMemberThatStopsIsLostInTimeAndComesBackWhenRestarted) {
  StartCoordinator(2);
  auto one = Member(1, 2, "127.0.0.2:7001");
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_READY; }));
  const auto stopped = std::chrono::steady_clock::now();
  one->Stop();
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_LOST; }));
  // lost_after (0.6 s) plus at most one check interval, with room for a slow machine.
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 3s);
  auto lost = coordinator_->List().nodes(1);
  EXPECT_THAT(lost.detail(), HasSubstr("no heartbeat for"));
  ASSERT_EQ(Lost().size(), 1u);
  EXPECT_THAT(Lost()[0], HasSubstr("node1: no heartbeat for"));
  auto refused = coordinator_->ReadyNode("node1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("LOST"));

  auto again = Member(1, 2, "127.0.0.2:7001");
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_READY; }));
  EXPECT_EQ(coordinator_->List().nodes(1).detail(), "");
  EXPECT_EQ(Lost().size(), 1u);  // once per loss
}

TEST_F(ClusterTest, AMemberThatLosesTheCoordinatorSaysSo) {
  StartCoordinator(2);
  auto one = Member(1, 2, "127.0.0.2:7001");
  std::atomic<int> lost{0};
  ASSERT_TRUE(Eventually([&] { return StateOf(*one, 0) == v1::NODE_STATE_READY; }));
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  ASSERT_TRUE(Eventually([&] { return StateOf(*one, 0) == v1::NODE_STATE_LOST; }));
  EXPECT_THAT(one->List().nodes(0).detail(),
              HasSubstr("the coordinator at " + address_ + " has not answered for"));
  one->Stop();
}

TEST_F(ClusterTest, HeartbeatsThatDoNotFitAreRefusedNamingWhy) {
  StartCoordinator(3);
  internal::HeartbeatRequest request;
  request.set_nodes(3);
  request.set_incarnation("a");
  request.mutable_node()->set_name("node1");
  request.mutable_node()->set_rank(1);
  request.mutable_node()->set_address("10.0.0.2:7531");
  ASSERT_TRUE(coordinator_->OnHeartbeat(request).ok());

  // Another daemon claiming the live rank 1 from elsewhere, or at node1's
  // own address (a forged heartbeat): refused either way while node1 lives.
  auto twin = request;
  twin.set_incarnation("b");
  twin.mutable_node()->set_address("10.0.0.9:7531");
  auto refused = coordinator_->OnHeartbeat(twin);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("rank 1 is held by node1 at 10.0.0.2:7531, which is live"));
  auto forged = request;
  forged.set_incarnation("c");
  forged.mutable_node()->set_hostname("evil");
  refused = coordinator_->OnHeartbeat(forged);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("rank 1 is held by node1"));
  EXPECT_EQ(coordinator_->List().nodes(1).hostname(), "");
  // The real node1 goes on.
  EXPECT_TRUE(coordinator_->OnHeartbeat(request).ok());

  auto size = request;
  size.set_nodes(4);
  refused = coordinator_->OnHeartbeat(size);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("launched for 4 nodes; this cluster has 3"));

  auto rank0 = request;
  rank0.mutable_node()->set_rank(0);
  refused = coordinator_->OnHeartbeat(rank0);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("claims rank 0"));

  auto same_name = request;
  same_name.set_incarnation("d");
  same_name.mutable_node()->set_rank(2);
  same_name.mutable_node()->set_address("10.0.0.3:7531");
  refused = coordinator_->OnHeartbeat(same_name);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("node name node1 is taken by rank 1"));
}

internal::HeartbeatRequest Heartbeat(int rank, const std::string& name,
                                     const std::string& incarnation) {
  internal::HeartbeatRequest request;
  request.set_nodes(3);
  request.set_incarnation(incarnation);
  request.mutable_node()->set_name(name);
  request.mutable_node()->set_rank(rank);
  request.mutable_node()->set_address("10.0.0." + std::to_string(rank + 1) + ":7531");
  request.mutable_node()->add_devices()->set_name("cpu:0");
  return request;
}

TEST_F(ClusterTest, ARestartedMemberJoinsOnceTheOldOneIsLostAndItsGroupsBreak) {
  StartCoordinator(3);
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a")).ok());
  // A new daemon for rank 1 at the same address: refused while the old one
  // is live, taken once the coordinator found it LOST (lost_after 0.6 s).
  ASSERT_FALSE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "b")).ok());
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_LOST; }));
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "b")).ok());
  EXPECT_EQ(StateOf(*coordinator_, 1), v1::NODE_STATE_READY);
  ASSERT_EQ(Lost().size(), 1u);
}

TEST_F(ClusterTest, AMemberSilentPastTheBoundIsLostThoughItsHeartbeatComesBeforeTheWatchLoop) {
  // A paused coordinator (issue 36) serves the member's queued heartbeat
  // and its watch loop in either order; the loss must not depend on which.
  StartCoordinator(3, /*watch=*/false);
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a")).ok());
  std::this_thread::sleep_for(700ms);  // past lost_after (0.6 s), nobody watching
  ASSERT_TRUE(Lost().empty());
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a")).ok());
  EXPECT_EQ(StateOf(*coordinator_, 1), v1::NODE_STATE_READY);
  ASSERT_EQ(Lost().size(), 1u);
  EXPECT_THAT(Lost()[0], HasSubstr("node1: no heartbeat for "));
  // Within the bound, nothing more.
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a")).ok());
  EXPECT_EQ(Lost().size(), 1u);
}

TEST_F(ClusterTest, NamesAreUniqueAndDeviceListsBounded) {
  StartCoordinator(3);
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a")).ok());
  auto refused = coordinator_->OnHeartbeat(Heartbeat(2, "node0", "b"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("node name node0 is the coordinator's"));
  // A name stays with its rank, also once that rank is LOST.
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_LOST; }));
  refused = coordinator_->OnHeartbeat(Heartbeat(2, "node1", "b"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("node name node1 is taken by rank 1"));

  auto many = Heartbeat(2, "node2", "b");
  for (int i = 1; i < 2000; ++i)
    many.mutable_node()->add_devices()->set_name("cpu:" + std::to_string(i));
  refused = coordinator_->OnHeartbeat(many);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(
      refused.status().message(),
      HasSubstr("announces 2000 devices; a member has at most " + std::to_string(kMaxNodeDevices)));
  auto odd = Heartbeat(2, "node2", "b");
  odd.mutable_node()->mutable_devices(0)->set_name("../../etc");
  EXPECT_FALSE(coordinator_->OnHeartbeat(odd).ok());
  auto address = Heartbeat(2, "node2", "b");
  address.mutable_node()->set_address("10.0.0.3:7531\nbenchd: forged log line");
  refused = coordinator_->OnHeartbeat(address);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("is not HOST:PORT"));
  EXPECT_TRUE(coordinator_->OnHeartbeat(Heartbeat(2, "node2", "b")).ok());
}

TEST_F(ClusterTest, WithClientCertificatesARankBelongsToTheSubjectThatJoinedIt) {
  StartCoordinator(3);
  ASSERT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "a"), "CN=node1").ok());
  ASSERT_TRUE(Eventually([&] { return StateOf(*coordinator_, 1) == v1::NODE_STATE_LOST; }));
  // node1 is down: another certificate still cannot take its rank.
  auto refused = coordinator_->OnHeartbeat(Heartbeat(1, "node1", "b"), "CN=intruder");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("rank 1 belongs to the certificate subject 'CN=node1'"));
  EXPECT_TRUE(coordinator_->OnHeartbeat(Heartbeat(1, "node1", "b"), "CN=node1").ok());
}

TEST_F(ClusterTest, AHeartbeatWithoutTheSecretIsRefusedAndLoggedOncePerCause) {
  StartCoordinator(3);
  auto stub =
      internal::Cluster::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    for (const char* secret : {"", "not-the-secret-0123456"}) {
      grpc::ClientContext ctx;
      if (*secret) ctx.AddMetadata(kClusterSecretKey, secret);
      internal::HeartbeatResponse response;
      const grpc::Status s = stub->Heartbeat(&ctx, Heartbeat(1, "node1", "x"), &response);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(StateOf(*coordinator_, 1), v1::NODE_STATE_WAITING);
  size_t lines = 0;
  for (size_t at = log.find("refused Cluster.Heartbeat"); at != std::string::npos;
       at = log.find("refused Cluster.Heartbeat", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << log;  // two causes, ten calls
  EXPECT_THAT(log, HasSubstr("came without it"));
  EXPECT_THAT(log, HasSubstr("is not this cluster's"));
}

TEST_F(ClusterTest, ALoneDaemonListsItselfAndIsNoCoordinator) {
  ClusterOptions lone;
  lone.advertise = "127.0.0.1:7531";
  Cluster cluster(lone, Describe("cpu:0"), peers_);
  auto nodes = cluster.List();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.expected_nodes(), 1);
  EXPECT_EQ(nodes.coordinator(), "");
  EXPECT_TRUE(nodes.nodes(0).self());
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_READY);
  auto refused = cluster.OnHeartbeat({});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("not in a cluster"));
  auto missing = cluster.ReadyNode("node7");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("its nodes are node0"));
}

}  // namespace
}  // namespace benchd::server
