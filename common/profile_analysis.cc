#include "common/profile_analysis.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "common/stats.h"

namespace benchd {
namespace {

using Kind = ProfileEvent::Kind;

constexpr double kNs = 1e-9;

// Links each event to the range it belongs to: its nearest range ancestor
// through links on its own thread, or else the innermost range on another
// thread open when the event started (the autograd engine's thread; see the
// header). A link to a parent on another thread is not
// followed: Kineto 2.11 hangs the engine thread's events of every profiled
// step under the first step's "backward" (seen on an H100), so times decide.
class RangeLinks {
 public:
  explicit RangeLinks(const std::vector<ProfileEvent>& events) : events_(events) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind == Kind::kRange) ranges_.push_back(static_cast<int>(i));
    }
    owner_.assign(events.size(), kUnknown);
  }

  // The range that holds event i (for a range: the enclosing one), or -1.
  int Owner(int i) {
    if (owner_[i] != kUnknown) return owner_[i];
    const ProfileEvent& e = events_[i];
    int owner = -1;
    if (e.parent >= 0 && !CrossThread(i)) {
      owner = events_[e.parent].kind == Kind::kRange ? e.parent : Owner(e.parent);
    }
    // A range's enclosing range is Before it, so walking out always ends.
    if (owner >= 0 && e.kind == Kind::kRange && !Before(owner, i)) owner = -1;
    if (owner < 0 && e.kind != Kind::kDevice) owner = Adopter(i);
    owner_[i] = owner;
    return owner;
  }

 private:
  static constexpr int kUnknown = -2;

  // Started earlier, or at the same time and listed first (parents come
  // before their children): ranges on two threads that open in the same
  // nanosecond would otherwise adopt each other.
  bool Before(int a, int b) const {
    return std::make_pair(events_[a].start_ns, a) < std::make_pair(events_[b].start_ns, b);
  }

  // A host event whose parent is on another host thread.
  bool CrossThread(int i) const {
    const ProfileEvent& e = events_[i];
    return e.kind != Kind::kDevice && e.parent >= 0 && events_[e.parent].kind != Kind::kDevice &&
           events_[e.parent].thread != e.thread;
  }

  int Adopter(int orphan) const {
    const ProfileEvent& r = events_[orphan];
    int best = -1;
    for (int i : ranges_) {
      const ProfileEvent& c = events_[i];
      if (c.thread == r.thread || i == orphan) continue;
      if (r.kind == Kind::kRange && !Before(i, orphan)) continue;
      if (c.start_ns <= r.start_ns && r.start_ns <= c.end_ns &&
          (best < 0 || c.start_ns >= events_[best].start_ns)) {
        best = i;  // the latest-starting range that contains it is the innermost
      }
    }
    return best;
  }

  const std::vector<ProfileEvent>& events_;
  std::vector<int> ranges_;
  std::vector<int> owner_;
};

// Everything counted in one range name, over all its instances.
struct RangeTotals {
  std::string parent;
  int64_t instances = 0;
  double wall = 0;
  int64_t first_start = 0;
  std::map<std::string, std::vector<double>> row_seconds;  // by row name
  std::map<std::string, bool> row_gemm;
  std::map<std::string, std::string> row_op;
};

