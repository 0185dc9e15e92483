#include "client/commands.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/csv.h"
#include "client/ddp_view.h"
#include "client/estimate_view.h"
#include "client/exit_codes.h"
#include "client/format.h"
#include "client/interrupt.h"
#include "client/job_view.h"
#include "client/json.h"
#include "client/list_views.h"
#include "client/memory_view.h"
#include "client/progress.h"
#include "client/rpc.h"
#include "client/sweep_view.h"
#include "client/table.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "common/memory_estimate.h"

namespace benchd::client {
namespace {

BenchClient MakeClient(const GlobalOptions& g) {
  return BenchClient(g.address,
                     std::chrono::milliseconds(static_cast<int64_t>(g.timeout_seconds * 1000)),
                     g.security);
}

void Write(FILE* stream, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stream);
  std::fflush(stream);
}

void Print(const std::string& text) { Write(stdout, text); }

int TerminalWidth(FILE* stream) {
  winsize ws{};
  if (ioctl(fileno(stream), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Where and how WatchJob shows a job's progress.
struct FollowOutput {
  FILE* stream = stdout;
  bool ndjson = false;  // one JobEvent per line instead of the progress display
  bool rows = false;    // a collective's rows and a sweep's cells as they complete
  int sweep_cells = 0;  // cells of the sweep followed, for "cell 3/6"
};

// Streams the job's events (NDJSON, live bar or plain lines) to `o.stream`,
// prints how it ended (failures always on stderr) and returns the exit code
// for its final state. `final_job` gets the terminal event's Job.
int WatchJob(BenchClient& client, const std::string& job_id, const FollowOutput& o,
             v1::Job* final_job) {
  const bool tty = !o.ndjson && isatty(fileno(o.stream)) == 1;
  Progress progress(job_id);
  bool bar_drawn = false;
  auto on_event = [&](const v1::JobEvent& e) {
    progress.Observe(e);
    if (o.ndjson) {
      Write(o.stream, ToJsonLine(e));
      return;
    }
    std::string row;
    if (o.rows && e.has_collective_row()) row = CollectiveRowLine(e.collective_row()) + "\n";
    if (o.rows && e.has_sweep_cell()) row = SweepCellLine(e.sweep_cell(), o.sweep_cells) + "\n";
    // A data-parallel job's runs are its progress (a few, each many steps
    // long): shown by `watch` too, not only by `submit --watch`.
    if (e.has_ddp_row()) row = DdpRowLine(e.ddp_row()) + "\n";
    if (tty) {
      // "\r\x1b[K": back to column 0 and clear, so the bar redraws in place.
      std::string out;
      if (e.has_log()) out += "\r\x1b[K" + e.log() + "\n";
      if (!row.empty()) out += "\r\x1b[K" + row;
      if (!IsTerminal(e)) {
        out += "\r\x1b[K" + FitToWidth(progress.BarLine(), TerminalWidth(o.stream));
        bar_drawn = true;
      }
      Write(o.stream, out);
    } else {
      std::string out = row;
      if (std::string line = progress.PlainLine(e); !line.empty()) out = line + "\n" + out;
      if (!out.empty()) Write(o.stream, out);
    }
  };
  InterruptScope interrupt;
  absl::StatusOr<v1::JobEvent> terminal = client.Watch(job_id, on_event, &interrupt.interrupted());
  if (bar_drawn) Write(o.stream, "\n");  // keep the last bar on screen
  // A job whose end arrived with the Ctrl-C is reported as it ended.
  if (interrupt.interrupted() && !terminal.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "benchctl: stopped watching job %s (Ctrl-C); the job is still running on the "
                 "daemon\n  follow it again: benchctl watch %s\n  cancel it:       benchctl "
                 "cancel %s\n",
                 job_id.c_str(), job_id.c_str(), job_id.c_str());
    return kExitWatchInterrupted;
  }
  if (!terminal.ok()) return ReportError(terminal.status());

  *final_job = TerminalJob(*terminal);
  const int code = ExitCodeForJobState(final_job->state());
  const std::string line = FinalStateLine(*final_job);
  if (code == kExitOk) {
    if (!o.ndjson) Write(o.stream, line + "\n");
  } else {
    std::fflush(stdout);
    std::fprintf(stderr, "benchctl: %s\n", line.c_str());
  }
  return code;
}

// `submit KIND`: submits `spec`. Without --watch prints the job (its id, or
// JSON) and returns kExitOk with *followed false. With --watch follows it,
// progress on stderr, and once it ended gives the stored job in `done` (the
// terminal event's copy if GetJob fails, so a hiccup after the job ran does
// not lose its report). Returns the exit code.
int SubmitAndFollow(BenchClient& client, const v1::JobSpec& spec, const SubmitFlags& flags,
                    v1::Job* done, bool* followed) {
  *followed = false;
  v1::JobSpec sent = spec;
  sent.set_progress_timeout_seconds(flags.progress_timeout);
  if (flags.force) sent.set_force(true);
  absl::StatusOr<v1::Job> job = client.Submit(sent);
  if (!job.ok()) return ReportError(job.status());
  if (!flags.watch) {
    // The bare id, so scripts can write JOB=$(benchctl submit benchmark ...).
    Print(flags.json ? ToJson(*job) : job->id() + "\n");
    return kExitOk;
  }
  Write(stderr, fmt::format("submitted {} job {}\n", JobKindName(spec), job->id()));
  v1::Job final_job;
  int cells = sent.has_sweep() ? 1 : 0;
  for (const v1::SweepAxis& a : sent.sweep().axes()) cells *= a.values_size();
  const int code = WatchJob(client, job->id(),
                            {.stream = stderr, .rows = true, .sweep_cells = cells}, &final_job);
  if (code != kExitOk && code != kExitJobFailed) return code;
  absl::StatusOr<v1::Job> stored = client.GetJob(job->id());
  *done = stored.ok() ? *std::move(stored) : final_job;
  *followed = true;
  return code;
}

// A `submit KIND` up to the kind's own output: the exit code so far, the
// client, and the finished job when it was followed (--watch).
struct Submitted {
  int code;
  BenchClient client;
  std::optional<v1::Job> done;
};

Submitted Submit(const GlobalOptions& g, const absl::StatusOr<v1::JobSpec>& spec,
                 const SubmitFlags& flags) {
  Submitted out{kExitOk, MakeClient(g), std::nullopt};
  if (!spec.ok()) {
    out.code = ReportError(spec.status());
    return out;
  }
  v1::JobSpec swept = *spec;
  absl::Status s = ApplySweepFlags(flags.sweep, flags.cell_timeout, &swept);
  if (s.ok() && !flags.pivot.pivot.empty() && !swept.has_sweep()) {
    s = absl::InvalidArgumentError("--pivot needs --sweep: it lays out a sweep's cells");
  }
  if (s.ok()) s = CheckWatchOnlyFlags(flags.watch, {{"--pivot", !flags.pivot.pivot.empty()}});
  if (!s.ok()) {
    out.code = ReportError(s);
    return out;
  }
  v1::Job done;
  bool followed = false;
  out.code = SubmitAndFollow(out.client, swept, flags, &done, &followed);
  if (followed) out.done = std::move(done);
  return out;
}

// After SubmitAndFollow: the finished job as JSON, or `view` after a blank
// line ending the progress, and a sweep's pivot when asked for.
void PrintFinished(const v1::Job& done, const SubmitFlags& flags, const std::string& view) {
  if (flags.json) {
    Print(ToJson(done));
    return;
  }
  Write(stderr, "\n");
  Print(view);
  if (!flags.pivot.pivot.empty()) {
    absl::StatusOr<std::string> pivot = SweepPivotText(done, flags.pivot, /*csv=*/false);
    if (pivot.ok()) {
      Print("\n" + *pivot);
    } else {
      ReportError(pivot.status());
    }
  }
}

// A line about a file saved for the job: with the view on stdout, on stderr
// with --json (stdout holds the Job alone).
void Report(bool json, const std::string& line) {
  if (json) {
    std::fflush(stdout);
    std::fprintf(stderr, "benchctl: %s\n", line.c_str());
  } else {
    Print(line + "\n");
  }
}

ArtifactFetcher FetcherOf(BenchClient& client) {
  return
      [&client](const std::string& job_id, const std::string& name) -> absl::StatusOr<std::string> {
        std::string bytes;
        absl::StatusOr<int64_t> size =
            client.FetchArtifact(job_id, name, [&](const std::string& chunk) { bytes += chunk; });
        if (!size.ok()) return size.status();
        return bytes;
      };
}

// Fetches an artifact into `path` through `path`.part, renamed when whole.
absl::Status FetchToFile(BenchClient& client, const std::string& job_id, const std::string& name,
                         const std::string& path, int64_t* size) {
  const std::string part = path + ".part";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) return absl::FailedPreconditionError(fmt::format("cannot write {}", part));
  absl::StatusOr<int64_t> got =
      client.FetchArtifact(job_id, name, [&](const std::string& chunk) { out << chunk; });
  out.close();
  if (!got.ok() || !out) {
    std::remove(part.c_str());
    return got.ok() ? absl::DataLossError(fmt::format("writing {} failed", part)) : got.status();
  }
  if (std::rename(part.c_str(), path.c_str()) != 0) {
    std::remove(part.c_str());
    return absl::FailedPreconditionError(fmt::format("cannot write {}", path));
  }
  *size = *got;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobState> ParseJobState(const std::string& name) {
  v1::JobState state;
  if (!name.empty() && absl::AsciiStrToLower(name) != "unspecified" &&
      v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(name), &state)) {
    return state;
  }
  return absl::InvalidArgumentError(
      fmt::format("--state: unknown state '{}'; expected queued, running, succeeded, failed, "
                  "cancelled or interrupted",
                  name));
}

absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name) {
  auto kind = benchd::ParseJobKind(name);
  if (kind.ok()) return kind;
  return absl::InvalidArgumentError(absl::StrCat("--kind: ", kind.status().message()));
}

std::string ErrorMessage(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnavailable:
      return std::string(status.message());
    default:
      return fmt::format("{}: {}", absl::StatusCodeToString(status.code()),
                         std::string(status.message()));
  }
}

