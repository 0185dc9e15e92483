// The collective request's three pictures, drawn by benchd itself as
// standalone SVG (the plots of the CS336 distributed_communication_single_node
// write-ups): duration vs message size (a line per backend and world size),
// duration vs process count (a line per backend and size), and the backend
// comparison (duration vs size, a line per backend, at the largest world size
// that more than one backend ran; at the largest one otherwise). Log axes for
// sizes and durations; each point has a tooltip with its figures.
#ifndef BENCHD_COMMON_COLLECTIVE_SVG_H_
#define BENCHD_COMMON_COLLECTIVE_SVG_H_

#include <string>
#include <utility>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
  std::vector<std::string> tooltips;              // one per point, or empty
};

struct LineChart {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  bool x_log2_bytes = false;  // x is bytes on a log2 axis; else a linear integer axis
  bool y_log_seconds = true;  // y is seconds on a log10 axis
  std::vector<ChartSeries> series;
  int width = 900;
  int height = 540;
};

std::string RenderLineChart(const LineChart& chart);

// "12.3 µs", "4.56 ms", "1.20 s".
std::string FormatSeconds(double seconds);

// The three plots of a collective result (names duration_vs_size,
// duration_vs_world_size, backend_comparison), svg filled, artifact empty.
std::vector<v1::CollectivePlot> RenderCollectivePlots(const v1::CollectiveResult& result);

}  // namespace benchd

#endif  // BENCHD_COMMON_COLLECTIVE_SVG_H_
