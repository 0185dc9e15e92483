#include "common/collective_svg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/collective_math.h"
#include "common/xml_escape.h"

namespace benchd {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string SeriesName(v1::CollectiveBackend backend, int world) {
  return absl::StrCat(BackendName(backend), ", ", world, " ranks");
}

std::string Tooltip(const v1::CollectiveRow& r) {
  return absl::StrCat(BackendName(r.backend()), " x", r.world_size(), ", ",
                      FormatBytes(r.size_bytes()), ": median ",
                      FormatSeconds(r.duration().median()),
                      absl::StrFormat(", busbw %.2f GB/s", r.busbw_gbps()));
}

}  // namespace

std::string FormatSeconds(double s) {
  if (s < 1e-3) return absl::StrFormat("%.3g µs", s * 1e6);
  if (s < 1) return absl::StrFormat("%.3g ms", s * 1e3);
  return absl::StrFormat("%.3g s", s);
}

std::string RenderLineChart(const LineChart& c) {
  const double left = 90, right = 200, top = 60, bottom = 60;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& s : c.series) {
    for (auto [x, y] : s.points) {
      if (c.x_log2_bytes && x <= 0) continue;
      if (c.y_log_seconds && y <= 0) continue;
      xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  }
  const bool empty = !(xmin <= xmax);
  if (empty) xmin = 1, xmax = 2, ymin = 1e-6, ymax = 1e-3;
  auto tx = [&](double v) { return c.x_log2_bytes ? std::log2(v) : v; };
  auto ty = [&](double v) { return c.y_log_seconds ? std::log10(v) : v; };
  double x0 = tx(xmin), x1 = tx(xmax), y0 = ty(ymin), y1 = ty(ymax);
  if (x1 - x0 < 1e-9) x0 -= 1, x1 += 1;
  if (c.y_log_seconds) {
    y0 = std::floor(y0), y1 = std::ceil(y1);
    if (y1 - y0 < 1) y1 = y0 + 1;
  } else {
    y0 = 0;
    if (y1 <= 0) y1 = 1;
    y1 *= 1.1;
  }
  auto px = [&](double v) { return left + (tx(v) - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return top + ph - (ty(v) - y0) / (y1 - y0) * ph; };

  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      c.width, c.height, c.width, c.height);
  absl::StrAppend(&out, "<text x=\"", left, "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">",
                  XmlEscape(c.title), "</text>\n");
  if (!c.subtitle.empty()) {
    absl::StrAppend(&out, "<text x=\"", left, "\" y=\"44\" fill=\"#555\">", XmlEscape(c.subtitle),
                    "</text>\n");
  }
  // Frame, grid and ticks.
  absl::StrAppend(
      &out, absl::StrFormat("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
                            "stroke=\"#333\"/>\n",
                            left, top, pw, ph));
  if (c.y_log_seconds) {
    for (int e = static_cast<int>(y0); e <= static_cast<int>(y1); ++e) {
      const double v = std::pow(10.0, e), y = py(v);
      absl::StrAppend(
          &out,
          absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                          "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%s</text>\n",
                          left, y, left + pw, y, left - 6, y + 4, XmlEscape(FormatSeconds(v))));
    }
  } else {
    for (int i = 0; i <= 5; ++i) {
      const double v = y0 + (y1 - y0) * i / 5, y = top + ph - ph * i / 5;
      absl::StrAppend(
          &out, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>"
                                "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3g</text>\n",
                                left, y, left + pw, y, left - 6, y + 4, v));
    }
  }
  if (c.x_log2_bytes) {
    const int e0 = static_cast<int>(std::ceil(x0 - 1e-9)),
              e1 = static_cast<int>(std::floor(x1 + 1e-9));
    const int step = std::max(1, (e1 - e0) / 10 + 1);
    for (int e = e0; e <= e1; e += step) {
      const double v = std::ldexp(1.0, e), x = px(v);
      absl::StrAppend(
          &out, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#eee\"/>"
                                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                                x, top, x, top + ph, x, top + ph + 18,
                                XmlEscape(FormatBytes(static_cast<int64_t>(v)))));
    }
  } else {
    std::set<double> xs;
    for (const auto& s : c.series)
      for (auto [x, y] : s.points) xs.insert(x);
    for (double v : xs) {
      const double x = px(v);
      absl::StrAppend(
          &out, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#eee\"/>"
                                "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%g</text>\n",
                                x, top, x, top + ph, x, top + ph + 18, v));
    }
  }
  absl::StrAppend(&out,
                  absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                                  left + pw / 2, top + ph + 42.0, XmlEscape(c.x_label)));
  absl::StrAppend(&out, absl::StrFormat("<text transform=\"translate(18 %g) rotate(-90)\" "
                                        "text-anchor=\"middle\">%s</text>\n",
                                        top + ph / 2, XmlEscape(c.y_label)));
  if (empty) {
    absl::StrAppend(
        &out, absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">no data</text>\n",
                              left + pw / 2, top + ph / 2));
  }
  // Series: a polyline and a dot per point (tooltip), legend on the right.
  for (size_t i = 0; i < c.series.size(); ++i) {
    const ChartSeries& s = c.series[i];
    const char* color = kPalette[i % 10];
    auto pts = s.points;
    std::vector<size_t> order(pts.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return pts[a].first < pts[b].first; });
    std::string poly;
    for (size_t k : order) {
      auto [x, y] = pts[k];
      if ((c.x_log2_bytes && x <= 0) || (c.y_log_seconds && y <= 0)) continue;
      absl::StrAppend(&poly, absl::StrFormat("%.1f,%.1f ", px(x), py(y)));
    }
    absl::StrAppend(&out, "<g class=\"series\" data-name=\"", XmlEscape(s.name), "\">\n");
    absl::StrAppend(&out, "<polyline fill=\"none\" stroke=\"", color,
                    "\" stroke-width=\"2\" points=\"", poly, "\"/>\n");
    for (size_t k : order) {
      auto [x, y] = pts[k];
      if ((c.x_log2_bytes && x <= 0) || (c.y_log_seconds && y <= 0)) continue;
      absl::StrAppend(
          &out, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\">", px(x),
                                py(y), color));
      if (k < s.tooltips.size())
        absl::StrAppend(&out, "<title>", XmlEscape(s.tooltips[k]), "</title>");
      absl::StrAppend(&out, "</circle>\n");
    }
    absl::StrAppend(&out, "</g>\n");
    const double ly = top + 10 + 20 * static_cast<double>(i);
    absl::StrAppend(
        &out, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                              "stroke-width=\"3\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                              left + pw + 12, ly, left + pw + 36, ly, color, left + pw + 42, ly + 4,
                              XmlEscape(s.name)));
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

