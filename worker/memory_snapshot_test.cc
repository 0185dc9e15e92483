// The snapshot parser, analysis and timeline on the recorded-format fixture
// (tests/fixtures/memory: snapshot.pickle and the figures its generator
// computed independently, expected.json). CPU only: no CUDA needed.
#include "worker/memory_snapshot.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include <torch/csrc/jit/serialization/pickler.h>
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

// A snapshot built the way torch::cuda::_memory_snapshot_pickled() builds it
// (generic Dict/List IValues; frame dicts shared between the stacks of
// different allocations) and pickled by LibTorch's own Pickler with the same
// arguments (tagless, protocol 2): the bytes a GPU run writes, made on a CPU.
std::string PickleLikeTheAllocator() {
  using c10::IValue;
  auto dict = [] { return c10::Dict<IValue, IValue>(c10::AnyType::get(), c10::AnyType::get()); };
  auto list = [] { return c10::List<IValue>(c10::AnyType::get()); };
  auto frame = [&](const std::string& name, const std::string& file, int64_t line) {
    auto f = dict();
    f.insert("name", name);
    f.insert("filename", file);
    f.insert("line", line);
    return f;
  };
  const auto malloc_frame =
      frame("c10::cuda::CUDACachingAllocator::Native::malloc", "/p/c10.cpp", 1);
  const auto fwd_frame = frame("benchd::worker::TransformerLMImpl::forward(at::Tensor const&)",
                               "/src/worker/transformer.cc", 170);
  auto stack = [&] {  // a list per allocation, the frames shared
    auto l = list();
    l.push_back(malloc_frame);
    l.push_back(fwd_frame);
    return l;
  };
  const int64_t base = int64_t{0x7f12} << 32;  // needs 8-byte ints
  auto event = [&](const std::string& action, int64_t addr, int64_t size, int64_t t,
                   bool with_frames) {
    auto e = dict();
    e.insert("action", action);
    e.insert("addr", addr);
    e.insert("size", size);
    e.insert("stream", int64_t{0});
    e.insert("compile_context", std::string("N/A"));
    e.insert("user_metadata", std::string(""));
    e.insert("time_us", t);
    e.insert("pool_id", std::tuple<int64_t, int64_t>(0, 0));
    if (with_frames) e.insert("frames", stack());
    return e;
  };
  auto trace = list();
  trace.push_back(event("segment_alloc", base, 20 << 20, 1'700'000'000'000'010, true));
  trace.push_back(event("alloc", base, 3'000'000, 1'700'000'000'000'011, true));
  trace.push_back(event("free_requested", base, 3'000'000, 1'700'000'000'000'020, true));
  trace.push_back(event("free_completed", base, 3'000'000, 1'700'000'000'000'020, true));
  trace.push_back(event("alloc", base, 3'000'000, 1'700'000'000'000'031, true));
  auto traces = list();
  traces.push_back(trace);

  auto block = [&](int64_t size, int64_t requested, const std::string& state) {
    auto b = dict();
    b.insert("address", base);
    b.insert("size", size);
    b.insert("requested_size", requested);
    b.insert("state", state);
    b.insert("frames", state == "inactive" ? list() : stack());
    return b;
  };
  auto seg = dict();
  seg.insert("device", int64_t{0});
  seg.insert("address", base);
  seg.insert("total_size", int64_t{20 << 20});
  seg.insert("allocated_size", int64_t{3'000'064});
  seg.insert("active_size", int64_t{3'000'064});
  seg.insert("requested_size", int64_t{3'000'000});
  seg.insert("stream", int64_t{0});
  seg.insert("segment_type", std::string("large"));
  seg.insert("segment_pool_id", std::tuple<int64_t, int64_t>(0, 0));
  seg.insert("is_expandable", false);
  seg.insert("frames", stack());
  auto blocks = list();
  blocks.push_back(block(3'000'064, 3'000'000, "active_allocated"));
  blocks.push_back(block((20 << 20) - 3'000'064, 0, "inactive"));
  seg.insert("blocks", blocks);
  auto segments = list();
  segments.push_back(seg);

  auto annotations = list();
  for (auto [stage, t] : {std::pair<const char*, int64_t>{"START", 1'700'000'000'000'005},
                          {"END", 1'700'000'000'000'015},
                          {"START", 1'700'000'000'000'030},
                          {"END", 1'700'000'000'000'040}}) {
    auto a = dict();
    a.insert("name", std::string("forward"));
    a.insert("stage", std::string(stage));
    a.insert("device", int64_t{0});
    a.insert("time_us", t);
    annotations.push_back(a);
  }
  auto settings = dict();
  settings.insert("PYTORCH_CUDA_ALLOC_CONF", std::string(""));
  settings.insert("expandable_segments", false);
  settings.insert("garbage_collection_threshold", 0.0);

  auto result = dict();
  result.insert("segments", segments);
  result.insert("device_traces", traces);
  result.insert("allocator_settings", settings);
  result.insert("external_annotations", annotations);
  result.insert("host_segments", list());
  result.insert("host_traces", list());

  std::string out;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { out.append(data, size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(result);
  pickler.stop();
  return out;
}

TEST(MemorySnapshotTest, ReadsWhatLibTorchsPicklerWrites) {
  const std::string bytes = PickleLikeTheAllocator();
  if (const char* dir = std::getenv("BENCHD_TEST_OUTPUT")) {  // memory_viz reads it: test_memory.py
    std::ofstream(std::string(dir) + "/torch-pickler-snapshot.pickle", std::ios::binary) << bytes;
  }
  auto s = ParseSnapshotPickle(bytes);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->device_traces.size(), 1u);
  ASSERT_EQ(s->device_traces[0].size(), 5u);
  EXPECT_EQ(s->device_traces[0][0].addr, int64_t{0x7f12} << 32);
  EXPECT_EQ(s->annotations.size(), 4u);
  auto a = memory::Analyze(*s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->baseline_allocated, 0);
  EXPECT_EQ(a->baseline_reserved, 0);
  EXPECT_EQ(a->peak_allocated, 3'000'000);
  EXPECT_EQ(a->peak_reserved, 20 << 20);
  ASSERT_TRUE(a->phases[0].seen);
  EXPECT_EQ(a->phases[0].start_allocated, 0);
  ASSERT_EQ(a->largest.size(), 1u);  // one site, once in each step's forward
  EXPECT_EQ(a->largest[0].count, 2);
  EXPECT_EQ(a->largest[0].phase, "forward");
  EXPECT_EQ(a->largest[0].origin,
            "transformer.cc:170:benchd::worker::TransformerLMImpl::forward(at::Tensor const&)");
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
