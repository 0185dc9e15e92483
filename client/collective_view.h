// benchctl's side of process groups and the collective request: the spec
// from the flags, the results table (size, world, backend, median, algbw,
// busbw, wrong elements), the groups table, and saving the three plots.
#ifndef BENCHD_CLIENT_COLLECTIVE_VIEW_H_
#define BENCHD_CLIENT_COLLECTIVE_VIEW_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

struct CollectiveOptions {
  std::string group;        // a resident group id, or
  std::string devices;      // "cuda:0,cuda:1"
  std::string backend;      // nccl | gloo ("" = by device kind)
  std::string backends;     // "nccl,gloo": one series per backend on the devices
  std::string world_sizes;  // "2,4"
  std::string op = "all_reduce";
  std::string dtype = "fp32";
  std::string min;    // "1MiB" ("" = 1 MiB)
  std::string max;    // "" = min
  std::string sizes;  // a list instead: "4KiB,1MiB"
  std::optional<int64_t> factor;
  std::optional<int64_t> warmup;
  std::optional<int64_t> iters;
  bool in_place = false;
  std::optional<double> timeout_seconds;
};

// INVALID_ARGUMENT naming the flag for what benchctl can tell by itself
// (sizes, names); the daemon checks the rest.
absl::StatusOr<v1::JobSpec> BuildCollectiveSpec(const CollectiveOptions& options);

// One line per row: size, world, backend, median, p99, algbw, busbw, wrong.
std::string CollectiveTable(const v1::CollectiveResult& result);
// The table, the groups the job used (resident or set up, and its cost) and
// the total of wrong elements.
std::string CollectiveResultView(const v1::CollectiveResult& result);
// One live line for a row as it completes.
std::string CollectiveRowLine(const v1::CollectiveRow& row);
// How a job used a group: "g1 (gloo on cpu:0,cpu:1): resident, no set-up in
// this job", or "...: set up for this job in 0.123 s (transient, destroyed
// after)".
std::string GroupUseText(const v1::CollectiveGroupUse& use);

std::string GroupsTable(const std::vector<v1::Group>& groups);
std::string GroupView(const v1::Group& group);
std::string GroupStateName(v1::GroupState state);  // "ready", "broken"

// Writes <dir>/<job>-<plot>.svg for each plot of a collective job; the
// lines say where they went.
std::vector<std::string> SavePlots(const v1::Job& job, const std::string& dir);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COLLECTIVE_VIEW_H_
