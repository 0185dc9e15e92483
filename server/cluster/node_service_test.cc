// The internal Node service over real gRPC on loopback, in front of fake
// workers: node0 (this node) with node1 a READY member of its table. It takes
// only what a member sends about its own groups and runs, on this node's
// addresses, within a cap on calls in flight.
#include "server/cluster/node_service.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kNodeServiceSecret[] = "the-cluster-secret-0123";

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.enabled = true;
    options.rank = 0;
    options.nodes = 3;
    options.name = "node0";
    options.coordinator = "127.0.0.1:7000";
    options.advertise = "127.0.0.1:7000";
    options.secret = kNodeServiceSecret;
    cluster_ = std::make_unique<Cluster>(
        options, [] { return v1::ClusterNode(); }, peers_);
    // node1 joins (rank 2 never does).
    internal::HeartbeatRequest join;
    join.set_nodes(3);
    join.set_incarnation("a");
    join.mutable_node()->set_name("node1");
    join.mutable_node()->set_rank(1);
    join.mutable_node()->set_address("127.0.0.2:7001");
    ASSERT_TRUE(cluster_->OnHeartbeat(join).ok());
    workers_.UpAll();
    service_ = std::make_unique<NodeService>(&workers_, &auth_, cluster_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = internal::Node::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                        grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }

  // A member's call: the secret, unless `secret` says otherwise.
  void Prepare(grpc::ClientContext* ctx, const std::string& secret = kNodeServiceSecret) {
    if (!secret.empty()) ctx->AddMetadata(kClusterSecretKey, secret);
    ctx->set_deadline(std::chrono::system_clock::now() + 10s);
  }
  grpc::Status Leave(const std::string& from, const std::string& group,
                     const std::string& secret = kNodeServiceSecret) {
    grpc::ClientContext ctx;
    Prepare(&ctx, secret);
    internal::NodeLeaveGroupRequest request;
    request.set_device("cpu:0");
    request.set_from_node(from);
    request.mutable_request()->set_group(group);
    internal::LeaveGroupResponse response;
    return stub_->LeaveGroup(&ctx, request, &response);
  }
  // A Run to its end: the status and the last event's kind.
  grpc::Status Run(const internal::NodeRunRequest& request) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    auto reader = stub_->Run(&ctx, request);
    internal::WorkerEvent event;
    while (reader->Read(&event)) {
    }
    return reader->Finish();
  }
  std::shared_ptr<FakeWorkerClient> worker() { return workers_.client("cpu:0"); }

  PeerChannels peers_;
  Authorizer auth_{{}, nullptr};
  FakeWorkers workers_{{"cpu:0"}};
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<NodeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<internal::Node::Stub> stub_;
};

TEST_F(NodeServiceTest, OnlyAMemberWithTheSecretIsServed) {
  grpc::Status s = Leave("node1", "g1", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("came without it"));
  s = Leave("node1", "g1", "another-clusters-secret");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("is not this cluster's"));
  // A name no READY member has (rank 2 never joined), this node's own, none.
  s = Leave("node2", "g1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("from_node node2 is not a READY member"));
  s = Leave("node0", "g1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  s = Leave("", "g1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("from_node"));
  EXPECT_EQ(worker()->leave_group.calls(), 0u);
}

TEST_F(NodeServiceTest, AMemberReachesOnlyItsOwnGroups) {
  // node1 leaving "g1" leaves node1's g1 on this node's worker, never the
  // g1 that this node (or another member) made.
  ASSERT_TRUE(Leave("node1", "g1").ok());
  ASSERT_EQ(worker()->leave_group.calls(), 1u);
  EXPECT_EQ(worker()->leave_group.requests()[0].group(), "node1/g1");
  for (const char* bad : {"", "node0/g1", "../g1", "g 1"}) {
    grpc::Status s = Leave("node1", bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(worker()->leave_group.calls(), 1u);
}

TEST_F(NodeServiceTest, StoresListenAndGlooBindsOnlyWhereTheClusterReachesThisNode) {
  auto prepare = [&](const std::string& host) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    internal::NodePrepareGroupRequest request;
    request.set_device("cpu:0");
    request.set_from_node("node1");
    request.mutable_request()->set_group("g4");
    request.mutable_request()->set_world_size(2);
    request.mutable_request()->set_listen_host(host);
    internal::PrepareGroupResponse response;
    return stub_->PrepareGroup(&ctx, request, &response);
  };
  for (const char* wild : {"0.0.0.0", "", "::", "10.0.0.9"}) {
    grpc::Status s = prepare(wild);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << wild;
    EXPECT_THAT(s.error_message(), HasSubstr("a group's store listens on 127.0.0.1"));
  }
  EXPECT_EQ(worker()->prepare_group.calls(), 0u);
  ASSERT_TRUE(prepare("127.0.0.1").ok());
  EXPECT_EQ(worker()->prepare_group.requests()[0].group(), "node1/g4");
  // Bounded by the service's own deadline, whatever the caller asked.
  EXPECT_LE(worker()->prepare_group.timeouts()[0], kPrepareGroupTimeout);

  auto join = [&](const std::string& local, const std::string& store) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    internal::NodeJoinGroupRequest request;
    request.set_device("cpu:0");
    request.set_from_node("node1");
    request.mutable_request()->set_group("g4");
    request.mutable_request()->set_rank(1);
    request.mutable_request()->set_world_size(2);
    request.mutable_request()->set_local_host(local);
    request.mutable_request()->set_store_host(store);
    request.mutable_request()->set_timeout_seconds(1e9);
    internal::JoinGroupResponse response;
    return stub_->JoinGroup(&ctx, request, &response);
  };
  grpc::Status s = join("0.0.0.0", "127.0.0.2");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("request.local_host"));
  s = join("127.0.0.1", "10.0.0.9");  // a store on no member's host
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("request.store_host"));
  EXPECT_EQ(worker()->join_group.calls(), 0u);
  ASSERT_TRUE(join("127.0.0.1", "127.0.0.2").ok());
  EXPECT_EQ(worker()->join_group.requests()[0].group(), "node1/g4");
  // The caller's deadline (10 s), not the 1e9 s it asked of the group.
  EXPECT_LE(worker()->join_group.timeouts()[0], 11s);
}

