#include "client/progress.h"

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

v1::JobEvent StepEvent(bool warmup, int64_t index, int64_t total, double seconds) {
  v1::JobEvent e;
  e.set_job_id("j1");
  v1::StepEvent* s = warmup ? e.mutable_warmup_step() : e.mutable_step();
  s->mutable_timing()->set_index(index);
  s->mutable_timing()->set_warmup(warmup);
  s->mutable_timing()->set_step_seconds(seconds);
  s->set_total_steps(total);
  return e;
}

TEST(Progress, WarmupThenMeasuredWithRunningMedian) {
  Progress p("j1");
  EXPECT_EQ(p.BarLine(), "j1  waiting for events");
  v1::JobEvent queued;
  queued.mutable_queued()->set_id("j1");
  p.Observe(queued);
  EXPECT_EQ(p.BarLine(), "j1  queued");
  EXPECT_EQ(p.PlainLine(queued), "job j1 queued");

  v1::JobEvent started;
  started.mutable_started()->add_devices("cuda:0");
  p.Observe(started);
  EXPECT_EQ(p.BarLine(), "j1  running on cuda:0");

  p.Observe(StepEvent(true, 0, 10, 0.100));
  EXPECT_EQ(p.BarLine(),
            "j1  warm-up  1/10 [##..................]  last 100.000 ms  median 100.000 ms");
  // The measured phase's median starts afresh: warm-up times would skew it.
  p.Observe(StepEvent(false, 1, 10, 0.010));
  p.Observe(StepEvent(false, 2, 10, 0.030));
  const v1::JobEvent third = StepEvent(false, 3, 10, 0.012);
  p.Observe(third);
  EXPECT_EQ(p.BarLine(),
            "j1  measure  4/10 [########............]  last 12.000 ms  median 12.000 ms");
  EXPECT_EQ(p.PlainLine(third), "measure 4/10  step 12.000 ms  median 12.000 ms");
  EXPECT_FALSE(p.terminal());

  v1::JobEvent done;
  done.mutable_result()->set_state(v1::JOB_STATE_SUCCEEDED);
  p.Observe(done);
  EXPECT_TRUE(p.terminal());
  EXPECT_TRUE(IsTerminal(done));
  EXPECT_EQ(TerminalJob(done).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST(Progress, LogsPassThrough) {
  Progress p("j1");
  v1::JobEvent log;
  log.set_log("building model");
  EXPECT_EQ(p.PlainLine(log), "building model");
  EXPECT_FALSE(IsTerminal(log));
}

TEST(FitToWidth, LeavesOneColumnSpare) {
  EXPECT_EQ(FitToWidth("abcdef", 80), "abcdef");
  EXPECT_EQ(FitToWidth("abcdef", 6), "abcde");
  EXPECT_EQ(FitToWidth("abcdef", 0), "abcdef");
}

}  // namespace
}  // namespace benchd::client
