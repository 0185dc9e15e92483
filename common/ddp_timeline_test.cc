#include "common/ddp_timeline.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace benchd {
namespace {

ProfileEvent Event(ProfileEvent::Kind kind, const std::string& name, int64_t start_us,
                   int64_t end_us, int parent = -1) {
  ProfileEvent e;
  e.kind = kind;
  e.name = name;
  e.start_ns = start_us * 1000;
  e.end_ns = end_us * 1000;
  e.parent = parent;
  return e;
}

TEST(DdpTimelineTest, KernelsSplitIntoLanesWithTheOverlapExact) {
  using K = ProfileEvent::Kind;
  const std::vector<ProfileEvent> events = {
      Event(K::kOperator, "aten::mm", 0, 5),  // host side: not a lane on a GPU
      Event(K::kDevice, "sm90_gemm", 100, 400),
      Event(K::kDevice, "elementwise", 400, 500),  // touches: one span
      Event(K::kDevice, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 300, 700),
      Event(K::kDevice, "adamw", 800, 1100),
  };
  const v1::DdpTimeline t = DdpTimelineFromEvents(events, /*device=*/true);
  EXPECT_EQ(t.source(), "cuda_kernels");
  EXPECT_DOUBLE_EQ(t.step_seconds(), 1000e-6);  // 100 .. 1100 us
  EXPECT_DOUBLE_EQ(t.compute_seconds(), 700e-6);
  EXPECT_DOUBLE_EQ(t.comm_seconds(), 400e-6);
  EXPECT_DOUBLE_EQ(t.comm_overlapped_seconds(), 200e-6);  // 300 .. 500
  ASSERT_EQ(t.spans_size(), 3);
  EXPECT_EQ(t.spans(0).lane(), v1::DDP_LANE_COMPUTE);
  EXPECT_DOUBLE_EQ(t.spans(0).start_seconds(), 0);
  EXPECT_DOUBLE_EQ(t.spans(0).end_seconds(), 400e-6);
  EXPECT_EQ(t.spans(1).lane(), v1::DDP_LANE_COMPUTE);
  EXPECT_DOUBLE_EQ(t.spans(1).start_seconds(), 700e-6);
  EXPECT_EQ(t.spans(2).lane(), v1::DDP_LANE_COMMUNICATION);
  EXPECT_DOUBLE_EQ(t.spans(2).start_seconds(), 200e-6);
  EXPECT_DOUBLE_EQ(t.spans(2).end_seconds(), 600e-6);
}

TEST(DdpTimelineTest, GapsUnderAThousandthOfTheStepMergeInSpansOnly) {
  using K = ProfileEvent::Kind;
  std::vector<ProfileEvent> events;
  for (int k = 0; k < 100; ++k) events.push_back(Event(K::kDevice, "k", 100 * k, 100 * k + 99));
  const v1::DdpTimeline t = DdpTimelineFromEvents(events, true);  // 1 us gaps in 9.999 ms
  EXPECT_EQ(t.spans_size(), 1);
  EXPECT_NEAR(t.compute_seconds(), 9.9e-3, 1e-12);  // the gaps are not busy time
}

TEST(DdpTimelineTest, CpuLanesAreTopLevelOperatorsAndGlooRanges) {
  using K = ProfileEvent::Kind;
  const std::vector<ProfileEvent> events = {
      Event(K::kRange, "forward", 0, 100),
      Event(K::kOperator, "aten::linear", 0, 60, 0),  // under a range: top-level
      Event(K::kOperator, "aten::mm", 10, 50, 1),     // under an operator: not again
      Event(K::kOperator, "aten::gelu", 60, 100, 0),
      Event(K::kRange, "gloo:all_reduce", 80, 200),
      Event(K::kOperator, "c10d::allreduce_", 100, 101),  // the call, not computation
      Event(K::kOperator, "aten::add_", 210, 220),
  };
  const v1::DdpTimeline t = DdpTimelineFromEvents(events, /*device=*/false);
  EXPECT_EQ(t.source(), "cpu_operators");
  EXPECT_DOUBLE_EQ(t.compute_seconds(), 110e-6);
  EXPECT_DOUBLE_EQ(t.comm_seconds(), 120e-6);
  EXPECT_DOUBLE_EQ(t.comm_overlapped_seconds(), 20e-6);
  EXPECT_DOUBLE_EQ(t.step_seconds(), 220e-6);
}

TEST(DdpTimelineTest, NoActivitiesNoSpans) {
  const v1::DdpTimeline t = DdpTimelineFromEvents({}, true);
  EXPECT_EQ(t.spans_size(), 0);
  EXPECT_EQ(t.step_seconds(), 0);
}

TEST(DdpTimelinesSvgTest, ABlockPerRunAndTwoLanesPerRank) {
  v1::DdpResult result;
  result.set_world_size(2);
  result.set_device_name("NVIDIA H100 <80GB>");
  auto add_row = [&](v1::DdpRow* row) {
    row->mutable_step()->set_median(1e-3);
    for (int r = 0; r < 2; ++r) {
      v1::DdpRank* k = row->add_ranks();
      k->set_rank(r);
      k->set_device("cuda:" + std::to_string(r));
      k->mutable_timeline()->set_step_seconds(1e-3);
      k->mutable_timeline()->set_comm_seconds(4e-4);
      k->mutable_timeline()->set_comm_overlapped_seconds(2e-4);
      for (auto lane : {v1::DDP_LANE_COMPUTE, v1::DDP_LANE_COMMUNICATION}) {
        v1::DdpSpan* s = k->mutable_timeline()->add_spans();
        s->set_lane(lane);
        s->set_start_seconds(1e-4);
        s->set_end_seconds(5e-4);
      }
    }
  };
  add_row(result.mutable_compute_only());
  v1::DdpRow* overlap = result.add_rows();
  overlap->set_variant(v1::DDP_VARIANT_OVERLAP);
  overlap->set_optimizer(v1::DDP_OPTIMIZER_ADAMW);
  add_row(overlap);
  result.add_rows()->set_variant(v1::DDP_VARIANT_FLAT);  // no timeline: left out
  const std::string svg = RenderDdpTimelines(result);
  EXPECT_TRUE(absl::StartsWith(svg, "<svg"));
  EXPECT_TRUE(absl::StrContains(svg, "compute only"));
  EXPECT_TRUE(absl::StrContains(svg, "overlap"));
  EXPECT_FALSE(absl::StrContains(svg, "flat"));
  EXPECT_TRUE(absl::StrContains(svg, "50% of comm hidden"));
  EXPECT_TRUE(absl::StrContains(svg, "&lt;80GB&gt;"));  // escaped
  // 2 rows x 2 ranks x (background + 2 spans)
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 1u + 2 * 2 * 3);
  EXPECT_EQ(RenderDdpTimelines(v1::DdpResult()), "");
}

}  // namespace
}  // namespace benchd