int ReportError(const absl::Status& status) {
  std::fflush(stdout);
  std::fprintf(stderr, "benchctl: %s\n", ErrorMessage(status).c_str());
  return ExitCodeForStatus(status);
}

absl::Status CheckWatchOnlyFlags(bool watch,
                                 const std::vector<std::pair<std::string, bool>>& given) {
  if (watch) return absl::OkStatus();
  for (const auto& [flag, was_given] : given) {
    if (!was_given) continue;
    return absl::InvalidArgumentError(
        fmt::format("{} needs --watch: it acts on the finished job (without --watch, submit "
                    "prints the job id and returns)",
                    flag));
  }
  return absl::OkStatus();
}

int RunSubmitBenchmark(const GlobalOptions& g, const BenchmarkOptions& options,
                       const SubmitFlags& flags) {
  Submitted s = Submit(g, BuildBenchmarkSpec(options), flags);
  if (s.done) PrintFinished(*s.done, flags, JobView(*s.done));
  return s.code;
}

std::vector<std::string> SaveTimelines(const v1::Job& job, const std::string& svg_dir,
                                       const ArtifactFetcher& fetch) {
  std::vector<std::string> lines;
  if (!job.result().has_memory()) return lines;
  const v1::MemoryResult& r = job.result().memory();
  const std::string dir = svg_dir.empty() ? "." : svg_dir;
  for (int i = 0; i < r.runs_size(); ++i) {
    const v1::MemoryRun& run = r.runs(i);
    if (run.timeline_artifact().empty()) continue;  // out of memory before recording began
    const std::string path = dir + "/" + TimelineFileName(job.id(), r, i);
    std::string svg = run.timeline_svg();
    if (svg.empty()) {
      // Left out of the result for size: the daemon serves it as an artifact.
      absl::StatusOr<std::string> fetched = fetch(job.id(), run.timeline_artifact());
      if (!fetched.ok()) {
        lines.push_back(fmt::format("timeline of {}: not in the result, and fetching {} failed: {}",
                                    run.name(), run.timeline_artifact(),
                                    ErrorMessage(fetched.status())));
        continue;
      }
      svg = *std::move(fetched);
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << svg;
    out.close();
    lines.push_back(out ? fmt::format("timeline of {} saved to {}", run.name(), path)
                        : fmt::format("timeline of {}: could not write {}", run.name(), path));
  }
  return lines;
}

int RunSubmitMemory(const GlobalOptions& g, const MemoryOptions& options, const SubmitFlags& flags,
                    const std::optional<std::string>& svg_dir) {
  if (absl::Status s = CheckWatchOnlyFlags(flags.watch, {{"--svg-dir", svg_dir.has_value()}});
      !s.ok()) {
    return ReportError(s);
  }
  Submitted s = Submit(g, BuildMemorySpec(options), flags);
  if (!s.done) return s.code;
  PrintFinished(*s.done, flags, JobView(*s.done));
  for (const std::string& line :
       SaveTimelines(*s.done, svg_dir.value_or("."), FetcherOf(s.client))) {
    Report(flags.json, line);
  }
  return s.code;
}

int RunSubmitProfile(const GlobalOptions& g, const ProfileOptions& options,
                     const SubmitFlags& flags, const ProfileOutput& output) {
  if (absl::Status s = CheckWatchOnlyFlags(flags.watch, {{"--trace", output.trace_path.has_value()},
                                                         {"--top", output.top.has_value()},
                                                         {"--all", output.all}});
      !s.ok()) {
    return ReportError(s);
  }
  Submitted s = Submit(g, BuildProfileSpec(options), flags);
  if (!s.done) return s.code;
  const v1::Job& done = *s.done;
  const int code = s.code;
  BenchClient& client = s.client;
  ProfileViewOptions view;
  view.top = output.top.value_or(view.top);
  view.all = output.all;
  PrintFinished(done, flags, JobView(done, view));
  if (code == kExitOk && output.trace_path.has_value() && done.result().has_profile()) {
    int64_t size = 0;
    absl::Status s = FetchToFile(client, done.id(), done.result().profile().trace_artifact(),
                                 *output.trace_path, &size);
    if (!s.ok()) return ReportError(s);
    Report(flags.json,
           fmt::format("trace saved to {} ({})", *output.trace_path, FormatBytes(size)));
  }
  return code;
}

int RunSubmitCollective(const GlobalOptions& g, const CollectiveOptions& options,
                        const SubmitFlags& flags, const std::optional<std::string>& svg_dir) {
  if (absl::Status s = CheckWatchOnlyFlags(flags.watch, {{"--svg-dir", svg_dir.has_value()}});
      !s.ok()) {
    return ReportError(s);
  }
  Submitted s = Submit(g, BuildCollectiveSpec(options), flags);
  if (!s.done) return s.code;
  const v1::Job& done = *s.done;
  PrintFinished(done, flags,
                done.result().has_collective() ? CollectiveResultView(done.result().collective())
                                               : std::string());
  if (svg_dir.has_value()) {
    for (const std::string& line : SavePlots(done, *svg_dir)) Report(flags.json, line);
  }
  return s.code;
}

int RunSubmitAttention(const GlobalOptions& g, const AttentionOptions& options,
                       const SubmitFlags& flags) {
  Submitted s = Submit(g, BuildAttentionSpec(options), flags);
  if (s.done) PrintFinished(*s.done, flags, JobView(*s.done));
  return s.code;
}

int RunSubmitPrecision(const GlobalOptions& g, const PrecisionOptions& options,
                       const SubmitFlags& flags) {
  Submitted s = Submit(g, BuildPrecisionSpec(options), flags);
  if (s.done) PrintFinished(*s.done, flags, JobView(*s.done));
  return s.code;
}

int RunSubmitDdp(const GlobalOptions& g, const DdpOptions& options, const SubmitFlags& flags) {
  Submitted s = Submit(g, BuildDdpSpec(options), flags);
  if (s.done) PrintFinished(*s.done, flags, JobView(*s.done));
  return s.code;
}

int RunArtifactsList(const GlobalOptions& g, const std::string& job_id, bool json) {
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::ListArtifactsResponse> response = client.ListArtifacts(job_id);
  if (!response.ok()) return ReportError(response.status());
  if (json) {
    Print(ToJson(*response));
    return kExitOk;
  }
  if (response->artifacts().empty()) {
    Print(fmt::format("job {} has no artifacts\n", job_id));
    return kExitOk;
  }
  Table t({{"name"}, {"size", Table::Align::kRight}});
  for (const v1::Artifact& a : response->artifacts())
    t.AddRow({a.name(), FormatBytes(a.size_bytes())});
  Print(t.Render() + fmt::format("in {} on the daemon's host\n", response->artifacts_dir()));
  return kExitOk;
}

int RunArtifactsGet(const GlobalOptions& g, const std::string& job_id, const std::string& name,
                    const std::string& out_path) {
  BenchClient client = MakeClient(g);
  if (out_path == "-") {
    absl::StatusOr<int64_t> got = client.FetchArtifact(job_id, name, [](const std::string& chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    });
    std::fflush(stdout);
    return got.ok() ? kExitOk : ReportError(got.status());
  }
  const std::string path = out_path.empty() ? name : out_path;
  int64_t size = 0;
  if (absl::Status s = FetchToFile(client, job_id, name, path, &size); !s.ok()) {
    return ReportError(s);
  }
  std::fprintf(stderr, "%s\n", fmt::format("saved {} ({})", path, FormatBytes(size)).c_str());
  return kExitOk;
}

int RunWatch(const GlobalOptions& g, const std::string& job_id, bool json) {
  BenchClient client = MakeClient(g);
  v1::Job final_job;
  return WatchJob(client, job_id, {.stream = stdout, .ndjson = json}, &final_job);
}

int RunGet(const GlobalOptions& g, const std::string& job_id, bool json, bool csv,
           const PivotFlags& pivot) {
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::Job> job = client.GetJob(job_id);
  if (!job.ok()) return ReportError(job.status());
  if (!pivot.pivot.empty()) {
    absl::StatusOr<std::string> text = SweepPivotText(*job, pivot, csv);
    if (!text.ok()) return ReportError(text.status());
    Print(*text);
  } else if (json) {
    Print(ToJson(*job));
  } else if (csv) {
    Print(job->spec().has_sweep()         ? SweepCsv(*job)
          : job->result().has_precision() ? PrecisionCsv(*job)
          : job->result().has_ddp()       ? DdpCsv(*job)
                                          : StepsCsv(*job));
  } else {
    Print(JobView(*job));
  }
  // Like watch, the exit code tells a script how the job ended; queued and
  // running jobs are not failures (yet).
  switch (job->state()) {
    case v1::JOB_STATE_FAILED:
    case v1::JOB_STATE_CANCELLED:
    case v1::JOB_STATE_INTERRUPTED:
      return kExitJobFailed;
    default:
      return kExitOk;
  }
}

absl::StatusOr<v1::ListJobsResponse> ListJobsUpTo(const ListJobsCall& call,
                                                  v1::ListJobsRequest request, int limit) {
  request.set_page_size(std::min(limit, kMaxListPageSize));
  request.clear_page_token();
  v1::ListJobsResponse all;
  while (all.jobs_size() < limit) {
    absl::StatusOr<v1::ListJobsResponse> page = call(request);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) {
      if (all.jobs_size() == limit) break;
      *all.add_jobs() = std::move(job);
    }
    // A token that does not move on would page forever.
    if (page->next_page_token().empty() || page->next_page_token() == request.page_token()) break;
    request.set_page_token(page->next_page_token());
  }
  return all;
}

