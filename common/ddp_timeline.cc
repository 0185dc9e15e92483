#include "common/ddp_timeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/collective_svg.h"
#include "common/ddp_spec.h"
#include "common/xml_escape.h"

namespace benchd {
namespace {

using Interval = std::pair<int64_t, int64_t>;  // [start, end) ns

// Sorted, overlapping or closer than `gap` merged.
std::vector<Interval> Union(std::vector<Interval> in, int64_t gap = 0) {
  std::sort(in.begin(), in.end());
  std::vector<Interval> out;
  for (const Interval& i : in) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second + gap) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t Length(const std::vector<Interval>& u) {
  int64_t n = 0;
  for (const auto& [a, b] : u) n += b - a;
  return n;
}

// Both sorted and disjoint.
int64_t Intersection(const std::vector<Interval>& x, const std::vector<Interval>& y) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    n +=
        std::max<int64_t>(0, std::min(x[i].second, y[j].second) - std::max(x[i].first, y[j].first));
    if (x[i].second < y[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

bool HasOperatorAbove(const std::vector<ProfileEvent>& events, int parent) {
  for (int p = parent; p >= 0; p = events[p].parent) {
    if (events[p].kind == ProfileEvent::Kind::kOperator) return true;
  }
  return false;
}

}  // namespace

v1::DdpTimeline DdpTimelineFromEvents(const std::vector<ProfileEvent>& events, bool device) {
  std::vector<Interval> compute, comm;
  for (const ProfileEvent& e : events) {
    if (device) {
      if (e.kind != ProfileEvent::Kind::kDevice) continue;
      (absl::StartsWithIgnoreCase(e.name, "nccl") ? comm : compute)
          .push_back({e.start_ns, e.end_ns});
    } else if (absl::StartsWith(e.name, "gloo:")) {
      comm.push_back({e.start_ns, e.end_ns});
    } else if (e.kind == ProfileEvent::Kind::kOperator && !absl::StartsWith(e.name, "c10d") &&
               !HasOperatorAbove(events, e.parent)) {
      compute.push_back({e.start_ns, e.end_ns});
    }
  }
  compute = Union(std::move(compute));
  comm = Union(std::move(comm));
  v1::DdpTimeline t;
  t.set_source(device ? "cuda_kernels" : "cpu_operators");
  if (compute.empty() && comm.empty()) return t;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto* lane : {&compute, &comm}) {
    if (lane->empty()) continue;
    first = std::min(first, lane->front().first);
    last = std::max(last, lane->back().second);
  }
  const int64_t step = last - first;
  t.set_step_seconds(step * 1e-9);
  t.set_resolution_seconds(step * 1e-12);
  t.set_compute_seconds(Length(compute) * 1e-9);
  t.set_comm_seconds(Length(comm) * 1e-9);
  t.set_comm_overlapped_seconds(Intersection(compute, comm) * 1e-9);
  for (auto [lane, spans] :
       {std::pair{v1::DDP_LANE_COMPUTE, &compute}, std::pair{v1::DDP_LANE_COMMUNICATION, &comm}}) {
    for (const auto& [a, b] : Union(*spans, step / 1000)) {
      v1::DdpSpan* s = t.add_spans();
      s->set_lane(lane);
      s->set_start_seconds((a - first) * 1e-9);
      s->set_end_seconds((b - first) * 1e-9);
    }
  }
  return t;
}

std::string RenderDdpTimelines(const v1::DdpResult& result) {
  std::vector<const v1::DdpRow*> rows;
  if (result.has_compute_only()) rows.push_back(&result.compute_only());
  for (const v1::DdpRow& r : result.rows()) rows.push_back(&r);
  double longest = 0;
  std::vector<const v1::DdpRow*> drawn;
  for (const v1::DdpRow* r : rows) {
    bool any = false;
    for (const v1::DdpRank& k : r->ranks()) {
      if (!k.has_timeline() || k.timeline().step_seconds() <= 0) continue;
      longest = std::max(longest, k.timeline().step_seconds());
      any = true;
    }
    if (any) drawn.push_back(r);
  }
  if (drawn.empty()) return "";
  constexpr int kWidth = 1000, kLeft = 150, kRight = 20, kLane = 11, kRankGap = 6, kTitle = 34;
  const int plot_w = kWidth - kLeft - kRight;
  std::string svg;  // the body; the header, which needs its height, goes first at the end
  int y = 60;
  auto x_of = [&](double s) { return kLeft + plot_w * s / longest; };
  for (const v1::DdpRow* r : drawn) {
    const std::string label = DdpRunLabel(DdpRunOf(*r));
    absl::StrAppend(
        &svg, "<text x=\"10\" y=\"", y + 14, "\" font-weight=\"bold\">",
        XmlEscape(absl::StrCat(
            label, ": step ", FormatSeconds(r->step().median()),
            r->variant() == v1::DDP_VARIANT_UNSPECIFIED
                ? ""
                : absl::StrFormat(", exposed %.1f%%", 100 * r->exposed_comm_fraction()))),
        "</text>\n");
    y += kTitle - 10;
    for (const v1::DdpRank& k : r->ranks()) {
      const v1::DdpTimeline& t = k.timeline();
      const double hidden =
          t.comm_seconds() > 0 ? 100 * t.comm_overlapped_seconds() / t.comm_seconds() : 0;
      absl::StrAppend(
          &svg, "<text x=\"10\" y=\"", y + kLane + 4, "\">",
          XmlEscape(absl::StrCat("rank ", k.rank(), " ", k.device())), "</text>\n",
          "<text x=\"10\" y=\"", y + 2 * kLane + 3, "\" fill=\"#555\">",
          t.comm_seconds() > 0 ? absl::StrFormat("%.0f%% of comm hidden", hidden) : std::string(),
          "</text>\n");
      absl::StrAppend(&svg, "<rect x=\"", kLeft, "\" y=\"", y, "\" width=\"", plot_w,
                      "\" height=\"", 2 * kLane, "\" fill=\"#f4f4f4\"/>\n");
      for (const v1::DdpSpan& s : t.spans()) {
        const bool compute = s.lane() == v1::DDP_LANE_COMPUTE;
        const double x0 = x_of(s.start_seconds()), x1 = x_of(s.end_seconds());
        absl::StrAppend(
            &svg, absl::StrFormat(
                      "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                      "<title>%s %s .. %s</title></rect>\n",
                      x0, compute ? y : y + kLane, std::max(0.5, x1 - x0), kLane - 1,
                      compute ? "#3b6fb6" : "#e8871e", compute ? "computation" : "communication",
                      XmlEscape(FormatSeconds(s.start_seconds())),
                      XmlEscape(FormatSeconds(s.end_seconds()))));
      }
      y += 2 * kLane + kRankGap;
    }
    y += 10;
  }
  // The time axis.
  for (int k = 0; k <= 5; ++k) {
    const double s = longest * k / 5;
    absl::StrAppend(
        &svg, absl::StrFormat("<line x1=\"%.1f\" y1=\"56\" x2=\"%.1f\" y2=\"%d\" "
                              "stroke=\"#ccc\" stroke-dasharray=\"2,3\"/>\n"
                              "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s"
                              "</text>\n",
                              x_of(s), x_of(s), y, x_of(s), y + 14, XmlEscape(FormatSeconds(s))));
  }
  const std::string header = absl::StrCat(
      absl::StrFormat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" "
                      "height=\"100%%\" fill=\"white\"/>\n",
                      kWidth, y + 30),
      "<text x=\"10\" y=\"20\" font-size=\"15\">",
      XmlEscape(absl::StrCat("One profiled step per rank: ", result.world_size(), " ranks, ",
                             result.spec().step().model().preset().empty()
                                 ? "model"
                                 : result.spec().step().model().preset(),
                             ", ", result.device_name())),
      "</text>\n<text x=\"10\" y=\"38\" fill=\"#555\">",
      XmlEscape(absl::StrCat("computation (blue) and communication (orange) from each rank's "
                             "Kineto trace, each from its own first activity; one time scale, "
                             "0 to ",
                             FormatSeconds(longest))),
      "</text>\n");
  return header + svg + "</svg>\n";
}

}  // namespace benchd
