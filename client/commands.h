// What each benchctl subcommand does once its flags are parsed. Each returns
// the process exit code (client/exit_codes.h) and prints errors to stderr as
// "benchctl: <message>".
#ifndef BENCHD_CLIENT_COMMANDS_H_
#define BENCHD_CLIENT_COMMANDS_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "client/attention_view.h"
#include "client/collective_view.h"
#include "client/precision_view.h"
#include "client/profile_view.h"
#include "client/spec_builder.h"
#include "client/sweep_view.h"
#include "common/credentials.h"

namespace benchd::client {

struct GlobalOptions {
  std::string address;
  double timeout_seconds = 10;
  ChannelSecurity security;  // TLS and the token (common/credentials.h)
};

// "queued", "running", ... (any case) for list --state.
absl::StatusOr<v1::JobState> ParseJobState(const std::string& name);
// A JobKind's name, "benchmark" ... "ddp" (any case; JobKindNames), for
// list --kind.
absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name);
// The message an error gets on stderr (without the "benchctl: " prefix):
// INVALID_ARGUMENT and UNAVAILABLE messages speak for themselves, others get
// their code name in front.
std::string ErrorMessage(const absl::Status& status);
// Prints ErrorMessage and returns the status's exit code.
int ReportError(const absl::Status& status);

// ------------------------------------------------------------ submit KIND
//
// Every request kind is queued the same way: `benchctl submit KIND [flags]`
// prints the job id (with --json the Job) and returns. With --watch it
// follows the job instead, its progress on stderr, and once the job ended
// prints its view on stdout (with --json the finished Job as JSON); the exit
// code is the job's (client/exit_codes.h). Flags that act on the finished job
// (--trace, --svg-dir, --top, --all) need --watch: given without it they are
// a usage error naming the flag, before anything is sent.

// The flags every `submit KIND` has.
struct SubmitFlags {
  bool watch = false;  // --watch
  bool json = false;   // --json
  // --progress-timeout SECONDS: JobSpec.progress_timeout_seconds (0 = the
  // daemon's default for the kind).
  double progress_timeout = 0;
  // --sweep FIELD=V1,V2 (repeatable) and --cell-timeout SECONDS: JobSpec.sweep
  // (client/sweep_view.h); with --watch each cell is a line as it finishes.
  std::vector<std::string> sweep;
  std::optional<double> cell_timeout;
  // --pivot ROWS,COLS and --value COLUMN: with --watch, the finished sweep
  // as the write-up's table after the job's view.
  PivotFlags pivot;
  // --force: JobSpec.force, queued even when the memory estimate exceeds the
  // device's memory.
  bool force = false;
};

// `submit profile`'s --watch-only flags; unset/false = not given.
struct ProfileOutput {
  std::optional<int> top;                 // --top N: kernels per range (default 10)
  bool all = false;                       // --all: every kernel of every range
  std::optional<std::string> trace_path;  // --trace FILE: fetch the Chrome trace there
};

int RunSubmitBenchmark(const GlobalOptions& g, const BenchmarkOptions& options,
                       const SubmitFlags& flags);
// With --watch: the ranges and kernel tables; with --trace, the Chrome trace
// fetched to that file once the job succeeded.
int RunSubmitProfile(const GlobalOptions& g, const ProfileOptions& options,
                     const SubmitFlags& flags, const ProfileOutput& output);
// With --watch: the peak tables and the largest allocations, and each run's
// timeline SVG saved in `svg_dir` (default .; <job>-timeline.svg,
// <job>-timeline-<run>.svg in a sweep).
int RunSubmitMemory(const GlobalOptions& g, const MemoryOptions& options, const SubmitFlags& flags,
                    const std::optional<std::string>& svg_dir);
// With --watch: each row as it completes (progress), then the table; the
// three plots saved in `svg_dir` when given.
int RunSubmitCollective(const GlobalOptions& g, const CollectiveOptions& options,
                        const SubmitFlags& flags, const std::optional<std::string>& svg_dir);
// With --watch: the cell's table (client/attention_view.h).
int RunSubmitAttention(const GlobalOptions& g, const AttentionOptions& options,
                       const SubmitFlags& flags);
// With --watch: the accumulation and autocast tables (client/precision_view.h).
int RunSubmitPrecision(const GlobalOptions& g, const PrecisionOptions& options,
                       const SubmitFlags& flags);

// With --watch: each run as it ends (progress), then the table
// (client/ddp_view.h).
int RunSubmitDdp(const GlobalOptions& g, const DdpOptions& options, const SubmitFlags& flags);