std::vector<v1::CollectivePlot> RenderCollectivePlots(const v1::CollectiveResult& result) {
  const v1::CollectiveSpec& r = result.spec();
  const std::string op = CollectiveOpName(r.op());
  const std::string facts =
      absl::StrCat(DtypeName(r.dtype()), ", ", r.in_place() ? "in place" : "out of place",
                   ", median of ", r.iters(), " iterations after ", r.warmup_iters(),
                   " warm-up; an iteration lasts as long as its slowest rank");
  std::vector<v1::CollectivePlot> plots;
  auto add = [&](const std::string& name, const LineChart& chart) {
    v1::CollectivePlot p;
    p.set_name(name);
    p.set_title(chart.title);
    p.set_svg(RenderLineChart(chart));
    plots.push_back(std::move(p));
  };

  // 1. Duration vs size: a line per (backend, world size).
  {
    LineChart chart;
    chart.title = absl::StrCat(op, ": duration vs message size");
    chart.subtitle = facts;
    chart.x_label = "message size (whole buffer, nccl-tests convention)";
    chart.y_label = "duration (median)";
    chart.x_log2_bytes = true;
    std::map<std::pair<int, int>, ChartSeries> by;
    for (const auto& row : result.rows()) {
      auto& s = by[{row.backend(), row.world_size()}];
      s.name = SeriesName(row.backend(), row.world_size());
      s.points.emplace_back(static_cast<double>(row.size_bytes()), row.duration().median());
      s.tooltips.push_back(Tooltip(row));
    }
    for (auto& [k, s] : by) chart.series.push_back(std::move(s));
    add("duration_vs_size", chart);
  }
  // 2. Duration vs process count: a line per (backend, size); at most 6 sizes.
  {
    LineChart chart;
    chart.title = absl::StrCat(op, ": duration vs number of processes");
    chart.subtitle = facts;
    chart.x_label = "processes (world size)";
    chart.y_label = "duration (median)";
    std::set<int64_t> sizes;
    for (const auto& row : result.rows()) sizes.insert(row.size_bytes());
    std::vector<int64_t> all(sizes.begin(), sizes.end()), picked;
    const size_t keep = std::min<size_t>(6, all.size());
    for (size_t i = 0; i < keep; ++i) {
      picked.push_back(all[keep == 1 ? 0 : i * (all.size() - 1) / (keep - 1)]);
    }
    std::map<std::pair<int, int64_t>, ChartSeries> by;
    for (const auto& row : result.rows()) {
      if (std::find(picked.begin(), picked.end(), row.size_bytes()) == picked.end()) continue;
      auto& s = by[{row.backend(), row.size_bytes()}];
      s.name = absl::StrCat(BackendName(row.backend()), ", ", FormatBytes(row.size_bytes()));
      s.points.emplace_back(row.world_size(), row.duration().median());
      s.tooltips.push_back(Tooltip(row));
    }
    for (auto& [k, s] : by) chart.series.push_back(std::move(s));
    add("duration_vs_world_size", chart);
  }
  // 3. Backend comparison at one world size.
  {
    std::map<int, std::set<int>> backends_at;  // world -> backends
    for (const auto& row : result.rows()) backends_at[row.world_size()].insert(row.backend());
    int world = 0;
    for (auto& [w, b] : backends_at) {
      if (b.size() > 1) world = w;
    }
    const bool compared = world != 0;
    if (!compared && !backends_at.empty()) world = backends_at.rbegin()->first;
    LineChart chart;
    chart.title = absl::StrCat(op, ": backend comparison, ", world, " processes");
    chart.subtitle = compared ? facts : absl::StrCat("only one backend ran; ", facts);
    chart.x_label = "message size (whole buffer, nccl-tests convention)";
    chart.y_label = "duration (median)";
    chart.x_log2_bytes = true;
    std::map<int, ChartSeries> by;
    for (const auto& row : result.rows()) {
      if (row.world_size() != world) continue;
      auto& s = by[row.backend()];
      s.name = absl::StrCat(BackendName(row.backend()),
                            row.devices_size() > 0 && row.devices(0).rfind("cuda", 0) == 0
                                ? " (GPU tensors)"
                                : " (CPU tensors)");
      s.points.emplace_back(static_cast<double>(row.size_bytes()), row.duration().median());
      s.tooltips.push_back(Tooltip(row));
    }
    for (auto& [k, s] : by) chart.series.push_back(std::move(s));
    add("backend_comparison", chart);
  }
  return plots;
}

}  // namespace benchd
