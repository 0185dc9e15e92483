#include "common/memory_svg.h"

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace benchd::memory {
namespace {

constexpr int64_t kMiB = 1 << 20;

TraceEvent Ev(Action a, int64_t addr, int64_t size, int64_t t) {
  TraceEvent e;
  e.action = a;
  e.addr = addr;
  e.size = size;
  e.time_us = t;
  return e;
}

// Baseline 1 MiB; forward allocates 8, 4 and 2 MiB, backward frees the 8 MiB
// one (the two above it drop) and allocates 1 MiB.
Snapshot Fixture() {
  Snapshot s;
  s.segments = {Segment{0,
                        0,
                        32 * kMiB,
                        {{1 * kMiB, 1 * kMiB, "active_allocated"},
                         {4 * kMiB, 4 * kMiB, "active_allocated"},
                         {2 * kMiB, 2 * kMiB, "active_allocated"},
                         {1 * kMiB, 1 * kMiB, "active_allocated"},
                         {24 * kMiB, 0, "inactive"}}}};
  s.device_traces = {{
      Ev(Action::kAlloc, 100, 8 * kMiB, 10),
      Ev(Action::kAlloc, 200, 4 * kMiB, 11),
      Ev(Action::kAlloc, 300, 2 * kMiB, 12),
      Ev(Action::kFreeRequested, 100, 8 * kMiB, 21),
      Ev(Action::kFreeCompleted, 100, 8 * kMiB, 22),
      Ev(Action::kAlloc, 400, 1 * kMiB, 23),
  }};
  s.annotations = {{"forward", true, 0, 5},
                   {"forward", false, 0, 20},
                   {"backward", true, 0, 20},
                   {"backward", false, 0, 30}};
  return s;
}

// Every opened element is closed, in order (a small XML well-formedness check).
bool Balanced(const std::string& svg) {
  std::vector<std::string> open;
  static const std::regex tag("<(/?)([a-zA-Z]+)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    if (m[3] == "/") continue;  // self-closing
    if (m[1] == "/") {
      if (open.empty() || open.back() != m[2]) return false;
      open.pop_back();
    } else {
      open.push_back(m[2]);
    }
  }
  return open.empty();
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(MemorySvgTest, DrawsBandsPhasesAndPeak) {
  const Snapshot s = Fixture();
  auto a = Analyze(s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->baseline_allocated, 1 * kMiB);
  ASSERT_EQ(a->peak_allocated, 15 * kMiB);
  TimelineOptions o;
  o.title = "tiny <train_step> & fp32";
  const std::string svg = RenderTimelineSvg(s, *a, o);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_TRUE(Balanced(svg));
  EXPECT_NE(svg.find("tiny &lt;train_step&gt; &amp; fp32"), std::string::npos);
  // Four allocations, each its own band, plus the summed band (empty here).
  EXPECT_EQ(Count(svg, "<polygon"), 5u);
  EXPECT_NE(svg.find("0 smaller allocations, summed"), std::string::npos);
  EXPECT_NE(svg.find("8.0 MiB (8388608 B), forward"), std::string::npos);
  EXPECT_NE(svg.find("1.0 MiB (1048576 B), backward"), std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_NE(svg.find("peak 15.0 MiB"), std::string::npos);
  EXPECT_NE(svg.find("resident before recording: 1.0 MiB"), std::string::npos);
}

// The 4 MiB band (second) drops by 8 MiB when the first is freed: its lower
// edge has a step from baseline+8 MiB to baseline.
TEST(MemorySvgTest, BandsAboveAFreedOneDrop) {
  const Snapshot s = Fixture();
  auto a = Analyze(s);
  ASSERT_TRUE(a.ok());
  TimelineOptions o;
  o.width = 590;   // plot width 480: 5 timesteps (4 allocs, 1 free) of 96 px
  o.height = 244;  // plot height 100
  const std::string svg = RenderTimelineSvg(s, *a, o);
  // y of a byte count: 64 + 100 - 100 * bytes / (15 MiB * 1.08).
  auto y = [](double mib) { return 164.0 - 100.0 * mib / (15 * 1.08); };
  char buf[64];
  // The 4 MiB band starts at t=1 (x=186) on top of baseline + 8 MiB ...
  std::snprintf(buf, sizeof buf, "186.0,%.1f", y(9));
  EXPECT_NE(svg.find(buf), std::string::npos) << buf << "\n" << svg;
  // ... and at t=3 (x=378), the free of the 8 MiB one, drops to the baseline
  // and stays there to the right edge (x=570).
  std::snprintf(buf, sizeof buf, "378.0,%.1f 378.0,%.1f 570.0,%.1f", y(9), y(1), y(1));
  EXPECT_NE(svg.find(buf), std::string::npos) << buf << "\n" << svg;
}

TEST(MemorySvgTest, SmallAllocationsAreSummedBeyondMaxBands) {
  const Snapshot s = Fixture();
  auto a = Analyze(s);
  ASSERT_TRUE(a.ok());
  TimelineOptions o;
  o.max_bands = 2;
  const std::string svg = RenderTimelineSvg(s, *a, o);
  EXPECT_TRUE(Balanced(svg));
  EXPECT_EQ(Count(svg, "<polygon"), 3u);
  EXPECT_NE(svg.find("2 smaller allocations, summed"), std::string::npos);
  EXPECT_NE(svg.find("2 largest allocations"), std::string::npos);
}

TEST(MemorySvgTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(12 * kMiB), "12.0 MiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 29), "1.50 GiB");
}

}  // namespace
}  // namespace benchd::memory
