// BenchService's calls that need workers, in-process over fake workers.
#include "server/bench_service.h"

#include <dirent.h>

#include <limits>

#include "common/number_fields_test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/fake_worker_client.h"

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

TEST_F(BenchServiceTest, NodeInfoHasEveryDeviceWithFreshFiguresFromWorkersThatAnswer) {
  workers_.Up("cpu:0")->get_info.Return(Free(111));
  workers_.Up("cpu:1")->get_info.MissDeadline();
  // cpu:2's worker is down: not asked.
  auto down = workers_.Up("cpu:2");
  workers_.Exit("cpu:2", "exited with code 1");

  grpc::ClientContext ctx;
  v1::NodeInfo info;
  const grpc::Status status = stub_->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(info.devices_size(), 3);
  EXPECT_EQ(info.devices(0).name(), "cpu:0");
  EXPECT_EQ(info.devices(0).free_memory_bytes(), 111);
  EXPECT_EQ(info.devices(0).total_memory_bytes(), 222);
  EXPECT_EQ(info.devices(0).worker_state(), v1::WORKER_STATE_UP);
  EXPECT_EQ(info.devices(1).free_memory_bytes(), 0);  // did not answer in time
  EXPECT_EQ(info.devices(2).worker_state(), v1::WORKER_STATE_DOWN);
  EXPECT_EQ(down->get_info.calls(), 0u);
  EXPECT_EQ(info.versions().torch(), "fake-torch");
  EXPECT_FALSE(info.versions().benchd().empty());
  EXPECT_EQ(info.data_dir(), "/data");
  EXPECT_EQ(workers_.client("cpu:0")->get_info.timeouts().at(0),
            std::chrono::milliseconds(kNodeInfoTimeout));
}

TEST_F(BenchServiceTest, NodeInfoWaitsForTheLastWorkerWithoutHoldingTheOthers) {
  Gate release;
  workers_.Up("cpu:0")->get_info.Return(Free(1));
  auto held = workers_.Up("cpu:1");
  held->get_info.Set([&](const internal::GetInfoRequest&) -> absl::StatusOr<internal::WorkerInfo> {
    if (!release.Wait()) return absl::DeadlineExceededError("Deadline Exceeded");
    return Free(2);
  });
  workers_.Up("cpu:2")->get_info.Return(Free(3));

  Gate done;
  grpc::ClientContext ctx;
  const v1::GetNodeInfoRequest req;
  v1::NodeInfo info;
  grpc::Status status;
  stub_->async()->GetNodeInfo(&ctx, &req, &info, [&](grpc::Status s) {
    status = std::move(s);
    done.Open();
  });
  // Every worker has been asked while cpu:1 still holds its answer, and the
  // call is not finished before it answers.
  ASSERT_TRUE(workers_.client("cpu:2")->get_info.WaitForCalls(1));
  ASSERT_TRUE(held->get_info.WaitForCalls(1));
  EXPECT_FALSE(done.is_open());
  // Meanwhile the service answers other calls.
  grpc::ClientContext other;
  v1::ListGroupsResponse groups;
  EXPECT_TRUE(stub_->ListGroups(&other, v1::ListGroupsRequest(), &groups).ok());
  release.Open();
  ASSERT_TRUE(done.Wait());
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(info.devices_size(), 3);
  EXPECT_EQ(info.devices(1).free_memory_bytes(), 2);
  EXPECT_EQ(info.devices(2).free_memory_bytes(), 3);
}

// Every request of the Bench service whose float or double fields some
// boundary checks for NaN and inf (ResolveJobSpec for Submit's spec,
// GroupRegistry::CheckRequest for CreateGroup; their tests walk the fields
// through the descriptors). A number added to another request fails here
// until it is checked at its boundary too.
TEST(RequestNumbersTest, EveryRequestWithANumberFieldIsChecked) {
  const google::protobuf::ServiceDescriptor* service =
      v1::SubmitRequest::descriptor()->file()->FindServiceByName("Bench");
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::Descriptor* in = service->method(i)->input_type();
    if (testing::NumberFieldPaths(in).empty()) continue;
    EXPECT_TRUE(in == v1::SubmitRequest::descriptor() || in == v1::CreateGroupRequest::descriptor())
        << service->method(i)->name() << "'s " << in->full_name()
        << " has float/double fields that no boundary checks for NaN/inf";
  }
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

}  // namespace
}  // namespace benchd::server
