#include "common/ddp_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace benchd {
namespace {

TEST(AssignBucketsTest, ReverseOrderPackedUpToTheBucketSize) {
  // bytes of parameters 0..4 in model order
  const std::vector<int64_t> bytes = {40, 10, 30, 20, 100};
  // 100 alone; 20 + 30 = 50 fits; 10 + 40 = 50 fits.
  EXPECT_EQ(AssignBuckets(bytes, 50), (std::vector<std::vector<size_t>>{{4}, {3, 2}, {1, 0}}));
  EXPECT_EQ(AssignBuckets(bytes, 49), (std::vector<std::vector<size_t>>{{4}, {3}, {2, 1}, {0}}));
  EXPECT_EQ(AssignBuckets(bytes, 1000), (std::vector<std::vector<size_t>>{{4, 3, 2, 1, 0}}));
  EXPECT_EQ(AssignBuckets(bytes, 1).size(), 5u);  // each its own, the big ones too
}

TEST(ReducerBucketsTest, ReadyOrderClosedOnceAtTheLimitFirstBucketSmall) {
  const std::vector<int64_t> bytes = {40, 10, 30, 20, 100};
  const std::vector<size_t> ready = {4, 3, 2, 1, 0};
  // Under 1 MiB the first bucket's limit is the bucket size too: 100 >= 50
  // closes it; 20 + 30 = 50 closes; 10 + 40 = 50 closes.
  EXPECT_EQ(ReducerBuckets(bytes, ready, 50),
            (std::vector<std::vector<size_t>>{{4}, {3, 2}, {1, 0}}));
  // A bucket passes its limit by its last parameter: 20 + 30 >= 45.
  EXPECT_EQ(ReducerBuckets(bytes, ready, 45),
            (std::vector<std::vector<size_t>>{{4}, {3, 2}, {1, 0}}));
  EXPECT_EQ(ReducerBuckets(bytes, ready, 1000),
            (std::vector<std::vector<size_t>>{{4, 3, 2, 1, 0}}));
  // The first bucket closes at 1 MiB whatever the bucket size: the 2 MiB
  // parameter ready first is alone; the rest fill 25 MB buckets.
  const int64_t mib = 1 << 20;
  EXPECT_EQ(ReducerBuckets({10 * mib, 10 * mib, 2 * mib}, {2, 1, 0}, 25'000'000),
            (std::vector<std::vector<size_t>>{{2}, {1, 0}}));
  // The order is the ready order, not the model's.
  EXPECT_EQ(ReducerBuckets(bytes, {0, 1, 2, 3, 4}, 50),
            (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}, {4}}));
}

TEST(FitAllReduceTest, RecoversOverheadAndBandwidthOfExactPoints) {
  const double o = 20e-6, w = 100e9;
  std::vector<int64_t> bytes;
  std::vector<double> seconds;
  for (int64_t s = 4096; s <= (int64_t{1} << 28); s *= 4) {
    bytes.push_back(s);
    seconds.push_back(o + s / w);
  }
  auto fit = FitAllReduce(bytes, seconds);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->per_call_seconds, o, 1e-9);
  EXPECT_NEAR(fit->bandwidth / w, 1, 1e-6);
}

TEST(FitAllReduceTest, NoisyPointsFitWithinTheirNoise) {
  const double o = 50e-6, w = 10e9;
  std::vector<int64_t> bytes;
  std::vector<double> seconds;
  int k = 0;
  for (int64_t s = 1024; s <= (int64_t{1} << 26); s *= 2, ++k) {
    bytes.push_back(s);
    seconds.push_back((o + s / w) * (k % 2 ? 1.05 : 0.95));  // +-5%
  }
  auto fit = FitAllReduce(bytes, seconds);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->per_call_seconds / o, 1, 0.1);
  EXPECT_NEAR(fit->bandwidth / w, 1, 0.1);
}

TEST(FitAllReduceTest, NegativeInterceptFitsThroughTheOrigin) {
  auto fit = FitAllReduce({1000, 2000, 4000}, {0.5e-6, 1.5e-6, 3.5e-6});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->per_call_seconds, 0);
  EXPECT_GT(fit->bandwidth, 0);
}

