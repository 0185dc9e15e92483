#include "client/commands.h"

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

TEST(ParseJobState, NamesInAnyCase) {
  EXPECT_EQ(*ParseJobState("queued"), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(*ParseJobState("Succeeded"), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(*ParseJobState("INTERRUPTED"), v1::JOB_STATE_INTERRUPTED);
  EXPECT_EQ(ParseJobState("done").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseJobState("job_state_unspecified").ok());
}

TEST(ErrorMessage, CodeNameUnlessTheMessageSpeaksForItself) {
  EXPECT_EQ(
      ErrorMessage(absl::InvalidArgumentError("benchmark.batch_size: expected 1..65536, got 0")),
      "benchmark.batch_size: expected 1..65536, got 0");
  EXPECT_EQ(ErrorMessage(absl::UnavailableError("cannot reach benchd at x")),
            "cannot reach benchd at x");
  EXPECT_EQ(ErrorMessage(absl::NotFoundError("no job j9")), "NOT_FOUND: no job j9");
  EXPECT_EQ(ErrorMessage(absl::UnimplementedError("profile")), "UNIMPLEMENTED: profile");
}

}  // namespace
}  // namespace benchd::client
