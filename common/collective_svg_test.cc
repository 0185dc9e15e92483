#include "common/collective_svg.h"

#include "gtest/gtest.h"

namespace benchd {
namespace {

v1::CollectiveRow Row(v1::CollectiveBackend b, int world, int64_t size, double median) {
  v1::CollectiveRow r;
  r.set_backend(b);
  r.set_world_size(world);
  r.set_size_bytes(size);
  r.mutable_duration()->set_median(median);
  r.add_devices(b == v1::COLLECTIVE_BACKEND_NCCL ? "cuda:0" : "cpu:0");
  return r;
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(CollectiveSvgTest, ThreePlotsWithTheirSeries) {
  v1::CollectiveResult r;
  r.mutable_spec()->set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  for (auto b : {v1::COLLECTIVE_BACKEND_NCCL, v1::COLLECTIVE_BACKEND_GLOO}) {
    for (int w : {2, 4}) {
      for (int64_t s : {1 << 20, 1 << 21, 1 << 22}) {
        *r.add_rows() =
            Row(b, w, s, (b == v1::COLLECTIVE_BACKEND_NCCL ? 1e-5 : 1e-3) * (s >> 20) * w);
      }
    }
  }
  auto plots = RenderCollectivePlots(r);
  ASSERT_EQ(plots.size(), 3u);
  EXPECT_EQ(plots[0].name(), "duration_vs_size");
  EXPECT_EQ(plots[1].name(), "duration_vs_world_size");
  EXPECT_EQ(plots[2].name(), "backend_comparison");
  // size plot: one series per (backend, world), 3 points each
  EXPECT_EQ(Count(plots[0].svg(), "class=\"series\""), 4);
  EXPECT_EQ(Count(plots[0].svg(), "<circle"), 12);
  // world plot: one series per (backend, size), 2 points each
  EXPECT_EQ(Count(plots[1].svg(), "class=\"series\""), 6);
  EXPECT_EQ(Count(plots[1].svg(), "<circle"), 12);
  // backend comparison at 4 ranks: nccl and gloo
  EXPECT_EQ(Count(plots[2].svg(), "class=\"series\""), 2);
  EXPECT_NE(plots[2].svg().find("4 processes"), std::string::npos);
  EXPECT_NE(plots[2].svg().find("gloo (CPU tensors)"), std::string::npos);
  for (const auto& p : plots) {
    EXPECT_EQ(p.svg().rfind("<svg", 0), 0u);
    EXPECT_NE(p.svg().find("</svg>"), std::string::npos);
    EXPECT_EQ(p.svg().find("nan"), std::string::npos) << p.name();
    EXPECT_EQ(p.svg().find("inf"), std::string::npos) << p.name();
  }
  // Axis labels of a log2 byte axis.
  EXPECT_NE(plots[0].svg().find(">1 MiB<"), std::string::npos);
  EXPECT_NE(plots[0].svg().find(">4 MiB<"), std::string::npos);
}

TEST(CollectiveSvgTest, OneBackendSaysSoAndEmptyDrawsNoData) {
  v1::CollectiveResult r;
  *r.add_rows() = Row(v1::COLLECTIVE_BACKEND_GLOO, 2, 1024, 1e-4);
  auto plots = RenderCollectivePlots(r);
  EXPECT_NE(plots[2].svg().find("only one backend ran"), std::string::npos);
  auto none = RenderCollectivePlots(v1::CollectiveResult());
  ASSERT_EQ(none.size(), 3u);
  EXPECT_NE(none[0].svg().find("no data"), std::string::npos);
}

TEST(CollectiveSvgTest, EscapesNames) {
  LineChart c;
  c.title = "a < b & c";
  c.series.push_back({"x<y", {{1, 1e-3}}, {"t&t"}});
  const std::string svg = RenderLineChart(c);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(svg.find("x&lt;y"), std::string::npos);
  EXPECT_EQ(FormatSeconds(12.3e-6), "12.3 µs");
  EXPECT_EQ(FormatSeconds(4.56e-3), "4.56 ms");
}

}  // namespace
}  // namespace benchd