absl::StatusOr<v1::ListJobsRequest> BuildListJobsRequest(const ListOptions& options) {
  if (options.limit < 1) {
    return absl::InvalidArgumentError(
        fmt::format("--limit: expected a number of jobs, 1 or more; got {}", options.limit));
  }
  v1::ListJobsRequest request;
  if (!options.state.empty()) {
    absl::StatusOr<v1::JobState> state = ParseJobState(options.state);
    if (!state.ok()) return state.status();
    request.set_state(*state);
  }
  if (!options.kind.empty()) {
    absl::StatusOr<v1::JobKind> kind = ParseJobKind(options.kind);
    if (!kind.ok()) return kind.status();
    request.set_kind(*kind);
  }
  request.set_device(options.device);
  return request;
}

int RunList(const GlobalOptions& g, const ListOptions& options, bool json) {
  absl::StatusOr<v1::ListJobsRequest> request = BuildListJobsRequest(options);
  if (!request.ok()) return ReportError(request.status());
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::ListJobsResponse> response =
      ListJobsUpTo([&client](const v1::ListJobsRequest& r) { return client.ListJobs(r); }, *request,
                   options.limit);
  if (!response.ok()) return ReportError(response.status());
  if (json) {
    std::vector<const google::protobuf::Message*> jobs;
    for (const v1::Job& job : response->jobs()) jobs.push_back(&job);
    Print(ToJsonField("jobs", jobs));
  } else {
    Print(JobListView(*response));
  }
  return kExitOk;
}

