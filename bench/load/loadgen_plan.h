// What benchd_loadgen sends: the call kinds in the mix's proportions, in the
// same order as clients.py's kind_cycle, so the C++ and Python clients load
// the daemon alike.
#ifndef BENCHD_BENCH_LOAD_LOADGEN_PLAN_H_
#define BENCHD_BENCH_LOAD_LOADGEN_PLAN_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace benchd::loadgen {

enum class Kind { kGetJob, kListJobs, kGetNodeInfo };
inline constexpr int kKindCount = 3;

const char* KindName(Kind k);

// "GetJob=6,ListJobs=3,GetNodeInfo=1": each kind at most once, weights >= 1.
absl::StatusOr<std::vector<std::pair<Kind, int>>> ParseMix(const std::string& text);

// The kinds interleaved in proportion: weight w puts the kind at (i + 0.5) / w
// for i < w, sorted by that position, then by name (6:3:1 gives 10 slots).
std::vector<Kind> KindCycle(const std::vector<std::pair<Kind, int>>& mix);

// The file's lines, without their '\n' (an empty line is an empty string: the
// first ListJobs page's token is ""). `flag` names the option in errors.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& flag,
                                                   const std::string& path);

// Nearest-rank percentile (q in 0..100) of ascending values, as report.py's
// `percentile`: rank = round-half-to-even(q / 100 * n + 0.5), at least 1, at
// most n. NaN for no values.
double Percentile(const std::vector<double>& sorted_values, double q);

}  // namespace benchd::loadgen

#endif  // BENCHD_BENCH_LOAD_LOADGEN_PLAN_H_
