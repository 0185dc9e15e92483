#include "server/core/job_state.h"

#include "gtest/gtest.h"
#include "server/core/timestamp.h"

namespace benchd::server {
namespace {

TEST(JobStateTest, FinalStatesAndTheirNames) {
  EXPECT_FALSE(IsFinal(v1::JOB_STATE_UNSPECIFIED));
  EXPECT_FALSE(IsFinal(v1::JOB_STATE_QUEUED));
  EXPECT_FALSE(IsFinal(v1::JOB_STATE_RUNNING));
  for (auto s : {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED,
                 v1::JOB_STATE_INTERRUPTED}) {
    EXPECT_TRUE(IsFinal(s)) << JobStateName(s);
  }
  EXPECT_EQ(JobStateName(v1::JOB_STATE_QUEUED), "queued");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_INTERRUPTED), "interrupted");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_UNSPECIFIED), "unspecified");
}

TEST(JobStateTest, EachFinalStateEndsTheStreamWithItsOwnEvent) {
  const std::pair<v1::JobState, v1::JobEvent::EventCase> cases[] = {
      {v1::JOB_STATE_SUCCEEDED, v1::JobEvent::kResult},
      {v1::JOB_STATE_FAILED, v1::JobEvent::kFailed},
      {v1::JOB_STATE_CANCELLED, v1::JobEvent::kCancelled},
      {v1::JOB_STATE_INTERRUPTED, v1::JobEvent::kInterrupted},
  };
  for (const auto& [state, event_case] : cases) {
    v1::Job job;
    job.set_id("7");
    job.set_state(state);
    v1::JobEvent e;
    SetTerminalEvent(job, &e);
    EXPECT_EQ(e.event_case(), event_case) << JobStateName(state);
  }
  v1::Job succeeded;
  succeeded.set_state(v1::JOB_STATE_SUCCEEDED);
  succeeded.mutable_result()->mutable_benchmark()->set_tokens_per_second(5);
  v1::JobEvent e;
  SetTerminalEvent(succeeded, &e);
  EXPECT_EQ(e.result().result().benchmark().tokens_per_second(), 5);  // the whole job
}

TEST(JobStateTest, NowHasSubSecondPrecision) {
  const google::protobuf::Timestamp a = Now();
  EXPECT_GT(a.seconds(), 1700000000);
  // Nanoseconds are kept (protobuf 3.21's TimeUtil has whole seconds only).
  bool fractional = a.nanos() != 0;
  for (int i = 0; i < 100 && !fractional; ++i) fractional = Now().nanos() != 0;
  EXPECT_TRUE(fractional);
}

}  // namespace
}  // namespace benchd::server