// The nearest operator ancestor of event i (the event itself for an operator).
std::string LaunchingOperator(const std::vector<ProfileEvent>& events, int i) {
  for (int j = i; j >= 0; j = events[j].parent) {
    if (events[j].kind == Kind::kOperator) return events[j].name;
  }
  return "";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool IsMatmulOperator(const std::string& op) {
  static const char* const kOps[] = {
      "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",    "aten::addbmm",
      "aten::mv", "aten::addmv", "aten::dot", "aten::_scaled_mm", "aten::_int_mm"};
  for (const char* k : kOps) {
    if (op == k) return true;
  }
  return false;
}

bool LooksLikeGemmKernel(const std::string& kernel) {
  const std::string l = Lower(kernel);
  for (const char* k : {"gemm", "nvjet", "xmma", "wgmma"}) {
    if (l.find(k) != std::string::npos) return true;
  }
  return false;
}

ProfileAnalysis AnalyzeProfile(const ProfileAnalysisInput& in) {
  const std::vector<ProfileEvent>& ev = in.events;
  const int n = static_cast<int>(ev.size());
  RangeLinks links(ev);

  // Self time of operators and ranges: their time less their children's on
  // the same thread (device activities and runtime calls are not subtracted:
  // a runtime call is host time inside its operator).
  std::vector<double> self_ns(n, 0);
  for (int i = 0; i < n; ++i) {
    if (ev[i].kind == Kind::kOperator || ev[i].kind == Kind::kRange) {
      self_ns[i] += static_cast<double>(ev[i].end_ns - ev[i].start_ns);
    }
  }
  for (int i = 0; i < n; ++i) {
    const int p = ev[i].parent;
    if (p < 0 || (ev[i].kind != Kind::kOperator && ev[i].kind != Kind::kRange)) continue;
    if ((ev[p].kind == Kind::kOperator || ev[p].kind == Kind::kRange) &&
        ev[p].thread == ev[i].thread) {
      self_ns[p] -= static_cast<double>(ev[i].end_ns - ev[i].start_ns);
    }
  }

  // The rows: device activities, or operators' self times.
  struct Row {
    int event;
    double seconds;
  };
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    if (in.device_rows && ev[i].kind == Kind::kDevice) {
      rows.push_back({i, static_cast<double>(ev[i].end_ns - ev[i].start_ns) * kNs});
    } else if (!in.device_rows && ev[i].kind == Kind::kOperator) {
      rows.push_back({i, std::max(0.0, self_ns[i]) * kNs});
    }
  }

  // Device work queued before a moment: device activities sorted by the
  // start of the runtime call that launched them (their own start when not
  // linked), with the latest end so far. A CUDA event recorded at that moment
  // completes only after all of it, so a range's device time begins there.
  std::vector<std::pair<int64_t, int64_t>> device_by_start;  // launch, running max end
  if (in.device_rows) {
    for (int i = 0; i < n; ++i) {
      if (ev[i].kind != Kind::kDevice) continue;
      const int p = ev[i].parent;
      const int64_t launch =
          p >= 0 && ev[p].kind == Kind::kRuntime ? ev[p].start_ns : ev[i].start_ns;
      device_by_start.push_back({launch, ev[i].end_ns});
    }
    std::sort(device_by_start.begin(), device_by_start.end());
    for (size_t k = 1; k < device_by_start.size(); ++k) {
      device_by_start[k].second =
          std::max(device_by_start[k].second, device_by_start[k - 1].second);
    }
  }
  auto device_busy_until = [&](int64_t t) -> int64_t {
    auto it = std::lower_bound(device_by_start.begin(), device_by_start.end(),
                               std::make_pair(t, INT64_MIN));
    return it == device_by_start.begin() ? INT64_MIN : std::prev(it)->second;
  };

  // The last end of the rows inside each range instance (device rows only).
  std::vector<int64_t> last_row_end(n, INT64_MIN);
  std::unordered_map<std::string, RangeTotals> totals;
  std::vector<std::string> order;
  auto totals_of = [&](int range) -> RangeTotals& {
    auto [it, inserted] = totals.try_emplace(ev[range].name);
    if (inserted) {
      order.push_back(ev[range].name);
      const int outer = links.Owner(range);
      it->second.parent = outer >= 0 ? ev[outer].name : "";
      it->second.first_start = ev[range].start_ns;
    }
    return it->second;
  };

  ProfileAnalysis out;
  for (const Row& row : rows) {
    int range = links.Owner(row.event);
    if (range < 0) {
      ++out.unattributed_kernels;
      out.unattributed_kernel_seconds += row.seconds;
      continue;
    }
    const std::string& name = ev[row.event].name;
    const std::string op = LaunchingOperator(ev, row.event);
    const bool gemm = IsMatmulOperator(op) || LooksLikeGemmKernel(name);
    // Counted in its range and in every range around it.
    for (; range >= 0; range = links.Owner(range)) {
      RangeTotals& t = totals_of(range);
      t.row_seconds[name].push_back(row.seconds);
      t.row_gemm[name] = gemm;
      t.row_op.try_emplace(name, in.device_rows ? op : LaunchingOperator(ev, ev[row.event].parent));
      last_row_end[range] = std::max(last_row_end[range], ev[row.event].end_ns);
    }
  }

  for (int i = 0; i < n; ++i) {
    if (ev[i].kind != Kind::kRange) continue;
    RangeTotals& t = totals_of(i);
    ++t.instances;
    t.first_start = std::min(t.first_start, ev[i].start_ns);
    int64_t start = ev[i].start_ns, end = ev[i].end_ns;
    if (in.device_rows) {
      start = std::max(start, device_busy_until(start));
      end = std::max(end, last_row_end[i]);
    }
    t.wall += std::max<int64_t>(0, end - start) * kNs;
  }

  std::sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return totals[a].first_start < totals[b].first_start;
  });
  const double steps = static_cast<double>(std::max<int64_t>(1, in.steps));
  for (const std::string& name : order) {
    const RangeTotals& t = totals[name];
    v1::ProfileRange r;
    r.set_name(name);
    r.set_parent(t.parent);
    r.set_instances(t.instances);
    double kernel = 0, gemm = 0;
    int64_t launches = 0;
    for (const auto& [row, secs] : t.row_seconds) {
      v1::KernelRow* k = r.add_kernels();
      const v1::Stats s = ComputeStats(secs);
      const double total = s.mean() * static_cast<double>(s.count());
      k->set_name(row);
      k->set_gemm(t.row_gemm.at(row));
      k->set_launched_by(t.row_op.at(row));
      k->set_total_seconds(total);
      k->set_instances(s.count());
      k->set_avg_seconds(s.mean());
      k->set_med_seconds(s.median());
      k->set_min_seconds(s.min());
      k->set_max_seconds(s.max());
      k->set_stddev_seconds(s.std());
      k->set_total_seconds_per_step(total / steps);
      k->set_instances_per_step(static_cast<double>(s.count()) / steps);
      kernel += total;
      launches += s.count();
      if (k->gemm()) gemm += total;
    }
    for (v1::KernelRow& k : *r.mutable_kernels()) {
      k.set_time_percent(kernel > 0 ? 100.0 * k.total_seconds() / kernel : 0.0);
    }
    std::sort(r.mutable_kernels()->begin(), r.mutable_kernels()->end(),
              [](const v1::KernelRow& a, const v1::KernelRow& b) {
                return a.total_seconds() != b.total_seconds()
                           ? a.total_seconds() > b.total_seconds()
                           : a.name() < b.name();
              });
    const double idle = std::max(0.0, t.wall - kernel);
    r.set_wall_seconds(t.wall);
    r.set_kernel_seconds(kernel);
    r.set_idle_seconds(idle);
    r.set_idle_fraction(t.wall > 0 ? idle / t.wall : 0.0);
    r.set_gemm_seconds(gemm);
    r.set_gemm_fraction(kernel > 0 ? gemm / kernel : 0.0);
    r.set_kernel_count(launches);
    r.set_wall_seconds_per_step(t.wall / steps);
    r.set_kernel_seconds_per_step(kernel / steps);
    if (auto it = in.flops_per_step.find(name); it != in.flops_per_step.end()) {
      r.set_flops_per_step(it->second);
      if (kernel > 0) r.set_kernel_flops_per_second(it->second / (kernel / steps));
    }
    out.ranges.push_back(std::move(r));
  }
  return out;
}

std::string ShortKernelName(const std::string& name, size_t width) {
  std::string s = name;
  if (s.size() > width) {
    // Elide the outermost <...> and (...) groups, innermost text first kept.
    std::string elided;
    int angle = 0, paren = 0;
    for (char c : s) {
      if (c == '<') {
        if (angle++ == 0 && paren == 0) elided += "<...>";
        continue;
      }
      if (c == '>' && angle > 0) {
        --angle;
        continue;
      }
      if (c == '(' && angle == 0) {
        if (paren++ == 0) elided += "(...)";
        continue;
      }
      if (c == ')' && paren > 0 && angle == 0) {
        --paren;
        continue;
      }
      if (angle == 0 && paren == 0) elided += c;
    }
    s = elided;
  }
  if (s.size() > width && width > 3) s = s.substr(0, width - 3) + "...";
  return s;
}

}  // namespace benchd
