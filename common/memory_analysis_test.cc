#include "common/memory_analysis.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace benchd::memory {
namespace {

constexpr int64_t kMiB = 1 << 20;

TraceEvent Ev(Action a, int64_t addr, int64_t size, int64_t t, Frames frames = nullptr) {
  TraceEvent e;
  e.action = a;
  e.addr = addr;
  e.size = size;
  e.time_us = t;
  e.frames = std::move(frames);
  return e;
}

Frames Stack(const std::string& ours) {
  return std::make_shared<const std::vector<Frame>>(std::vector<Frame>{
      {"unwind::unwind()", "/pytorch/torch/csrc/profiler/unwind/unwind.cpp", 10},
      {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)",
       "/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1390},
      {ours, "/src/benchd/worker/transformer.cc", 42},
      {"__libc_start_main", "", 0}});
}

// A weight (1000 B in a 1 KiB block) resident before recording in segment 1;
// recording sees a new 2 MiB segment, a (500 B in a 512 B block, kept), b (4 KiB,
// freed in backward) in forward, c (2 KiB) in backward, freed after it. Sizes
// are the requested bytes, as the trace and the blocks' requested_size carry them.
Snapshot Fixture() {
  Snapshot s;
  Segment seg1{
      0, 0x1000000, 2 * kMiB, {{1024, 1000, "active_allocated"}, {2 * kMiB - 1024, 0, "inactive"}}};
  Segment seg2{
      0, 0x2000000, 2 * kMiB, {{512, 500, "active_allocated"}, {2 * kMiB - 512, 0, "inactive"}}};
  s.segments = {seg1, seg2};
  s.device_traces.resize(1);
  s.device_traces[0] = {
      Ev(Action::kSegmentAlloc, 0x2000000, 2 * kMiB, 9),
      Ev(Action::kAlloc, 0x2000000, 500, 10, Stack("benchd::worker::A()")),
      Ev(Action::kAlloc, 0x2000200, 4096, 11, Stack("benchd::worker::B()")),
      Ev(Action::kFreeRequested, 0x2000200, 4096, 19),
      Ev(Action::kFreeCompleted, 0x2000200, 4096, 21),
      Ev(Action::kAlloc, 0x2000200, 2048, 22, Stack("benchd::worker::C()")),
      Ev(Action::kFreeRequested, 0x2000200, 2048, 30),
      Ev(Action::kFreeCompleted, 0x2000200, 2048, 30),
  };
  s.annotations = {{"forward", true, 0, 5},
                   {"forward", false, 0, 20},
                   {"backward", true, 0, 20},
                   {"backward", false, 0, 25}};
  return s;
}

TEST(MemoryAnalysisTest, BaselinePeaksAndPhases) {
  auto a = Analyze(Fixture());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->device, 0);
  EXPECT_EQ(a->entries, 8);
  EXPECT_EQ(a->final_allocated, 1000 + 500);
  EXPECT_EQ(a->baseline_allocated, 1000);
  EXPECT_EQ(a->baseline_reserved, 2 * kMiB);
  EXPECT_EQ(a->final_reserved, 4 * kMiB);
  EXPECT_EQ(a->peak_allocated, 1000 + 500 + 4096);
  EXPECT_EQ(a->peak_reserved, 4 * kMiB);

  ASSERT_EQ(a->phases.size(), 3u);
  const PhaseStats& fwd = a->phases[0];
  EXPECT_EQ(fwd.name, "forward");
  EXPECT_TRUE(fwd.seen);
  EXPECT_EQ(fwd.start_allocated, 1000);
  EXPECT_EQ(fwd.start_reserved, 2 * kMiB);
  EXPECT_EQ(fwd.peak_allocated, 1000 + 500 + 4096);
  EXPECT_EQ(fwd.peak_reserved, 4 * kMiB);
  const PhaseStats& bwd = a->phases[1];
  EXPECT_EQ(bwd.name, "backward");
  // b is still held when backward starts (its free completes at t=21).
  EXPECT_EQ(bwd.start_allocated, 1000 + 500 + 4096);
  EXPECT_EQ(bwd.peak_allocated, 1000 + 500 + 4096);
  EXPECT_FALSE(a->phases[2].seen);

