#include "client/csv.h"

#include <gtest/gtest.h>

#include "client/test_job.h"

namespace benchd::client {
namespace {

TEST(StepsCsv, HeaderAndOneRowPerStep) {
  EXPECT_EQ(StepsCsv(testing::MakeSucceededJob()),
            "job_id,index,warmup,step_s,host_s,forward_s,backward_s,optimizer_s,loss\n"
            "j42,0,true,0.0301,0.0305,0.01,0.018,0.0021,9.25\n"
            "j42,1,false,0.0125,0.0127,0.004,0.0075,0.001,9.2\n"
            "j42,2,false,0.0125,0.0128,0.004,0.0076,0.0009,9.125\n");
}

TEST(StepsCsv, JobWithoutResultIsJustTheHeader) {
  v1::Job job;
  job.set_id("j1");
  job.set_state(v1::JOB_STATE_FAILED);
  EXPECT_EQ(StepsCsv(job), std::string(kStepsCsvHeader) + "\n");
}

TEST(CsvField, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
}

}  // namespace
}  // namespace benchd::client
