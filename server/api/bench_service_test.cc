// BenchService's calls that need workers, in-process over fake workers.
#include "server/api/bench_service.h"

#include <dirent.h>

#include <limits>

#include "common/number_fields_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {
namespace {

class BenchServiceTest : public ::testing::Test {
 protected:
  BenchServiceTest()
      : workers_({"cpu:0", "cpu:1", "cpu:2"}),
        service_(nullptr, nullptr, &workers_, {"/data", "127.0.0.1:9531", "/data/artifacts"}) {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    stub_ = v1::Bench::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  ~BenchServiceTest() override { server_->Shutdown(); }

  static internal::WorkerInfo Free(int64_t bytes) {
    internal::WorkerInfo info;
    info.mutable_device()->set_free_memory_bytes(bytes);
    info.mutable_device()->set_total_memory_bytes(bytes * 2);
    return info;
  }

  FakeWorkers workers_;
  BenchService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Bench::Stub> stub_;
};

// GetNodeInfo answers from what the daemon holds: no worker is asked, so a
// stopped one cannot hold it; each device says where its worker stands.
TEST_F(BenchServiceTest, NodeInfoAnswersFromHeldStateWithoutAskingWorkers) {
  auto up = workers_.Up("cpu:0");
  auto silent = workers_.Up("cpu:1");
  workers_.SetUnresponsive("cpu:1", "has not answered its heartbeat for 12.0 s");
  workers_.FailStarts("cpu:2", "exited with code 1");

  grpc::ClientContext ctx;
  v1::NodeInfo info;
  const grpc::Status status = stub_->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(info.devices_size(), 3);
  EXPECT_EQ(info.devices(0).name(), "cpu:0");
  EXPECT_EQ(info.devices(0).worker_state(), v1::WORKER_STATE_UP);
  EXPECT_EQ(info.devices(1).worker_state(), v1::WORKER_STATE_UNRESPONSIVE);
  EXPECT_EQ(info.devices(2).worker_state(), v1::WORKER_STATE_DOWN);
  EXPECT_EQ(up->get_info.calls() + silent->get_info.calls(), 0u);
  EXPECT_EQ(info.versions().torch(), "fake-torch");
  EXPECT_FALSE(info.versions().benchd().empty());
  EXPECT_EQ(info.data_dir(), "/data");
}

// Issue 36: "on behalf of" metadata was honoured from any admin caller (here,
// with no authorizer, every caller): outside a cluster no caller is a member,
// so a call carrying it is refused naming the key, not served as another.
TEST_F(BenchServiceTest, OnBehalfMetadataFromACallerThatIsNoMemberIsRefused) {
  for (const char* key : {"benchd-on-behalf-of", "benchd-on-behalf-role"}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(key, std::string(key) == "benchd-on-behalf-of" ? "alice" : "submit");
    ctx.AddMetadata("benchd-cluster-secret", "the-cluster-secret-0123");
    v1::NodeInfo info;
    const grpc::Status status = stub_->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &info);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << key;
    EXPECT_THAT(status.error_message(),
                ::testing::StartsWith(std::string(key) + ": a call may say on whose behalf"));
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr("this daemon is in no cluster"));
  }
  grpc::ClientContext plain;
  v1::NodeInfo info;
  EXPECT_TRUE(stub_->GetNodeInfo(&plain, v1::GetNodeInfoRequest(), &info).ok());
}

