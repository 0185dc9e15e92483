#include "bench/load/loadgen_plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace benchd::loadgen {

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kGetJob:
      return "GetJob";
    case Kind::kListJobs:
      return "ListJobs";
    case Kind::kGetNodeInfo:
      return "GetNodeInfo";
  }
  return "?";
}

absl::StatusOr<std::vector<std::pair<Kind, int>>> ParseMix(const std::string& text) {
  constexpr char kAccepted[] =
      "expected KIND=WEIGHT,... with KIND one of GetJob, ListJobs, GetNodeInfo (each once) and "
      "WEIGHT an integer >= 1";
  std::vector<std::pair<Kind, int>> mix;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, '=');
    int weight = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &weight) || weight < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: got '", part, "' in '", text, "'; ", kAccepted));
    }
    std::optional<Kind> kind;
    for (int k = 0; k < kKindCount; ++k) {
      if (kv[0] == KindName(static_cast<Kind>(k))) kind = static_cast<Kind>(k);
    }
    if (!kind) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mix: unknown call kind '", kv[0], "'; ", kAccepted));
    }
    for (const auto& [k, w] : mix) {
      if (k == *kind) {
        return absl::InvalidArgumentError(
            absl::StrCat("--mix: '", kv[0], "' given twice in '", text, "'; ", kAccepted));
      }
    }
    mix.emplace_back(*kind, weight);
  }
  return mix;
}

std::vector<Kind> KindCycle(const std::vector<std::pair<Kind, int>>& mix) {
  std::vector<std::tuple<double, std::string, Kind>> slots;
  for (const auto& [kind, weight] : mix) {
    for (int i = 0; i < weight; ++i) {
      slots.emplace_back((i + 0.5) / weight, KindName(kind), kind);
    }
  }
  std::sort(slots.begin(), slots.end());
  std::vector<Kind> cycle;
  for (const auto& s : slots) cycle.push_back(std::get<2>(s));
  return cycle;
}

absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& flag,
                                                   const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

double Percentile(const std::vector<double>& sorted_values, double q) {
  if (sorted_values.empty()) return std::numeric_limits<double>::quiet_NaN();
  // std::nearbyint rounds half to even in the default rounding mode, as Python's round.
  const double rank = std::max(1.0, std::nearbyint(q / 100.0 * sorted_values.size() + 0.5));
  const size_t i = std::min(static_cast<size_t>(rank), sorted_values.size()) - 1;
  return sorted_values[i];
}

}  // namespace benchd::loadgen
