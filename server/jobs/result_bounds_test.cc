// The largest result the limits allow (100,000 measured steps; a collective of
// 64 sizes x 100,000 iterations) stays well under gRPC's default 4 MB reply.
#include "server/jobs/result_bounds.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

constexpr size_t kDefaultClientLimit = 4 << 20;

class ResultBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "benchd-bounds-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Read(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

// A benchmark job with `steps` steps (every field set, as the worker sends).
v1::Job BenchmarkJob(int64_t steps) {
  v1::Job job;
  job.set_id("7");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  v1::BenchmarkResult* r = job.mutable_result()->mutable_benchmark();
  for (int64_t i = 0; i < steps; ++i) {
    v1::StepTiming* t = r->add_steps();
    t->set_index(i);
    t->set_warmup(i < 5);
    t->set_step_seconds(0.0123456789 + i * 1e-9);
    t->set_host_seconds(0.0133456789);
    t->set_forward_seconds(0.0043456789);
    t->set_backward_seconds(0.0063456789);
    t->set_optimizer_seconds(0.0013456789);
    t->set_loss(6.9123456);
  }
  r->mutable_step()->set_count(steps - 5);
  r->mutable_step()->set_median(0.0123);
  r->set_tokens_per_second(41000);
  return job;
}

TEST_F(ResultBoundsTest, AHundredThousandStepsKeepTheFirstThousandAndWriteEveryStep) {
  v1::Job job = BenchmarkJob(kMaxSteps);
  ASSERT_GT(job.ByteSizeLong(), kDefaultClientLimit);  // what the daemon stored before
  const v1::Stats before = job.result().benchmark().step();
  ASSERT_TRUE(BoundJobResult(&job, dir_).ok());
  const v1::BenchmarkResult& r = job.result().benchmark();
  EXPECT_LT(job.ByteSizeLong(), 200u << 10);
  EXPECT_EQ(r.steps_size(), kMaxResultSteps);
  EXPECT_EQ(r.steps(999).index(), 999);
  EXPECT_EQ(r.steps_total(), kMaxSteps);
  EXPECT_EQ(r.steps_artifact(), kStepsArtifact);
  EXPECT_EQ(r.step().SerializeAsString(), before.SerializeAsString());  // the worker's, over all
  EXPECT_EQ(r.tokens_per_second(), 41000);
  const std::string csv = Read(dir_ + "/7/steps.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), kMaxSteps + 1);  // + the header
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "index,warmup,step_seconds,host_seconds,forward_seconds,backward_seconds,"
            "optimizer_seconds,loss");
  EXPECT_NE(csv.find("\n99999,0,"), std::string::npos);
  EXPECT_NE(csv.find("\n0,1,0.0123456789,"), std::string::npos);
}

TEST_F(ResultBoundsTest, ASmallResultIsUntouched) {
  v1::Job job = BenchmarkJob(kMaxResultSteps);
  const std::string before = job.SerializeAsString();
  ASSERT_TRUE(BoundJobResult(&job, dir_).ok());
  EXPECT_EQ(job.SerializeAsString(), before);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/7"));
}

TEST_F(ResultBoundsTest, WithNowhereToWriteTheStepsAreStillCutAndTheResultSaysSo) {
  v1::Job job = BenchmarkJob(5000);
  absl::Status s = BoundJobResult(&job, "");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(job.result().benchmark().steps_size(), kMaxResultSteps);
  EXPECT_EQ(job.result().benchmark().steps_total(), 5000);
  EXPECT_EQ(job.result().benchmark().steps_artifact(), "");
}

TEST_F(ResultBoundsTest, AProfilesUnprofiledRunIsCutToo) {
  v1::Job job = BenchmarkJob(kMaxSteps);
  const v1::BenchmarkResult run = job.result().benchmark();
  *job.mutable_result()->mutable_profile()->mutable_unprofiled() = run;
  ASSERT_TRUE(BoundJobResult(&job, dir_).ok());
  EXPECT_EQ(job.result().profile().unprofiled().steps_size(), kMaxResultSteps);
  EXPECT_EQ(job.result().profile().unprofiled().steps_artifact(), kUnprofiledStepsArtifact);
  EXPECT_LT(job.ByteSizeLong(), 200u << 10);
}

TEST_F(ResultBoundsTest, AnyOtherLargeResultKeepsItsSummaryAndGoesWholeToAnArtifact) {
  v1::Job job;
  job.set_id("9");
  v1::CollectiveResult* c = job.mutable_result()->mutable_collective();
  c->set_wrong_elements(0);
  c->mutable_versions()->set_torch("2.11.0");
  for (int row = 0; row < kMaxCollectiveSizes; ++row) {
    v1::CollectiveRow* r = c->add_rows();
    r->set_size_bytes(int64_t{1} << row % 40);
    for (int i = 0; i < 100000; ++i) r->add_iteration_seconds(1e-5 * i);
  }
  const std::string whole = job.result().SerializeAsString();
  ASSERT_GT(whole.size(), 40u << 20);
  ASSERT_TRUE(BoundJobResult(&job, dir_).ok());
  EXPECT_LT(job.ByteSizeLong(), kMaxStoredJobBytes);
  EXPECT_EQ(job.result().collective().rows_size(), 0);
  EXPECT_EQ(job.result().collective().versions().torch(), "2.11.0");
  EXPECT_EQ(job.result().artifact(), kResultArtifact);
  v1::JobResult read;
  ASSERT_TRUE(read.ParseFromString(Read(dir_ + "/9/result.binpb")));
  EXPECT_EQ(read.SerializeAsString(), whole);
}

}  // namespace
}  // namespace benchd::server