// ListModels asks every worker at once and finishes with the last answer;
// while one holds its answer, the service answers other calls.
TEST_F(BenchServiceTest, ListModelsWaitsForTheLastWorkerWithoutHoldingTheService) {
  Gate release;
  v1::ListModelsResponse one;
  one.add_models()->set_key("cpu:0/tiny/fp32");
  workers_.Up("cpu:0")->list_models.Return(one);
  auto held = workers_.Up("cpu:1");
  held->list_models.Set(
      [&](const v1::ListModelsRequest&) -> absl::StatusOr<v1::ListModelsResponse> {
        if (!release.Wait()) return absl::DeadlineExceededError("Deadline Exceeded");
        v1::ListModelsResponse r;
        r.add_models()->set_key("cpu:1/tiny/fp32");
        return r;
      });
  // cpu:2's worker is down: it holds nothing and is not asked.

  Gate done;
  grpc::ClientContext ctx;
  const v1::ListModelsRequest req;
  v1::ListModelsResponse models;
  grpc::Status status;
  stub_->async()->ListModels(&ctx, &req, &models, [&](grpc::Status s) {
    status = std::move(s);
    done.Open();
  });
  ASSERT_TRUE(held->list_models.WaitForCalls(1));
  EXPECT_FALSE(done.is_open());
  grpc::ClientContext other;
  v1::NodeInfo info;
  EXPECT_TRUE(stub_->GetNodeInfo(&other, v1::GetNodeInfoRequest(), &info).ok());
  release.Open();
  ASSERT_TRUE(done.Wait());
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(models.models_size(), 2);
  EXPECT_EQ(models.models(0).key(), "cpu:0/tiny/fp32");
  EXPECT_EQ(models.models(1).key(), "cpu:1/tiny/fp32");
  EXPECT_EQ(workers_.client("cpu:0")->list_models.timeouts().at(0),
            std::chrono::milliseconds(kListModelsTimeout));
}

// A worker that stopped answering fails the calls that need it at once,
// naming it, instead of holding them until a deadline.
TEST_F(BenchServiceTest, CallsNeedingAnUnresponsiveWorkerFailAtOnce) {
  workers_.UpAll();
  workers_.SetUnresponsive("cpu:1", "has not answered its heartbeat for 12.0 s");
  for (const std::string& device : {std::string(), std::string("cpu:1")}) {
    grpc::ClientContext ctx;
    v1::ListModelsRequest req;
    req.set_device(device);
    v1::ListModelsResponse models;
    const grpc::Status s = stub_->ListModels(&ctx, req, &models);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(),
                ::testing::HasSubstr("the worker for cpu:1 (pid 1101) has not answered"));
  }
  grpc::ClientContext evict_ctx;
  v1::EvictModelRequest evict;
  evict.set_key("cpu:1/tiny/fp32");
  v1::EvictModelResponse evicted;
  EXPECT_EQ(stub_->EvictModel(&evict_ctx, evict, &evicted).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(workers_.client("cpu:1")->list_models.calls(), 0u);
  EXPECT_EQ(workers_.client("cpu:1")->evict_model.calls(), 0u);
  // Another device's model is still evicted.
  v1::EvictModelResponse one;
  one.set_evicted(1);
  workers_.client("cpu:0")->evict_model.Return(one);
  grpc::ClientContext ok_ctx;
  evict.set_key("cpu:0/tiny/fp32");
  ASSERT_TRUE(stub_->EvictModel(&ok_ctx, evict, &evicted).ok());
  EXPECT_EQ(evicted.evicted(), 1);
}

// Every request of the Bench service whose float or double fields some
// boundary checks for NaN and inf (ResolveJobSpec for Submit's spec,
// GroupRegistry::CheckRequest for CreateGroup, ResolveEstimateRequest for
// Estimate's; their tests walk the fields
// through the descriptors). A number added to another request fails here
// until it is checked at its boundary too.
TEST(RequestNumbersTest, EveryRequestWithANumberFieldIsChecked) {
  const google::protobuf::ServiceDescriptor* service =
      v1::SubmitRequest::descriptor()->file()->FindServiceByName("Bench");
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::Descriptor* in = service->method(i)->input_type();
    if (testing::NumberFieldPaths(in).empty()) continue;
    EXPECT_TRUE(in == v1::SubmitRequest::descriptor() ||
                in == v1::CreateGroupRequest::descriptor() ||
                in == v1::EstimateRequest::descriptor())
        << service->method(i)->name() << "'s " << in->full_name()
        << " has float/double fields that no boundary checks for NaN/inf";
  }
}

