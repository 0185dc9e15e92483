// The reflection the daemon serves, over a real in-process server and the
// reflection stub, as grpcurl would ask.
#include "server/api/public_reflection.h"

#include "benchd/internal/worker.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class PublicReflectionTest : public ::testing::Test {
 protected:
  PublicReflectionTest() : service_(NewPublicReflection()) {
    // The internal service is linked into this binary, as into the daemon.
    EXPECT_NE(internal::RunRequest::descriptor(), nullptr);
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = ServerReflection::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  ~PublicReflectionTest() override { server_->Shutdown(); }

  // Sends each request on one stream and returns the answers in order.
  std::vector<ServerReflectionResponse> Ask(const std::vector<ServerReflectionRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->ServerReflectionInfo(&ctx);
    std::vector<ServerReflectionResponse> out;
    for (const auto& r : requests) {
      EXPECT_TRUE(stream->Write(r));
      ServerReflectionResponse response;
      EXPECT_TRUE(stream->Read(&response));
      out.push_back(std::move(response));
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    return out;
  }

  static std::vector<std::string> FileNames(const ServerReflectionResponse& r) {
    std::vector<std::string> names;
    for (const auto& bytes : r.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.push_back(file.name());
    }
    return names;
  }

  std::unique_ptr<PublicReflection> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ServerReflection::Stub> stub_;
};

TEST_F(PublicReflectionTest, ListsAndDescribesThePublicApiOnly) {
  ServerReflectionRequest list, bench, job_spec, worker, worker_file, by_name;
  list.set_list_services("");
  bench.set_file_containing_symbol("benchd.v1.Bench");
  job_spec.set_file_containing_symbol("benchd.v1.JobSpec");
  worker.set_file_containing_symbol("benchd.internal.Worker");
  worker_file.set_file_by_filename("benchd/internal/worker.proto");
  by_name.set_file_by_filename("benchd/v1/bench.proto");
  const auto answers = Ask({list, bench, job_spec, worker, worker_file, by_name});

  std::vector<std::string> services;
  for (const auto& s : answers[0].list_services_response().service()) services.push_back(s.name());
  EXPECT_THAT(services, ElementsAre("benchd.v1.Bench", "grpc.health.v1.Health",
                                    "grpc.reflection.v1alpha.ServerReflection"));
  // Imports first, then the file.
  EXPECT_THAT(FileNames(answers[1]),
              ElementsAre("google/protobuf/timestamp.proto", "benchd/v1/bench.proto"));
  EXPECT_THAT(FileNames(answers[2]), Contains("benchd/v1/bench.proto"));
  for (const auto& hidden : {answers[3], answers[4]}) {
    EXPECT_EQ(hidden.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(FileNames(hidden), Not(Contains("benchd/internal/worker.proto")));
  }
  EXPECT_THAT(answers[3].error_response().error_message(),
              HasSubstr("symbol not found: benchd.internal.Worker"));
  EXPECT_THAT(FileNames(answers[5]), Contains("benchd/v1/bench.proto"));
  EXPECT_EQ(answers[5].original_request().file_by_filename(), "benchd/v1/bench.proto");
}

TEST_F(PublicReflectionTest, ExtensionQueriesAreAnsweredNotFound) {
  ServerReflectionRequest ext;
  ext.set_all_extension_numbers_of_type("benchd.v1.JobSpec");
  const auto answers = Ask({ext});
  EXPECT_EQ(answers[0].error_response().error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace benchd::server
