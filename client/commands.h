// What each benchctl subcommand does once its flags are parsed. Each returns
// the process exit code (client/exit_codes.h) and prints errors to stderr as
// "benchctl: <message>".
#ifndef BENCHD_CLIENT_COMMANDS_H_
#define BENCHD_CLIENT_COMMANDS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "client/collective_view.h"
#include "client/profile_view.h"
#include "client/spec_builder.h"

namespace benchd::client {

struct GlobalOptions {
  std::string address;
  double timeout_seconds = 10;
};

// "queued", "running", ... (any case) for list --state.
absl::StatusOr<v1::JobState> ParseJobState(const std::string& name);
// The message an error gets on stderr (without the "benchctl: " prefix):
// INVALID_ARGUMENT and UNAVAILABLE messages speak for themselves, others get
// their code name in front.
std::string ErrorMessage(const absl::Status& status);
// Prints ErrorMessage and returns the status's exit code.
int ReportError(const absl::Status& status);

int RunSubmitBenchmark(const GlobalOptions& g, const BenchmarkOptions& options, bool watch,
                       bool json);
// `benchctl memory`: submits a memory request, follows it, prints the peak
// tables and the largest allocations and saves each run's timeline SVG in
// `svg_dir` (<job>-timeline.svg; <job>-timeline-<run>.svg in a sweep). With
// `detach`, prints the job id and returns.
int RunMemoryRequest(const GlobalOptions& g, const MemoryOptions& options, bool detach, bool json,
                     const std::string& svg_dir);
// Reads one artifact of a job whole (the daemon's FetchArtifact).
using ArtifactFetcher =
    std::function<absl::StatusOr<std::string>(const std::string& job_id, const std::string& name)>;
// Writes the timelines of a finished memory job (see RunMemoryRequest), from
// the result or, when left out of it for size, fetched as artifacts; returns
// the lines saying where they went (or why one could not be saved).
std::vector<std::string> SaveTimelines(const v1::Job& job, const std::string& svg_dir,
                                       const ArtifactFetcher& fetch);
// `benchctl profile`: submits a profile request, follows it and prints the
// ranges and kernel tables (`view` says how many rows); with `trace_path`
// fetches the Chrome trace there. With `detach`, prints the job id and returns.
int RunProfileRequest(const GlobalOptions& g, const ProfileOptions& options, bool detach, bool json,
                      const ProfileViewOptions& view, const std::string& trace_path);
// `benchctl artifacts list JOB`.
int RunArtifactsList(const GlobalOptions& g, const std::string& job_id, bool json);
// `benchctl artifacts get JOB NAME [-o PATH]`: to PATH (default NAME here;
// "-" = stdout), written through a temporary file so a failed fetch leaves
// no partial file behind.
int RunArtifactsGet(const GlobalOptions& g, const std::string& job_id, const std::string& name,
                    const std::string& out_path);
int RunWatch(const GlobalOptions& g, const std::string& job_id, bool json);
// Exit 1 for a job that failed, was cancelled or interrupted, as for watch.
int RunGet(const GlobalOptions& g, const std::string& job_id, bool json, bool csv);
int RunList(const GlobalOptions& g, int limit, const std::string& state, bool json);
int RunCancel(const GlobalOptions& g, const std::string& job_id, bool json);
int RunModels(const GlobalOptions& g, const std::string& device, bool json);
// Exactly one of key, device, all (checked by the caller).
int RunEvict(const GlobalOptions& g, const std::string& key, const std::string& device, bool all,
             bool json);
int RunNode(const GlobalOptions& g, bool json);
// `benchctl groups create|list|destroy`.
int RunGroupsCreate(const GlobalOptions& g, const std::string& devices, const std::string& backend,
                    double timeout_seconds, bool json);
int RunGroupsList(const GlobalOptions& g, bool json);
int RunGroupsDestroy(const GlobalOptions& g, const std::string& id, bool json);
// `benchctl collective`: submits, prints each row as it completes, then the
// table; saves the plots in `svg_dir` when it is not empty.
int RunCollective(const GlobalOptions& g, const CollectiveOptions& options, bool json,
                  const std::string& svg_dir);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMMANDS_H_