int RunCancel(const GlobalOptions& g, const std::string& job_id, bool json) {
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::Job> job = client.CancelJob(job_id);
  if (!job.ok()) return ReportError(job.status());
  if (json) {
    Print(ToJson(*job));
  } else if (job->state() == v1::JOB_STATE_RUNNING) {
    Print(fmt::format("job {}: cancel requested; it stops at its next step\n", job->id()));
  } else {
    Print(fmt::format("job {}: {}\n", job->id(), StateName(job->state())));
  }
  return kExitOk;
}

int RunModels(const GlobalOptions& g, const std::string& device, bool json) {
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::ListModelsResponse> response = client.ListModels(device);
  if (!response.ok()) return ReportError(response.status());
  Print(json ? ToJson(*response) : ModelsView(*response));
  return kExitOk;
}

int RunEvict(const GlobalOptions& g, const std::string& key, const std::string& device, bool all,
             bool json) {
  v1::EvictModelRequest request;
  // Both fields empty is "every device" in the proto, hence --all sets nothing.
  if (!all) {
    request.set_key(key);
    request.set_device(device);
  }
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::EvictModelResponse> response = client.EvictModel(request);
  if (!response.ok()) return ReportError(response.status());
  if (json) {
    Print(ToJson(*response));
  } else {
    Print(fmt::format("evicted {} model{}\n", response->evicted(),
                      response->evicted() == 1 ? "" : "s"));
  }
  return kExitOk;
}

