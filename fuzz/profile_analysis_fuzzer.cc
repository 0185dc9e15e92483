// AnalyzeProfile (common/profile_analysis.h) on any event tree the worker's
// Flatten (worker/profile_run.cc) could hand it from the profiler: events of
// the four kinds in any order, on any threads, with any names and times,
// linked to parents at any index (before or after: Flatten relinks runtime
// calls to their operator) as long as the links form a forest, which the
// profiler's tree always is. Times stay within +-2^61 ns (73 years around the
// epoch), so differences of two cannot overflow.
//
// Input (little-endian; fuzz/fuzz_input.h):
//   u8 flags: bit 0 device_rows; steps = (flags >> 1) - 8
//   records until the end, each a u8 tag:
//     tag & 0x80: flops of a range: u8 len, name, f64 flops per step
//     else an event of kind tag & 3 (range, operator, runtime, device):
//       u8 thread, i16 parent (out of range = none), i64 start_ns, i64 end_ns
//       (each >> 2), u8 len, name
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/profile_analysis.h"
#include "fuzz/fuzz_input.h"

namespace {

using benchd::ProfileEvent;

// Cuts each cycle of parent links at the link that closes it.
void MakeForest(std::vector<ProfileEvent>& events) {
  const int n = static_cast<int>(events.size());
  std::vector<char> state(n, 0);  // 0 unseen, 1 on the current path, 2 done
  std::vector<int> path;
  for (int i = 0; i < n; ++i) {
    path.clear();
    int j = i;
    while (j >= 0 && state[j] == 0) {
      state[j] = 1;
      path.push_back(j);
      j = events[j].parent;
    }
    if (j >= 0 && state[j] == 1) events[path.back()].parent = -1;
    for (int k : path) state[k] = 2;
  }
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "profile_analysis_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  benchd::fuzz::Input in(data, size);
  benchd::ProfileAnalysisInput input;
  const uint8_t flags = in.U8();
  input.device_rows = (flags & 1) != 0;
  input.steps = static_cast<int64_t>(flags >> 1) - 8;
  while (!in.done()) {
    const uint8_t tag = in.U8();
    if (tag & 0x80) {
      std::string name = in.String();
      input.flops_per_step[name] = in.F64();
      continue;
    }
    ProfileEvent e;
    e.kind = static_cast<ProfileEvent::Kind>(tag & 3);
    e.thread = in.U8();
    e.parent = in.I16();
    e.start_ns = in.I64() >> 2;
    e.end_ns = in.I64() >> 2;
    e.name = in.String();
    input.events.push_back(std::move(e));
  }
  const int n = static_cast<int>(input.events.size());
  for (int i = 0; i < n; ++i) {
    ProfileEvent& e = input.events[i];
    if (e.parent >= n || e.parent == i || e.parent < 0) e.parent = -1;
  }
  MakeForest(input.events);

  const benchd::ProfileAnalysis out = benchd::AnalyzeProfile(input);

  if (out.unattributed_kernels < 0 || out.unattributed_kernels > n) Fail("unattributed count");
  std::set<std::string> names;
  for (const auto& r : out.ranges) {
    if (!names.insert(r.name()).second) Fail("range '" + r.name() + "' twice");
  }
  for (const auto& r : out.ranges) {
    if (!r.parent().empty() && !names.count(r.parent())) {
      Fail("range '" + r.name() + "' has parent '" + r.parent() + "', not a range");
    }
    int64_t launches = 0;
    for (const auto& k : r.kernels()) {
      launches += k.instances();
      for (size_t width : {4, 20, 60}) {
        if (benchd::ShortKernelName(k.name(), width).size() > width) {
          Fail("ShortKernelName longer than its width: " + k.name());
        }
      }
    }
    if (launches != r.kernel_count()) Fail("kernel_count is not the sum of the rows");
  }
  return 0;
}
