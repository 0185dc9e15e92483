#include "client/exit_codes.h"

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

TEST(ExitCodes, RpcCodes) {
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::OK), 0);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::INVALID_ARGUMENT), 2);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::UNAVAILABLE), 3);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::NOT_FOUND), 4);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::UNIMPLEMENTED), 4);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::DEADLINE_EXCEEDED), 4);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::FAILED_PRECONDITION), 4);
  EXPECT_EQ(ExitCodeForRpc(grpc::StatusCode::INTERNAL), 4);
}

TEST(ExitCodes, AbslStatusUsesTheSameNumbers) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError("x")), kExitUsage);
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("x")), kExitUnreachable);
  EXPECT_EQ(ExitCodeForStatus(absl::NotFoundError("x")), kExitRpcError);
}

TEST(ExitCodes, JobStates) {
  EXPECT_EQ(ExitCodeForJobState(v1::JOB_STATE_SUCCEEDED), 0);
  EXPECT_EQ(ExitCodeForJobState(v1::JOB_STATE_FAILED), 1);
  EXPECT_EQ(ExitCodeForJobState(v1::JOB_STATE_CANCELLED), 1);
  EXPECT_EQ(ExitCodeForJobState(v1::JOB_STATE_INTERRUPTED), 1);
  EXPECT_EQ(ExitCodeForJobState(v1::JOB_STATE_RUNNING), 4);
}

}  // namespace
}  // namespace benchd::client
