#include "common/memory_analysis.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace benchd::memory {
namespace {

bool HeldAtEnd(const Block& b) {
  // Both still count in the trace's accounting: a pending free has had its
  // free_requested but not its free_completed.
  return b.state == "active_allocated" || b.state == "active_pending_free";
}

// The device whose trace to read: the requested one, or the only one with events.
absl::StatusOr<int> PickDevice(const Snapshot& s, int requested) {
  if (requested >= 0) {
    if (requested >= static_cast<int>(s.device_traces.size()) ||
        s.device_traces[requested].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory snapshot: no trace events for device ", requested));
    }
    return requested;
  }
  std::vector<int> with_events;
  for (size_t d = 0; d < s.device_traces.size(); ++d) {
    if (!s.device_traces[d].empty()) with_events.push_back(static_cast<int>(d));
  }
  if (with_events.empty()) {
    return absl::InvalidArgumentError(
        "memory snapshot: the trace is empty (was the history recorded, with max_entries > 0?)");
  }
  if (with_events.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("memory snapshot: traces on devices ",
                                                   absl::StrJoin(with_events, ", "),
                                                   "; name the device to analyze"));
  }
  return with_events.front();
}

// START/END annotations of one device paired into intervals (a stack per
// name, so nested and repeated scopes pair up); an unclosed START ends at +inf.
std::vector<PhaseInterval> Intervals(const std::vector<Annotation>& annotations, int device) {
  std::vector<Annotation> mine;
  for (const Annotation& a : annotations) {
    if (a.device == device) mine.push_back(a);
  }
  std::stable_sort(mine.begin(), mine.end(),
                   [](const Annotation& a, const Annotation& b) { return a.time_us < b.time_us; });
  std::map<std::string, std::vector<size_t>> open;
  std::vector<PhaseInterval> out;
  for (const Annotation& a : mine) {
    if (a.start) {
      open[a.name].push_back(out.size());
      out.push_back({a.name, a.time_us, INT64_MAX});
    } else if (auto it = open.find(a.name); it != open.end() && !it->second.empty()) {
      out[it->second.back()].end_us = a.time_us;
      it->second.pop_back();
    }
  }
  return out;
}

}  // namespace

std::string FormatFrame(const Frame& f) {
  const size_t slash = f.filename.rfind('/');
  const std::string file = slash == std::string::npos ? f.filename : f.filename.substr(slash + 1);
  return absl::StrCat(file, ":", f.line, ":", f.name);
}

bool KeepFrame(const Frame& f) {
  static const char* const kOmitFunctions[] = {
      "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
      "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
      // Not in memory_viz's list: the allocator's own frames say nothing about
      // who allocated, and in backward they would name every allocation.
      "CUDACachingAllocator::"};
  static const char* const kOmitFiles[] = {"core/boxing",
                                           "/Register",
                                           "/Redispatch",
                                           "pythonrun.c",
                                           "Modules/main.c",
                                           "Objects/call.c",
                                           "Objects/methodobject.c",
                                           "pycore_ceval.h",
                                           "ceval.c",
                                           "cpython/abstract.h"};
  for (const char* s : kOmitFunctions) {
    if (f.name.find(s) != std::string::npos) return false;
  }
  for (const char* s : kOmitFiles) {
    if (f.filename.find(s) != std::string::npos) return false;
  }
  return true;
}

