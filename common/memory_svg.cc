#include "common/memory_svg.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/xml_escape.h"

namespace benchd::memory {
namespace {

// Matplotlib's tab10, the palette memory_viz's bands resemble.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char* PhaseColor(const std::string& phase) {
  if (phase == "forward") return "#dbe9f6";
  if (phase == "backward") return "#fde5cf";
  if (phase == "optimizer_step") return "#dcf0d5";
  return "#eeeeee";
}

// A tick step of 1, 2 or 5 times a power of two's unit, about `target` ticks.
double NiceStep(double range, int target) {
  const double raw = range / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-12))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

struct Band {
  int64_t size = 0;
  int64_t start = 0, end = 0;  // timesteps [start, end)
  std::string phase;
  std::string origin;
  // (timestep, offset from the bottom of the stack) where its offset changes.
  std::vector<std::pair<int64_t, int64_t>> offsets;
};

}  // namespace

std::string HumanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::llabs(bytes) >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (std::llabs(bytes) >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", b / (1 << 20));
  if (std::llabs(bytes) >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", b / (1 << 10));
  return absl::StrCat(bytes, " B");
}

std::string RenderTimelineSvg(const Snapshot& s, const Analysis& a, const TimelineOptions& o) {
  const std::vector<TraceEvent>& trace = s.device_traces.at(a.device);

  // Timesteps: the alloc and free_completed events, in trace order.
  struct Alloc {
    int64_t size, start, end;
    size_t event;
  };
  std::vector<Alloc> allocs;
  std::vector<int64_t> step_time_us;  // time of each timestep
  std::vector<size_t> step_event;     // trace index of each timestep
  std::unordered_map<int64_t, size_t> live_by_addr;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (e.action == Action::kAlloc) {
      live_by_addr[e.addr] = allocs.size();
      allocs.push_back({e.size, static_cast<int64_t>(step_time_us.size()), -1, i});
    } else if (e.action == Action::kFreeCompleted) {
      if (auto it = live_by_addr.find(e.addr); it != live_by_addr.end()) {
        allocs[it->second].end = static_cast<int64_t>(step_time_us.size());
        live_by_addr.erase(it);
      }
      // A free of a block allocated before recording: part of the baseline,
      // which the picture keeps flat (the bottom band).
    } else {
      continue;
    }
    step_time_us.push_back(e.time_us);
    step_event.push_back(i);
  }
  const int64_t steps = std::max<int64_t>(1, static_cast<int64_t>(step_time_us.size()));
  for (Alloc& al : allocs) {
    if (al.end < 0) al.end = steps;
  }

  // The largest allocations get bands, in allocation order; the rest are summed.
  std::vector<size_t> by_size(allocs.size());
  for (size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t x, size_t y) { return allocs[x].size > allocs[y].size; });
  if (static_cast<int>(by_size.size()) > o.max_bands) by_size.resize(o.max_bands);
  std::sort(by_size.begin(), by_size.end());
  std::vector<int> band_of(allocs.size(), -1);
  std::vector<Band> bands;
  for (size_t i : by_size) {
    band_of[i] = static_cast<int>(bands.size());
    Band b;
    b.size = allocs[i].size;
    b.start = allocs[i].start;
    b.end = allocs[i].end;
    b.phase = a.phase_of.at(allocs[i].event);
    if (const Frames& f = trace[allocs[i].event].frames) {
      for (const Frame& fr : *f) {
        if (KeepFrame(fr) && fr.name.find("benchd::") != std::string::npos) {
          b.origin = FormatFrame(fr);
          break;
        }
      }
    }
    bands.push_back(std::move(b));
  }

  // Walk the timesteps: band offsets (changing when a band below is freed),
  // the sum of the small allocations, and the top of the bands.
  std::vector<int64_t> small(steps + 1, 0), bands_top(steps + 1, 0);
  {
    std::vector<int> live;  // band ids, bottom to top
    int64_t small_now = 0, bands_now = 0;
    size_t next_alloc = 0;
    // Ends per timestep.
    std::vector<std::vector<size_t>> ends(steps + 1);
    for (size_t i = 0; i < allocs.size(); ++i) ends[allocs[i].end].push_back(i);
    for (int64_t t = 0; t <= steps; ++t) {
      // Those still held at the end keep their place to the right edge.
      for (size_t i : t < steps ? ends[t] : std::vector<size_t>{}) {
        const int b = band_of[i];
        if (b < 0) {
          small_now -= allocs[i].size;
          continue;
        }
        auto it = std::find(live.begin(), live.end(), b);
        if (it == live.end()) continue;
        it = live.erase(it);
        bands_now -= bands[b].size;
        for (; it != live.end(); ++it) {
          Band& above = bands[*it];
          above.offsets.push_back({t, above.offsets.back().second - bands[b].size});
        }
      }
      while (next_alloc < allocs.size() && allocs[next_alloc].start == t) {
        const int b = band_of[next_alloc];
        if (b < 0) {
          small_now += allocs[next_alloc].size;
        } else {
          bands[b].offsets.push_back({t, bands_now});
          bands_now += bands[b].size;
          live.push_back(b);
        }
        ++next_alloc;
      }
      small[t] = small_now;
      bands_top[t] = bands_now;
    }
  }

  // Geometry.
  const double left = 90, right = 20, top = 64, bottom = 80;
  const double pw = o.width - left - right, ph = o.height - top - bottom;
  int64_t ymax_bytes = a.baseline_allocated;
  for (int64_t t = 0; t < steps; ++t) {
    ymax_bytes = std::max(ymax_bytes, a.baseline_allocated + bands_top[t] + small[t]);
  }
  ymax_bytes = std::max<int64_t>({ymax_bytes, a.peak_allocated, 1});
  const double ytop = static_cast<double>(ymax_bytes) * 1.08;
  auto X = [&](int64_t t) {
    return left + pw * static_cast<double>(t) / static_cast<double>(steps);
  };
  auto Y = [&](double bytes) { return top + ph - ph * bytes / ytop; };
  auto P = [](double x, double y) { return absl::StrFormat("%.1f,%.1f ", x, y); };

  std::string svg;
  absl::StrAppendFormat(&svg,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
                        o.width, o.height, o.width, o.height);
  absl::StrAppend(&svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  absl::StrAppend(&svg, "<text x=\"", left, "\" y=\"22\" font-size=\"16\" font-weight=\"bold\">",
                  XmlEscape(o.title.empty() ? "Active memory timeline" : o.title), "</text>\n");
  absl::StrAppend(
      &svg, "<text x=\"", left, "\" y=\"40\" fill=\"#444\">",
      XmlEscape(absl::StrCat("peak allocated ", HumanBytes(a.peak_allocated), ", peak reserved ",
                             HumanBytes(a.peak_reserved), ", resident before recording ",
                             HumanBytes(a.baseline_allocated), o.subtitle.empty() ? "" : "; ",
                             o.subtitle)),
      "</text>\n");

  // Phases, behind everything, named above the plot.
  std::vector<int64_t> times = step_time_us;
  auto step_at = [&](int64_t us) {
    return static_cast<int64_t>(std::lower_bound(times.begin(), times.end(), us) - times.begin());
  };
  double last_label_end = -1e9;
  for (const PhaseInterval& iv : a.intervals) {
    bool known = false;
    for (const char* n : kPhaseNames) known = known || iv.name == n;
    if (!known) continue;
    const int64_t t0 = step_at(iv.start_us);
    const int64_t t1 = iv.end_us == INT64_MAX ? steps : step_at(iv.end_us);
    const double x0 = X(t0), x1 = X(std::max(t1, t0));
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                          "<title>%s</title></rect>\n",
                          x0, top, std::max(x1 - x0, 0.5), ph, PhaseColor(iv.name),
                          XmlEscape(iv.name));
    // The name, or a short one where the phase is narrow ("optimizer_step" -> "opt").
    std::string label = iv.name;
    if (x1 - x0 < 7.0 * static_cast<double>(label.size())) label = label.substr(0, 3);
    const double label_w = 7.0 * static_cast<double>(label.size());
    if (x1 - x0 >= label_w && (x0 + x1) / 2 - label_w / 2 > last_label_end) {
      absl::StrAppendFormat(&svg,
                            "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\" text-anchor=\"middle\">%s"
                            "</text>\n",
                            (x0 + x1) / 2, top - 6, XmlEscape(label));
      last_label_end = (x0 + x1) / 2 + label_w / 2;
    }
  }

  // Grid and axes.
  const double ystep = NiceStep(ytop / static_cast<double>(1 << 20), 6) * (1 << 20);
  for (double v = 0; v <= ytop; v += ystep) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#333\">%s</text>\n",
        left, left + pw, Y(v), Y(v), left - 6, Y(v) + 4, HumanBytes(static_cast<int64_t>(v)));
  }
  const double xstep = NiceStep(static_cast<double>(steps), 8);
  for (double t = 0; t <= static_cast<double>(steps); t += xstep) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333\">%d</text>\n",
        X(static_cast<int64_t>(t)), X(static_cast<int64_t>(t)), top + ph, top + ph + 5,
        X(static_cast<int64_t>(t)), top + ph + 18, static_cast<int64_t>(t));
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#333\">"
                        "allocation events (alloc and free, in trace order; %d in all)</text>\n",
                        left + pw / 2, top + ph + 36, steps);

  // Resident before recording.
  const double base = static_cast<double>(a.baseline_allocated);
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"#b0b0b0\"><title>resident before recording: %s</title></rect>\n",
                        left, Y(base), pw, Y(0) - Y(base), HumanBytes(a.baseline_allocated));

  // One polygon per band: the lower edge left to right, the upper back.
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    if (b.offsets.empty()) continue;
    std::string pts;
    std::vector<std::pair<double, double>> lower;
    for (size_t k = 0; k < b.offsets.size(); ++k) {
      const int64_t t = b.offsets[k].first;
      const double off = base + static_cast<double>(b.offsets[k].second);
      if (k > 0) lower.push_back({X(t), lower.back().second});
      lower.push_back({X(t), off});
    }
    lower.push_back({X(b.end), lower.back().second});
    for (const auto& [x, off] : lower) pts += P(x, Y(off));
    for (auto it = lower.rbegin(); it != lower.rend(); ++it) {
      pts += P(it->first, Y(it->second + static_cast<double>(b.size)));
    }
    pts.pop_back();
    absl::StrAppendFormat(&svg,
                          "<polygon points=\"%s\" fill=\"%s\" stroke=\"none\"><title>%s</title>"
                          "</polygon>\n",
                          pts, kPalette[i % 10],
                          XmlEscape(absl::StrCat(HumanBytes(b.size), " (", b.size, " B), ",
                                                 b.phase.empty() ? "outside the phases" : b.phase,
                                                 b.origin.empty() ? "" : ", ", b.origin)));
  }

  // The small allocations, summed on top of the bands: one step per
  // timestep, or per pixel column (its largest sum) when there are more.
  {
    struct Seg {
      double x0, x1, lo, hi;
    };
    std::vector<Seg> segs;
    const int64_t cols = std::max<int64_t>(1, static_cast<int64_t>(pw));
    const int64_t n = std::min(steps, cols);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t t0 = steps * c / n;
      const int64_t t1 = std::max(t0 + 1, steps * (c + 1) / n);
      int64_t best = t0;
      for (int64_t u = t0; u < t1; ++u) {
        if (small[u] > small[best]) best = u;
      }
      const double lo = base + static_cast<double>(bands_top[best]);
      segs.push_back({X(t0), X(t1), lo, lo + static_cast<double>(small[best])});
    }
    std::string pts;
    for (const Seg& g : segs) pts += P(g.x0, Y(g.lo)) + P(g.x1, Y(g.lo));
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      pts += P(it->x1, Y(it->hi)) + P(it->x0, Y(it->hi));
    }
    if (!pts.empty()) pts.pop_back();
    const size_t summed = allocs.size() - bands.size();
    absl::StrAppendFormat(&svg,
                          "<polygon points=\"%s\" fill=\"#6a7fa8\" fill-opacity=\"0.7\">"
                          "<title>%d smaller allocations, summed</title></polygon>\n",
                          pts, summed);
  }

  // The peak.
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" "
                        "stroke-dasharray=\"6,4\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                        "fill=\"#c00\">peak %s</text>\n",
                        left, left + pw, Y(static_cast<double>(a.peak_allocated)),
                        Y(static_cast<double>(a.peak_allocated)), left + pw - 4,
                        Y(static_cast<double>(a.peak_allocated)) - 4, HumanBytes(a.peak_allocated));
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#333\"/>\n",
                        left, top, pw, ph);

  // Legend.
  const double ly = o.height - 18;
  absl::StrAppendFormat(
      &svg,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"#b0b0b0\"/>"
      "<text x=\"%.1f\" y=\"%.1f\">resident before recording</text>\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
      "<text x=\"%.1f\" y=\"%.1f\">%d largest allocations, stacked in order</text>\n"
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"#6a7fa8\"/>"
      "<text x=\"%.1f\" y=\"%.1f\">%d smaller ones, summed</text>\n",
      left, ly - 10, left + 16, ly, left + 200, ly - 10, kPalette[0], left + 216, ly, bands.size(),
      left + 500, ly - 10, left + 516, ly, allocs.size() - bands.size());
  double lx = left + 700;
  for (const char* n : kPhaseNames) {
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" "
                          "stroke=\"#999\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          lx, ly - 10, PhaseColor(n), lx + 16, ly, n);
    lx += 30 + 7.0 * static_cast<double>(std::string(n).size());
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace benchd::memory
