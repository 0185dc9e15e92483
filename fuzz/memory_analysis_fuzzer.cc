// The memory request's analysis and picture (common/memory_analysis.h,
// memory_svg.h) on any snapshot the worker's pickle reader
// (worker/memory_snapshot.cc) could hand them: segments and blocks in any
// state, trace events of every action on any devices in any order (frees
// without allocs, allocs never freed, one address reused), annotations
// unpaired, nested or out of order, shared stacks. Sizes are the
// allocator's size_t counts, so 0..2^44 (16 TiB); addresses and times are
// any int64.
//
// Input (little-endian; fuzz/fuzz_input.h):
//   u8: analyzed device = (b & 7) - 1 (-1: the only one), top_allocations = b >> 3
//   u8: the picture's max_bands
//   records until the end, each a u8 tag (mod 4):
//     0 segment: u8 device, i64 address, i64 total_size, u8 blocks, each
//       i64 size, i64 requested_size, u8 state (mod 4: active_allocated,
//       active_pending_free, inactive, other)
//     1 trace event: u8 device (mod 8), u8 action (mod 10, memory_trace.h's
//       order), i64 addr, i64 size, i64 time_us, i64 device_free, u8 stack
//       (0: none, k: the (k-1 mod count)th stack record so far)
//     2 annotation: u8 device, u8 stage (bit 0: START), i64 time_us, u8 len, name
//     3 stack: u8 frames, each u8 len, name, u8 len, filename, i64 line
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/memory_analysis.h"
#include "common/memory_svg.h"
#include "common/memory_trace.h"
#include "fuzz/fuzz_input.h"

namespace {

namespace mem = benchd::memory;

constexpr int64_t kSizeMask = (int64_t{1} << 44) - 1;
constexpr int kDevices = 8;
const char* const kStates[] = {"active_allocated", "active_pending_free", "inactive", "other"};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "memory_analysis_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  benchd::fuzz::Input in(data, size);
  const uint8_t header = in.U8();
  mem::AnalysisOptions options;
  options.device = (header & 7) - 1;
  options.top_allocations = header >> 3;
  mem::TimelineOptions picture;
  picture.title = "fuzz <&> \"title\"";
  picture.max_bands = in.U8();

  mem::Snapshot s;
  std::vector<mem::Frames> stacks;
  while (!in.done()) {
    switch (in.U8() % 4) {
      case 0: {
        mem::Segment seg;
        seg.device = in.U8();
        seg.address = in.I64();
        seg.total_size = in.I64() & kSizeMask;
        for (int n = in.U8(); n > 0 && !in.done(); --n) {
          mem::Block b;
          b.size = in.I64() & kSizeMask;
          b.requested_size = in.I64() & kSizeMask;
          b.state = kStates[in.U8() % 4];
          seg.blocks.push_back(std::move(b));
        }
        s.segments.push_back(std::move(seg));
        break;
      }
      case 1: {
        const int device = in.U8() % kDevices;
        mem::TraceEvent e;
        e.action = static_cast<mem::Action>(in.U8() % 10);
        e.addr = in.I64();
        e.size = in.I64() & kSizeMask;
        e.time_us = in.I64();
        e.device_free = in.I64();
        if (const int k = in.U8(); k > 0 && !stacks.empty())
          e.frames = stacks[(k - 1) % stacks.size()];
        if (static_cast<int>(s.device_traces.size()) <= device) s.device_traces.resize(device + 1);
        s.device_traces[device].push_back(std::move(e));
        break;
      }
      case 2: {
        mem::Annotation a;
        a.device = in.U8();
        a.start = (in.U8() & 1) != 0;
        a.time_us = in.I64();
        a.name = in.String();
        s.annotations.push_back(std::move(a));
        break;
      }
      default: {
        auto frames = std::make_shared<std::vector<mem::Frame>>();
        for (int n = in.U8(); n > 0 && !in.done(); --n) {
          mem::Frame f;
          f.name = in.String();
          f.filename = in.String();
          f.line = in.I64();
          frames->push_back(std::move(f));
        }
        stacks.push_back(std::move(frames));
        break;
      }
    }
  }

  auto a = mem::Analyze(s, options);
  if (!a.ok()) {
    if (a.status().code() != absl::StatusCode::kInvalidArgument) Fail("not INVALID_ARGUMENT");
    return 0;
  }
  const size_t entries = static_cast<size_t>(a->entries);
  if (a->allocated_after.size() != entries || a->reserved_after.size() != entries ||
      a->phase_of.size() != entries) {
    Fail("per-event series of another length than the trace");
  }
  if (a->phases.size() != 3) Fail("phases");
  if (static_cast<int>(a->largest.size()) > options.top_allocations) Fail("too many largest");
  if (a->peak_allocated < a->baseline_allocated || a->peak_allocated < a->final_allocated ||
      a->peak_reserved < a->baseline_reserved || a->peak_reserved < a->final_reserved) {
    Fail("a peak below the baseline or the end");
  }
  const std::string svg = mem::RenderTimelineSvg(s, *a, picture);
  if (svg.size() < 7 || svg.compare(svg.size() - 7, 7, "</svg>\n") != 0) Fail("svg not closed");
  (void)mem::HumanBytes(a->peak_allocated);
  return 0;
}
