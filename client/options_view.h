// How `benchctl get` and `list` show the benchmark options (warm-up auto,
// attention, optimizer, TF32, CUDA graphs, weight copies; docs/architecture.md
// "Options").
#ifndef BENCHD_CLIENT_OPTIONS_VIEW_H_
#define BENCHD_CLIENT_OPTIONS_VIEW_H_

#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// The options a spec asks for beyond the faithful path, one part each
// ("attention math", "optimizer foreach", "tf32", "cuda graph"); empty when
// none. Warm-up auto is shown with the warm-up ("warm-up auto (max 50)").
std::vector<std::string> SpecOptionParts(const v1::BenchmarkSpec& b);

// The "Steps" line of a result: "5 warm-up + 10 measured", or with warm-up
// auto "7 warm-up (auto: converged, cap 50) + 10 measured"; with CUDA graphs
// it says which steps were replays.
std::string StepsLine(const v1::BenchmarkResult& r);

// The "Options" line of a result: "faithful" (attention, optimizer, fp32
// matmuls, eager), or what was used, e.g. "attention sdpa (math), optimizer
// foreach, tf32 matmuls, cuda graph (phase times not measured)".
std::string OptionsLine(const v1::BenchmarkResult& r);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_OPTIONS_VIEW_H_