int RunEstimate(const GlobalOptions& g, const EstimateOptions& options, bool json) {
  absl::StatusOr<v1::EstimateRequest> request = BuildEstimateRequest(options);
  if (!request.ok()) return ReportError(request.status());
  absl::StatusOr<v1::MemoryEstimate> estimate;
  if (options.offline) {
    estimate = benchd::Estimate(*request);  // the daemon's code, here
  } else {
    BenchClient client = MakeClient(g);
    estimate = client.Estimate(*request);
  }
  if (!estimate.ok()) return ReportError(estimate.status());
  Print(json ? ToJson(*estimate) : EstimateView(*estimate));
  return kExitOk;
}

int RunNode(const GlobalOptions& g, bool json) {
  BenchClient client = MakeClient(g);
  absl::StatusOr<v1::NodeInfo> node = client.GetNodeInfo();
  if (!node.ok()) return ReportError(node.status());
  Print(json ? ToJson(*node) : NodeView(*node));
  return kExitOk;
}

int RunNodes(const GlobalOptions& g, bool json, int wait_for, double wait_seconds) {
  BenchClient client = MakeClient(g);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wait_seconds * 1000));
  absl::StatusOr<v1::ListNodesResponse> nodes = client.ListNodes();
  while (wait_for > 0 && std::chrono::steady_clock::now() < deadline) {
    // A daemon still starting is UNAVAILABLE: keep asking. Anything else is final.
    if (!nodes.ok() && nodes.status().code() != absl::StatusCode::kUnavailable) break;
    if (nodes.ok() && ReadyNodes(*nodes) >= wait_for) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    nodes = client.ListNodes();
  }
  if (!nodes.ok()) return ReportError(nodes.status());
  if (wait_for > 0 && ReadyNodes(*nodes) < wait_for) {
    return ReportError(absl::DeadlineExceededError(fmt::format(
        "waited {:g} s for {} READY nodes: {}", wait_seconds, wait_for, NodesSummary(*nodes))));
  }
  Print(json ? ToJson(*nodes) : NodesView(*nodes));
  return kExitOk;
}

}  // namespace benchd::client