// INVALID_ARGUMENT "--trace needs --watch ..." for the first of `given`
// (flag name, whether it was given) that was given without --watch.
absl::Status CheckWatchOnlyFlags(bool watch,
                                 const std::vector<std::pair<std::string, bool>>& given);

// Reads one artifact of a job whole (the daemon's FetchArtifact).
using ArtifactFetcher =
    std::function<absl::StatusOr<std::string>(const std::string& job_id, const std::string& name)>;
// Writes the timelines of a finished memory job (see RunSubmitMemory), from
// the result or, when left out of it for size, fetched as artifacts; returns
// the lines saying where they went (or why one could not be saved).
std::vector<std::string> SaveTimelines(const v1::Job& job, const std::string& svg_dir,
                                       const ArtifactFetcher& fetch);

// ------------------------------------------------------------ the others

// `benchctl artifacts list JOB`.
int RunArtifactsList(const GlobalOptions& g, const std::string& job_id, bool json);
// `benchctl artifacts get JOB NAME [-o PATH]`: to PATH (default NAME here;
// "-" = stdout), written through a temporary file so a failed fetch leaves
// no partial file behind.
int RunArtifactsGet(const GlobalOptions& g, const std::string& job_id, const std::string& name,
                    const std::string& out_path);
int RunWatch(const GlobalOptions& g, const std::string& job_id, bool json);
// Exit 1 for a job that failed, was cancelled or interrupted, as for watch.
// A sweep's --csv is one row per cell, a data-parallel job's one per run;
// `pivot` (with a sweep) prints the pivot instead of the view (as CSV with
// --csv).
int RunGet(const GlobalOptions& g, const std::string& job_id, bool json, bool csv,
           const PivotFlags& pivot = {});

// `benchctl list`: the newest `limit` jobs matching the filters ("" = any).
struct ListOptions {
  int limit = 50;      // --limit: jobs shown in all, fetched in pages of min(limit, 1000)
  std::string state;   // --state queued|running|succeeded|failed|cancelled|interrupted
  std::string kind;    // --kind benchmark|profile|...|ddp (JobKindNames)
  std::string device;  // --device cuda:0 (a collective matches any of its devices)
};
inline constexpr int kMaxListPageSize = 1000;  // ListJobsRequest.page_size's maximum
// One ListJobs call.
using ListJobsCall =
    std::function<absl::StatusOr<v1::ListJobsResponse>(const v1::ListJobsRequest& request)>;
// Pages through ListJobs with `request`'s filters (page_size min(limit, 1000),
// following next_page_token) until `limit` jobs or the last page; the
// response holds those jobs, newest first, and no token.
absl::StatusOr<v1::ListJobsResponse> ListJobsUpTo(const ListJobsCall& call,
                                                  v1::ListJobsRequest request, int limit);
// INVALID_ARGUMENT naming the flag (--limit, --state, --kind) for a bad value.
absl::StatusOr<v1::ListJobsRequest> BuildListJobsRequest(const ListOptions& options);
// --json prints {"jobs": [...]}.
int RunList(const GlobalOptions& g, const ListOptions& options, bool json);
int RunCancel(const GlobalOptions& g, const std::string& job_id, bool json);
int RunModels(const GlobalOptions& g, const std::string& device, bool json);
// Exactly one of key, device, all (checked by the caller).
int RunEvict(const GlobalOptions& g, const std::string& key, const std::string& device, bool all,
             bool json);
int RunNode(const GlobalOptions& g, bool json);
// `benchctl nodes`: the cluster's members. With wait_for > 0, asks again every
// half second (through a daemon that is still starting, too) until that many
// are READY, then prints them; past wait_seconds it says which are not
// (exit 4, or 3 when the daemon never answered).
int RunNodes(const GlobalOptions& g, bool json, int wait_for, double wait_seconds);
// `benchctl estimate`: the daemon's memory estimate (Bench.Estimate; with
// --offline the same code run here) as tables (client/estimate_view.h), or
// the MemoryEstimate as JSON.
int RunEstimate(const GlobalOptions& g, const EstimateOptions& options, bool json);
// `benchctl groups create|list|destroy`.
int RunGroupsCreate(const GlobalOptions& g, const std::string& devices, const std::string& backend,
                    double timeout_seconds, bool json);
int RunGroupsList(const GlobalOptions& g, bool json);
int RunGroupsDestroy(const GlobalOptions& g, const std::string& id, bool json);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMMANDS_H_
