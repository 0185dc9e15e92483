#include "client/estimate_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/memory_estimate.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::MemoryEstimate Estimated(int64_t data_parallel) {
  v1::EstimateRequest r;
  r.mutable_model()->set_preset("small");
  r.set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  r.mutable_sharding()->set_data_parallel(data_parallel);
  r.mutable_sharding()->set_zero_stage(1);
  auto e = Estimate(r);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : v1::MemoryEstimate();
}

TEST(EstimateViewTest, EveryTermWithItsFormulaAndThePhases) {
  const v1::MemoryEstimate e = Estimated(1);
  const std::string view = EstimateView(e);
  EXPECT_THAT(view, HasSubstr("Memory estimate: small"));
  EXPECT_THAT(view, HasSubstr("128625408 parameters"));
  EXPECT_THAT(view, HasSubstr("train_step fp32, batch 4 x context 128"));
  EXPECT_THAT(view, HasSubstr("adamw_state"));
  EXPECT_THAT(view, HasSubstr("8 B x P = 8 x 128625408"));
  EXPECT_THAT(view, HasSubstr("(1029003264 B)"));  // exact bytes beside the rounded figure
  for (const auto& t : e.activations_per_layer()) EXPECT_THAT(view, HasSubstr(t.name()));
  EXPECT_THAT(view, HasSubstr("optimizer_step"));
  EXPECT_THAT(view, HasSubstr("Not modelled"));
  EXPECT_THAT(view, Not(HasSubstr("per device")));  // one device: no per-device column
}

TEST(EstimateViewTest, ShardedShowsPerDevice) {
  const std::string view = EstimateView(Estimated(4));
  EXPECT_THAT(view, HasSubstr("Sharding: data_parallel 4 (ZeRO stage 1)"));
  EXPECT_THAT(view, HasSubstr("4 devices"));
  EXPECT_THAT(view, HasSubstr("per device"));
  EXPECT_THAT(view, HasSubstr("(257250816 B)"));  // AdamW state / 4
}

}  // namespace
}  // namespace benchd::client