  EXPECT_EQ(a->phase_of[1], "forward");
  EXPECT_EQ(a->phase_of[4], "backward");
  EXPECT_EQ(a->phase_of[7], "");  // after backward ended
  EXPECT_EQ(a->allocated_after.back(), 1000 + 500);
}

TEST(MemoryAnalysisTest, LargestAllocationsWithPhaseAndOrigin) {
  AnalysisOptions o;
  o.top_allocations = 2;
  auto a = Analyze(Fixture(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->largest.size(), 2u);
  EXPECT_EQ(a->largest[0].size, 4096);
  EXPECT_EQ(a->largest[0].phase, "forward");
  EXPECT_EQ(a->largest[0].count, 1);
  EXPECT_EQ(a->largest[0].origin, "transformer.cc:42:benchd::worker::B()");
  // memory_viz's filter drops the unwinder and libc frames; ours also drops
  // the allocator's own, so the first frame is the one that asked.
  ASSERT_EQ(a->largest[0].frames.size(), 1u);
  EXPECT_EQ(a->largest[0].frames[0], "transformer.cc:42:benchd::worker::B()");
  EXPECT_EQ(a->largest[1].size, 2048);
  EXPECT_EQ(a->largest[1].phase, "backward");
}

TEST(MemoryAnalysisTest, RepeatedAllocationsAreCounted) {
  Snapshot s = Fixture();
  Frames f = Stack("benchd::worker::D()");
  // Two more 8 KiB allocations from one stack in forward, both freed.
  s.device_traces[0].insert(
      s.device_traces[0].begin() + 3,
      {Ev(Action::kAlloc, 0x2001000, 8192, 12, f), Ev(Action::kFreeCompleted, 0x2001000, 8192, 13),
       Ev(Action::kAlloc, 0x2001000, 8192, 14, f),
       Ev(Action::kFreeCompleted, 0x2001000, 8192, 15)});
  auto a = Analyze(s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->largest[0].size, 8192);
  EXPECT_EQ(a->largest[0].count, 2);
  EXPECT_EQ(a->peak_allocated, 1000 + 500 + 4096 + 8192);
}

TEST(MemoryAnalysisTest, InconsistentSnapshotIsRefused) {
  Snapshot s = Fixture();
  s.segments.clear();  // the trace now frees more than the segments ever held
  auto a = Analyze(s);
  ASSERT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(a.status().message()).find("do not belong together"), std::string::npos);
}

TEST(MemoryAnalysisTest, EmptyTraceIsRefused) {
  Snapshot s = Fixture();
  s.device_traces[0].clear();
  auto a = Analyze(s);
  ASSERT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(a.status().message()).find("trace is empty"), std::string::npos);
  AnalysisOptions o;
  o.device = 3;
  EXPECT_EQ(Analyze(Fixture(), o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemoryAnalysisTest, FrameFormatAndFilterMatchMemoryViz) {
  EXPECT_EQ(FormatFrame({"f()", "/a/b/c.cc", 7}), "c.cc:7:f()");
  EXPECT_EQ(FormatFrame({"g", "plain.py", 1}), "plain.py:1:g");
  EXPECT_FALSE(KeepFrame({"CapturedTraceback::gather", "x.cc", 1}));
  EXPECT_FALSE(KeepFrame({"at::foo", "/aten/src/ATen/core/boxing/impl.h", 1}));
  EXPECT_TRUE(KeepFrame({"benchd::worker::X()", "/src/worker/x.cc", 1}));
  EXPECT_FALSE(
      KeepFrame({"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
                 "unsigned long, CUstream_st*)",
                 "libc10_cuda.so", 273026}));
}

}  // namespace
}  // namespace benchd::memory