TEST_F(NodeServiceTest, ARunIsARankOfTheMembersGroupFiledUnderItsName) {
  internal::NodeRunRequest request;
  request.set_device("cpu:0");
  request.set_from_node("node1");
  request.mutable_run()->set_job_id("1");
  // A job of any other kind is not a member's to run here.
  grpc::Status s = Run(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("has neither"));
  request.mutable_run()->mutable_collective()->set_group("g2");
  request.mutable_run()->set_job_id("../1");
  EXPECT_EQ(Run(request).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(worker()->runs().empty());
  // Its artifacts go to artifacts/node1/1, never into this node's job 1.
  request.mutable_run()->set_job_id("1");
  ASSERT_TRUE(Run(request).ok());
  ASSERT_EQ(worker()->runs().size(), 1u);
  EXPECT_EQ(worker()->runs()[0].job_id(), "node1/1");
  EXPECT_EQ(worker()->runs()[0].collective().group(), "node1/g2");
  request.mutable_run()->clear_collective();
  request.mutable_run()->mutable_ddp()->set_group("t3");
  ASSERT_TRUE(Run(request).ok());
  EXPECT_EQ(worker()->runs()[1].ddp().group(), "node1/t3");
}

TEST_F(NodeServiceTest, AMembersCallsInFlightAreCapped) {
  Gate started;
  worker()->SetDefaultRun(fake::UntilCancelled({}, nullptr));
  internal::NodeRunRequest request;
  request.set_device("cpu:0");
  request.set_from_node("node1");
  request.mutable_run()->mutable_collective()->set_group("g1");
  const int cap = NodeService::kMaxCallsInFlightPerMember;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> calls;
  std::vector<grpc::Status> ends(cap);
  for (int i = 0; i < cap; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->AddMetadata(kClusterSecretKey, kNodeServiceSecret);
    calls.emplace_back([&, i, ctx = contexts.back().get()] {
      auto reader = stub_->Run(ctx, request);
      internal::WorkerEvent event;
      while (reader->Read(&event)) {
      }
      ends[i] = reader->Finish();
    });
  }
  ASSERT_TRUE(worker()->WaitForRuns(cap));
  // One more is refused at once, not queued behind them.
  const auto before = std::chrono::steady_clock::now();
  grpc::Status refused = Run(request);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("node1 already has 16 calls in flight"));
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  EXPECT_EQ(worker()->runs().size(), static_cast<size_t>(cap));
  // The caller going away cancels the worker's runs, and frees the places.
  for (auto& ctx : contexts) ctx->TryCancel();
  for (auto& t : calls) t.join();
  EXPECT_TRUE(worker()->WaitForRunsDone(cap));
  worker()->SetDefaultRun(fake::Stream({}, fake::CollectiveResult()));
  EXPECT_TRUE(Run(request).ok());
}

TEST_F(NodeServiceTest, AMemberKillsOnlyTheWorkerRunningItsRank) {
  auto kill = [&](const std::string& from, internal::NodeKillResponse* response) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    internal::NodeKillRequest request;
    request.set_device("cpu:0");
    request.set_from_node(from);
    request.set_why("no progress for 3 s");
    return stub_->Kill(&ctx, request, response);
  };
  internal::NodeKillResponse response;
  grpc::Status s = kill("node1", &response);  // nothing of node1's runs
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("no Run of node1's is in flight on cpu:0"));
  EXPECT_TRUE(workers_.kills().empty());

  worker()->SetDefaultRun(fake::UntilCancelled());
  const pid_t pid = worker()->pid();
  grpc::ClientContext run_ctx;
  run_ctx.AddMetadata(kClusterSecretKey, kNodeServiceSecret);
  internal::NodeRunRequest run;
  run.set_device("cpu:0");
  run.set_from_node("node1");
  run.mutable_run()->mutable_collective()->set_group("g1");
  std::thread running([&] {
    auto reader = stub_->Run(&run_ctx, run);
    internal::WorkerEvent event;
    while (reader->Read(&event)) {
    }
    reader->Finish();
  });
  ASSERT_TRUE(worker()->WaitForRuns(1));
  // Only by the member whose rank it runs, and bypassing its cap on calls.
  s = kill("node0", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(kill("node1", &response).ok());
  EXPECT_EQ(response.pid(), pid);
  ASSERT_EQ(workers_.kills().size(), 1u);
  EXPECT_THAT(workers_.kills()[0], HasSubstr("for node1's job: no progress for 3 s"));
  run_ctx.TryCancel();
  running.join();
}

}  // namespace
}  // namespace benchd::server