TEST(FitAllReduceTest, RefusesWhatCannotBeFitted) {
  EXPECT_EQ(FitAllReduce({1000}, {1e-3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitAllReduce({1000, 1000}, {1e-3, 2e-3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitAllReduce({1000, 2000}, {1e-3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitAllReduce({1000, 2000}, {1e-3, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Slower for smaller messages: no bandwidth.
  EXPECT_EQ(FitAllReduce({1000, 1000000}, {2e-3, 1e-3}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Four parameters of 100 bytes; gradients final from the back at 1, 2, 3, 4 s
// of a 4 s backward; a call costs 0.5 s + 100 bytes per second.
BackwardTiming FourLayers() {
  BackwardTiming b;
  b.param_bytes = {100, 100, 100, 100};
  b.param_ready_seconds = {4, 3, 2, 1};
  b.backward_seconds = 4;
  return b;
}
const AllReduceFit kFit{0.5, 100};

TEST(PredictExposedTest, EachVariantReplayedByHand) {
  const BackwardTiming b = FourLayers();
  // naive: four calls of 1.5 s after the backward.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_NAIVE, 0, b, kFit), 6.0);
  // flat: one call of 400 bytes: 4.5 s.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_FLAT, 0, b, kFit), 4.5);
  // overlap: calls at 1 (to 2.5), then 2.5 (to 4), 4 (to 5.5), 5.5 (to 7): 3 s past 4.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_OVERLAP, 0, b, kFit), 3.0);
  // bucketed 200 bytes: {3,2} ready at 2 (to 4.5), {1,0} ready at 4 (4.5 to 7): 3 s.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_BUCKETED, 200, b, kFit), 3.0);
  // one bucket of everything: as flat.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_BUCKETED, 1000, b, kFit), 4.5);
  // reducer 200 bytes: in ready order {3,2} closes at 200 (ready 2, to
  // 4.5), {1,0} (ready 4, 4.5 to 7): as bucketed, 3 s.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_REDUCER, 200, b, kFit), 3.0);
  // 150 bytes: {3,2} closes (200 >= 150), {1,0} too: the same.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_REDUCER, 150, b, kFit), 3.0);
}

TEST(PredictExposedTest, CommunicationThatFitsUnderTheBackwardIsHidden) {
  BackwardTiming b = FourLayers();
  b.param_ready_seconds = {40, 30, 20, 10};
  b.backward_seconds = 40;
  // Only the last parameter's call (ready at the end) shows.
  EXPECT_DOUBLE_EQ(PredictExposedSeconds(v1::DDP_VARIANT_OVERLAP, 0, b, kFit), 1.5);
}

TEST(PredictBestBucketTest, TradesPerCallOverheadAgainstTheLastBucketsWait) {
  // 100 layers of 1 MB final every 10 ms over 1 s; a call costs 1 ms + 1 GB/s.
  BackwardTiming b;
  for (int i = 0; i < 100; ++i) {
    b.param_bytes.push_back(1000000);
    b.param_ready_seconds.push_back(1.0 - 0.01 * i);
  }
  b.backward_seconds = 1.0;
  const AllReduceFit fit{1e-3, 1e9};
  const BestBucket best = PredictBestBucket(b, fit);
  // One bucket per layer: 2 ms each, the last shows 2 ms. Buckets are packed
  // from the back, so 3 or 9 layers a bucket leave layer 0 alone in the last
  // one, and the 9-layer bucket before it (10 ms) ends as layer 0 becomes
  // final: 2 ms too, in the fewest calls. 10 layers a bucket: 11 ms.
  EXPECT_NEAR(best.exposed_seconds, 2e-3, 1e-9);
  EXPECT_GE(best.bucket_mb, 9);
  EXPECT_LT(best.bucket_mb, 10);
  EXPECT_NEAR(PredictExposedSeconds(v1::DDP_VARIANT_BUCKETED, 10000000, b, fit), 11e-3, 1e-9);
  // Everything in one bucket: flat.
  EXPECT_NEAR(PredictExposedSeconds(v1::DDP_VARIANT_BUCKETED, 100000000, b, fit), 0.101, 1e-9);
}

TEST(OverheadModelTest, RowsPredictedAndTheMeasuredBestCompared) {
  std::vector<int64_t> bytes = {1000, 100000, 10000000};
  std::vector<double> seconds;
  for (int64_t s : bytes) seconds.push_back(kFit.Seconds(s));
  auto model = MakeOverheadModel(FourLayers(), bytes, seconds);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NEAR(model->per_call_seconds(), 0.5, 1e-9);
  EXPECT_NEAR(model->bandwidth_bytes_per_second(), 100, 1e-6);
  EXPECT_EQ(model->gradient_bytes(), 400);
  EXPECT_FALSE(model->formula().empty());

  v1::DdpResult result;
  *result.mutable_overhead_model() = *model;
  for (double mb : {100e-6, 200e-6}) {
    v1::DdpRow* row = result.add_rows();
    row->set_variant(v1::DDP_VARIANT_BUCKETED);
    row->set_bucket_mb(mb);
    row->set_optimizer(v1::DDP_OPTIMIZER_ADAMW);
    row->mutable_step()->set_median(mb == 200e-6 ? 1.0 : 2.0);
    PredictRow(FourLayers(), *model, row);
  }
  EXPECT_DOUBLE_EQ(result.rows(1).predicted_exposed_comm_seconds(), 3.0);
  v1::DdpRow sharded = result.rows(0);
  sharded.set_optimizer(v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  sharded.clear_predicted_exposed_comm_seconds();
  PredictRow(FourLayers(), *model, &sharded);
  EXPECT_FALSE(sharded.has_predicted_exposed_comm_seconds());

  CompareBestBucket(&result);
  EXPECT_DOUBLE_EQ(result.overhead_model().measured_best_bucket_mb(), 200e-6);
  EXPECT_NEAR(result.overhead_model().best_bucket_ratio(),
              model->predicted_best_bucket_mb() / 200e-6, 1e-9);
}

}  // namespace
}  // namespace benchd