// Estimate is answered by the daemon itself: no worker is asked, even with
// every worker down; bad input is INVALID_ARGUMENT naming the field.
TEST_F(BenchServiceTest, EstimateNeedsNoWorker) {
  grpc::ClientContext ctx;
  v1::EstimateRequest req;
  req.mutable_model()->set_preset("2.7B");
  req.set_batch_size(4);
  req.set_context_length(256);
  v1::MemoryEstimate e;
  const grpc::Status s = stub_->Estimate(&ctx, req, &e);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(e.residual_stream().bytes(), 10'485'760);
  EXPECT_EQ(e.request().model().d_model(), 2560);
  EXPECT_GT(e.total_bytes(), 4 * int64_t{3'406'809'600});

  grpc::ClientContext bad_ctx;
  req.mutable_model()->set_rope_theta(std::numeric_limits<double>::quiet_NaN());
  const grpc::Status bad = stub_->Estimate(&bad_ctx, req, &e);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(),
              ::testing::HasSubstr("model.rope_theta: expected a finite number"));
}

// The one gate checks every request's sizes and unknown fields before the
// call's own work: a Submit's envelope too (its JobSpec keeps the paths users
// know, checked by ResolveJobSpec), and the calls that had no check before
// it. This fixture has no JobManager: a Submit let through would crash.
TEST_F(BenchServiceTest, TheGateRefusesUnknownFieldsOfEveryRequestNamingThem) {
  v1::SubmitRequest submit;
  submit.mutable_spec()->set_device("cpu:0");
  submit.GetReflection()->MutableUnknownFields(&submit)->AddVarint(4242, 1);
  grpc::ClientContext submit_ctx;
  v1::Job job;
  const grpc::Status refused = stub_->Submit(&submit_ctx, submit, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("SubmitRequest: field number 4242 is not a field of "
                                   "benchd.v1.SubmitRequest"));
  // The gate checks a Submit's envelope as its unknown fields alone (no copy
  // of the spec): a field added beside the spec must be checked there too.
  EXPECT_EQ(v1::SubmitRequest::descriptor()->field_count(), 1)
      << "SubmitRequest has a field besides the spec: check it in CheckRequestSize "
         "(server/api/bench_service.cc)";

  v1::ListGroupsRequest groups;
  groups.GetReflection()->MutableUnknownFields(&groups)->AddVarint(77, 1);
  grpc::ClientContext groups_ctx;
  v1::ListGroupsResponse listed;
  const grpc::Status groups_refused = stub_->ListGroups(&groups_ctx, groups, &listed);
  EXPECT_EQ(groups_refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(groups_refused.error_message(), ::testing::HasSubstr("field number 77"));

  // Without a cluster, a node-prefixed job id is this node's (bad) id.
  grpc::ClientContext get_ctx;
  v1::GetJobRequest get;
  get.set_job_id("node1/7");
  const grpc::Status not_forwarded = stub_->GetJob(&get_ctx, get, &job);
  EXPECT_EQ(not_forwarded.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(not_forwarded.error_message(), ::testing::HasSubstr("job_id"));
}

int CountThreads() {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

// A refused CreateGroup starts nothing: no thread is left behind.
TEST_F(BenchServiceTest, RefusedCreateGroupLeavesNoThread) {
  workers_.UpAll();
  GroupRegistry groups(&workers_, nullptr, {"cpu:0", "cpu:1", "cpu:2"});
  BenchService service(nullptr, nullptr, &workers_, {"/data", "", "/data/artifacts"}, &groups);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  auto stub = v1::Bench::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  auto call = [&](double timeout) {
    v1::CreateGroupRequest req;
    req.add_devices("cpu:0");
    req.add_devices("cpu:1");
    req.set_timeout_seconds(timeout);
    grpc::ClientContext ctx;
    v1::Group group;
    return stub->CreateGroup(&ctx, req, &group);
  };
  ASSERT_EQ(call(-1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // warms gRPC up
  const int before = CountThreads();
  for (int i = 0; i < 200; ++i) {
    const grpc::Status s = call(i % 2 ? -1 : std::numeric_limits<double>::quiet_NaN());
    ASSERT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    ASSERT_THAT(s.error_message(), ::testing::HasSubstr("timeout_seconds: expected"));
  }
  EXPECT_LE(CountThreads(), before + 4);
  EXPECT_EQ(workers_.client("cpu:0")->prepare_group.calls(), 0u);
  // A good one runs on its own thread, which ends with the call.
  EXPECT_TRUE(call(0).ok());
  EXPECT_EQ(groups.List().size(), 1u);
  server->Shutdown();
}

// Group operations wait on workers (the rendezvous, leaving): each runs on a
// thread of its own, a bounded number at once; beyond that, and for a member
// that does not answer, the call is refused at once.
TEST_F(BenchServiceTest, GroupOperationsAreBoundedAndRefuseAnUnresponsiveMember) {
  workers_.UpAll();
  GroupRegistry groups(&workers_, nullptr, {"cpu:0", "cpu:1", "cpu:2"});
  BenchService service(nullptr, nullptr, &workers_, {"/data", "", "/data/artifacts"}, &groups);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  auto stub = v1::Bench::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  Gate release;
  workers_.client("cpu:0")->prepare_group.Set(
      [&](const internal::PrepareGroupRequest&) -> absl::StatusOr<internal::PrepareGroupResponse> {
        release.Wait();
        internal::PrepareGroupResponse r;
        r.set_store_host("127.0.0.1");
        r.set_store_port(29500);
        return r;
      });
  v1::CreateGroupRequest req;
  req.add_devices("cpu:0");
  req.add_devices("cpu:1");
  struct Pending {
    grpc::ClientContext ctx;
    v1::Group group;
    grpc::Status status;
    Gate done;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (int i = 0; i < BenchService::kMaxGroupOperations; ++i) {
    auto p = std::make_unique<Pending>();
    Pending* raw = p.get();
    stub->async()->CreateGroup(&raw->ctx, &req, &raw->group, [raw](grpc::Status s) {
      raw->status = std::move(s);
      raw->done.Open();
    });
    pending.push_back(std::move(p));
  }
  ASSERT_TRUE(workers_.client("cpu:0")->prepare_group.WaitForCalls(
      static_cast<size_t>(BenchService::kMaxGroupOperations)));
  grpc::ClientContext over_ctx;
  v1::Group over;
  const grpc::Status refused = stub->CreateGroup(&over_ctx, req, &over);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("group operations"));
  grpc::ClientContext destroy_ctx;
  v1::DestroyGroupRequest destroy;
  destroy.set_group("g1");
  v1::DestroyGroupResponse destroyed;
  EXPECT_EQ(stub->DestroyGroup(&destroy_ctx, destroy, &destroyed).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  release.Open();
  for (auto& p : pending) {
    ASSERT_TRUE(p->done.Wait());
    EXPECT_TRUE(p->status.ok()) << p->status.error_message();
  }

  workers_.SetUnresponsive("cpu:2", "has not answered its heartbeat for 12.0 s");
  v1::CreateGroupRequest with_silent;
  with_silent.add_devices("cpu:0");
  with_silent.add_devices("cpu:2");
  grpc::ClientContext silent_ctx;
  v1::Group silent;
  const grpc::Status unavailable = stub->CreateGroup(&silent_ctx, with_silent, &silent);
  EXPECT_EQ(unavailable.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(unavailable.error_message(), ::testing::HasSubstr("the worker for cpu:2"));
  server->Shutdown();
}

}  // namespace
}  // namespace benchd::server