namespace benchd::client {

int RunGroupsCreate(const GlobalOptions& g, const std::string& devices, const std::string& backend,
                    double timeout_seconds, bool json) {
  v1::CreateGroupRequest request;
  for (absl::string_view d : absl::StrSplit(devices, ',', absl::SkipWhitespace())) {
    request.add_devices(std::string(d));
  }
  if (!backend.empty()) {
    auto b = ParseBackend(backend);
    if (!b.ok())
      return ReportError(absl::InvalidArgumentError(absl::StrCat("--", b.status().message())));
    request.set_backend(*b);
  }
  request.set_timeout_seconds(timeout_seconds);
  BenchClient client = MakeClient(g);
  const double rendezvous = (timeout_seconds > 0 ? timeout_seconds : 300) + 60;
  auto group = client.CreateGroup(
      request, std::chrono::milliseconds(static_cast<int64_t>(rendezvous * 1000)));
  if (!group.ok()) return ReportError(group.status());
  Print(json ? ToJson(*group) : GroupView(*group));
  return kExitOk;
}

int RunGroupsList(const GlobalOptions& g, bool json) {
  BenchClient client = MakeClient(g);
  auto groups = client.ListGroups();
  if (!groups.ok()) return ReportError(groups.status());
  Print(json ? ToJson(*groups) : GroupsTable({groups->groups().begin(), groups->groups().end()}));
  return kExitOk;
}

int RunGroupsDestroy(const GlobalOptions& g, const std::string& id, bool json) {
  BenchClient client = MakeClient(g);
  auto out = client.DestroyGroup(id);
  if (!out.ok()) return ReportError(out.status());
  Print(json ? ToJson(*out) : fmt::format("destroyed group {}\n", out->group().id()));
  return kExitOk;
}

}  // namespace benchd::client