absl::StatusOr<Analysis> Analyze(const Snapshot& s, const AnalysisOptions& o) {
  auto device = PickDevice(s, o.device);
  if (!device.ok()) return device.status();
  Analysis a;
  a.device = *device;
  const std::vector<TraceEvent>& trace = s.device_traces[a.device];
  a.entries = static_cast<int64_t>(trace.size());

  // Net change over the trace, and what the segments hold at its end.
  int64_t net_allocated = 0, net_reserved = 0;
  for (const TraceEvent& e : trace) {
    switch (e.action) {
      case Action::kAlloc:
        net_allocated += e.size;
        break;
      case Action::kFreeCompleted:
        net_allocated -= e.size;
        break;
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
        net_reserved += e.size;
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        net_reserved -= e.size;
        break;
      default:
        break;
    }
  }
  for (const Segment& seg : s.segments) {
    if (seg.device != a.device) continue;
    a.final_reserved += seg.total_size;
    for (const Block& b : seg.blocks) {
      // The trace counts requested bytes (the allocator's orig_size), not the
      // block sizes rounded up to 512 B; so does the baseline.
      if (HeldAtEnd(b)) a.final_allocated += b.requested_size;
    }
  }
  a.baseline_allocated = a.final_allocated - net_allocated;
  a.baseline_reserved = a.final_reserved - net_reserved;
  if (a.baseline_allocated < 0 || a.baseline_reserved < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory snapshot: the trace frees more than was held (baseline allocated ",
                     a.baseline_allocated, ", reserved ", a.baseline_reserved,
                     "): its segments and its trace do not belong together"));
  }

  a.intervals = Intervals(s.annotations, a.device);
  std::sort(a.intervals.begin(), a.intervals.end(),
            [](const PhaseInterval& x, const PhaseInterval& y) { return x.start_us < y.start_us; });
  for (const char* name : kPhaseNames) a.phases.push_back(PhaseStats{name});
  auto phase_index = [&](const std::string& name) -> int {
    for (size_t i = 0; i < a.phases.size(); ++i) {
      if (a.phases[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  // The innermost phase (of kPhaseNames) holding time t: the latest start.
  auto phase_at = [&](int64_t t) -> std::string {
    std::string best;
    int64_t best_start = INT64_MIN;
    for (const PhaseInterval& iv : a.intervals) {
      if (iv.start_us > t) break;
      if (t <= iv.end_us && iv.start_us >= best_start && phase_index(iv.name) >= 0) {
        best = iv.name;
        best_start = iv.start_us;
      }
    }
    return best;
  };

  // Walk the trace; phase starts are taken between the events around them.
  std::vector<std::pair<int64_t, int>> starts;  // (time, phase index), by time
  for (const PhaseInterval& iv : a.intervals) {
    if (int p = phase_index(iv.name); p >= 0) starts.push_back({iv.start_us, p});
  }
  size_t next_start = 0;
  int64_t allocated = a.baseline_allocated, reserved = a.baseline_reserved;
  a.peak_allocated = allocated;
  a.peak_reserved = reserved;
  auto observe_start = [&](int p) {
    PhaseStats& ps = a.phases[p];
    if (!ps.seen) {
      ps.seen = true;
      ps.start_allocated = allocated;
      ps.start_reserved = reserved;
    }
    ps.peak_allocated = std::max(ps.peak_allocated, allocated);
    ps.peak_reserved = std::max(ps.peak_reserved, reserved);
  };
  a.allocated_after.reserve(trace.size());
  a.reserved_after.reserve(trace.size());
  a.phase_of.reserve(trace.size());
  // Largest allocations, grouped by (size, phase, stack).
  struct Key {
    int64_t size;
    std::string phase;
    const void* frames;
    bool operator<(const Key& k) const {
      return std::tie(size, phase, frames) < std::tie(k.size, k.phase, k.frames);
    }
  };
  std::map<Key, std::pair<int64_t, Frames>> groups;
  for (const TraceEvent& e : trace) {
    while (next_start < starts.size() && starts[next_start].first < e.time_us) {
      observe_start(starts[next_start++].second);
    }
    switch (e.action) {
      case Action::kAlloc:
        allocated += e.size;
        break;
      case Action::kFreeCompleted:
        allocated -= e.size;
        break;
      case Action::kSegmentAlloc:
      case Action::kSegmentMap:
        reserved += e.size;
        break;
      case Action::kSegmentFree:
      case Action::kSegmentUnmap:
        reserved -= e.size;
        break;
      default:
        break;
    }
    const std::string phase = phase_at(e.time_us);
    if (int p = phase_index(phase); p >= 0) {
      PhaseStats& ps = a.phases[p];
      if (!ps.seen) observe_start(p);
      ps.peak_allocated = std::max(ps.peak_allocated, allocated);
      ps.peak_reserved = std::max(ps.peak_reserved, reserved);
    }
    a.peak_allocated = std::max(a.peak_allocated, allocated);
    a.peak_reserved = std::max(a.peak_reserved, reserved);
    a.allocated_after.push_back(allocated);
    a.reserved_after.push_back(reserved);
    a.phase_of.push_back(phase);
    if (e.action == Action::kAlloc) {
      auto& g = groups[Key{e.size, phase, e.frames.get()}];
      ++g.first;
      g.second = e.frames;
    }
  }
  while (next_start < starts.size()) observe_start(starts[next_start++].second);

  std::vector<std::pair<Key, std::pair<int64_t, Frames>>> sorted(groups.begin(), groups.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    if (x.first.size != y.first.size) return x.first.size > y.first.size;
    return x.second.first > y.second.first;
  });
  for (const auto& [key, value] : sorted) {
    if (static_cast<int>(a.largest.size()) >= o.top_allocations) break;
    LargeAllocation l;
    l.size = key.size;
    l.phase = key.phase;
    l.count = value.first;
    if (value.second) {
      for (const Frame& f : *value.second) {
        if (!KeepFrame(f)) continue;
        if (l.origin.empty() && !o.origin_marker.empty() &&
            f.name.find(o.origin_marker) != std::string::npos) {
          l.origin = FormatFrame(f);
        }
        if (l.frames.size() < o.max_frames) l.frames.push_back(FormatFrame(f));
      }
    }
    a.largest.push_back(std::move(l));
  }
  return a;
}

}  // namespace benchd::memory
