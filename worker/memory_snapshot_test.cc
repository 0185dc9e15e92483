// The snapshot parser, analysis and timeline on the recorded-format fixture
// (tests/fixtures/memory: snapshot.pickle and the figures its generator
// computed independently, expected.json). CPU only: no CUDA needed.
#include "worker/memory_snapshot.h"

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/memory_analysis.h"
#include "common/memory_svg.h"
#include "gtest/gtest.h"

namespace benchd::worker {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(BENCHD_SOURCE_DIR) + "/tests/fixtures/memory/" + name,
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MemorySnapshotTest, ParsesTheFixture) {
  auto s = ParseSnapshotPickle(Fixture("snapshot.pickle"));
  ASSERT_TRUE(s.ok()) << s.status();
  const auto expected = nlohmann::json::parse(Fixture("expected.json"));
  ASSERT_EQ(s->device_traces.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(s->device_traces[0].size()), expected["entries"].get<int64_t>());
  EXPECT_EQ(s->segments.size(), 4u);
  EXPECT_EQ(s->annotations.size(), 12u);  // 3 phases x START/END x 2 steps
  int allocs = 0;
  for (const auto& e : s->device_traces[0]) allocs += e.action == memory::Action::kAlloc;
  EXPECT_EQ(allocs, expected["alloc_events"].get<int>());
  // Each allocation has a stack list of its own in the pickle (as LibTorch
  // writes them); identical stacks come out as one shared vector.
  const auto& t = s->device_traces[0];
  const memory::TraceEvent* first = nullptr;
  for (const auto& e : t) {
    if (e.action == memory::Action::kAlloc && e.frames) {
      if (first == nullptr) {
        first = &e;
      } else if (e.frames->at(3).name == first->frames->at(3).name) {
        EXPECT_EQ(e.frames.get(), first->frames.get());
        break;
      }
    }
  }
}

TEST(MemorySnapshotTest, AnalysisMatchesTheGeneratorsOwnCounters) {
  auto s = ParseSnapshotPickle(Fixture("snapshot.pickle"));
  ASSERT_TRUE(s.ok()) << s.status();
  const auto expected = nlohmann::json::parse(Fixture("expected.json"));
  auto a = memory::Analyze(*s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->baseline_allocated, expected["baseline_allocated"].get<int64_t>());
  EXPECT_EQ(a->baseline_reserved, expected["baseline_reserved"].get<int64_t>());
  EXPECT_EQ(a->peak_allocated, expected["peak_allocated"].get<int64_t>());
  EXPECT_EQ(a->peak_reserved, expected["peak_reserved"].get<int64_t>());
  for (const memory::PhaseStats& p : a->phases) {
    SCOPED_TRACE(p.name);
    const auto& e = expected["phases"][p.name];
    ASSERT_TRUE(p.seen);
    EXPECT_EQ(p.start_allocated, e["start_allocated"].get<int64_t>());
    EXPECT_EQ(p.start_reserved, e["start_reserved"].get<int64_t>());
    EXPECT_EQ(p.peak_allocated, e["peak_allocated"].get<int64_t>());
    EXPECT_EQ(p.peak_reserved, e["peak_reserved"].get<int64_t>());
  }
  ASSERT_GE(a->largest.size(), 2u);
  EXPECT_EQ(a->largest[0].size, expected["largest_size"].get<int64_t>());
  bool logits_found = false;
  for (const auto& l : a->largest) {
    if (l.phase == "forward" && l.size == expected["largest_size"].get<int64_t>()) {
      logits_found = true;
      EXPECT_EQ(l.count, expected["largest_count_forward"].get<int64_t>());
      EXPECT_EQ(l.origin, expected["largest_origin"].get<std::string>());
    }
  }
  EXPECT_TRUE(logits_found);
}

TEST(MemorySnapshotTest, TimelineOfTheFixture) {
  auto s = ParseSnapshotPickle(Fixture("snapshot.pickle"));
  ASSERT_TRUE(s.ok()) << s.status();
  auto a = memory::Analyze(*s);
  ASSERT_TRUE(a.ok()) << a.status();
  memory::TimelineOptions o;
  o.title = "fixture";
  o.max_bands = 40;
  const std::string svg = memory::RenderTimelineSvg(*s, *a, o);
  EXPECT_NE(svg.find("40 largest allocations"), std::string::npos);
  const auto expected = nlohmann::json::parse(Fixture("expected.json"));
  const std::string summed =
      std::to_string(expected["alloc_events"].get<int>() - 40) + " smaller ones, summed";
  EXPECT_NE(svg.find(summed), std::string::npos) << summed;
  // Narrow at 1200 px: named "opt" above its band (and in full in the legend).
  EXPECT_NE(svg.find(">opt</text>"), std::string::npos);
  EXPECT_NE(svg.find(">optimizer_step</text>"), std::string::npos);
  EXPECT_NE(svg.find("TransformerLMImpl::forward"), std::string::npos);  // a band's origin
  EXPECT_LT(svg.size(), 200u * 1024);
  if (const char* dir = std::getenv("BENCHD_TEST_OUTPUT")) {  // to look at it
    std::ofstream(std::string(dir) + "/fixture-timeline.svg") << svg;
  }
}

TEST(MemorySnapshotTest, BadBytesAreInvalidArgument) {
  auto s = ParseSnapshotPickle("not a pickle at all");
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.status().message()).find("memory snapshot"), std::string::npos);
  // A real pickle of the wrong shape: a dict without device_traces.
  // (Python: pickle.dumps({"segments": []}, protocol=2))
  const std::string no_traces("\x80\x02}q\x00X\x08\x00\x00\x00segmentsq\x01]q\x02s.", 25);
  s = ParseSnapshotPickle(no_traces);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(std::string(s.status().message()).find("no key 'device_traces'"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace benchd::worker
