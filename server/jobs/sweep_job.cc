// A sweep (JobSpec.sweep; docs/architecture.md "Sweeps"): the job holds its
// device and runs each cell as an ordinary worker Run, in order, so the
// worker knows nothing of sweeps. A cell that runs out of memory, passes its
// time limit or fails is a row saying so, and the sweep goes on; a cancel
// stops the cell running and the sweep with it. Each cell starts with no
// model resident on the device (evicted before it).
#include <chrono>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/sweep_spec.h"
#include "common/sweep_table.h"
#include "server/jobs/job_manager.h"
#include "server/jobs/job_summary.h"
#include "server/jobs/result_bounds.h"

namespace benchd::server {
namespace {

// A streamed row stays small: its result without the per-step arrays, and
// without any array when still large (a profile's kernel tables); the
// stored result has them (bounded: server/jobs/result_bounds.h).
constexpr size_t kMaxStreamedCellBytes = 256 << 10;

v1::SweepCell StreamedCell(v1::SweepCell cell) {
  v1::JobResult* r = cell.mutable_result();
  if (r->has_benchmark()) r->mutable_benchmark()->clear_steps();
  if (r->has_profile()) r->mutable_profile()->mutable_unprofiled()->clear_steps();
  if (cell.ByteSizeLong() > kMaxStreamedCellBytes) SummarizeResult(r);
  return cell;
}

// A worker's RESOURCE_EXHAUSTED is its out-of-memory answer (worker/benchmark.cc).
v1::SweepCellOutcome OutcomeOf(v1::JobState state, bool timed_out, int error_code) {
  if (state == v1::JOB_STATE_SUCCEEDED) return v1::SWEEP_CELL_OUTCOME_OK;
  if (timed_out) return v1::SWEEP_CELL_OUTCOME_TIMEOUT;
  if (error_code == static_cast<int>(absl::StatusCode::kResourceExhausted)) {
    return v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY;
  }
  return v1::SWEEP_CELL_OUTCOME_FAILED;
}

v1::EvictModelRequest EvictAllOn(const std::string& device) {
  v1::EvictModelRequest request;
  request.set_device(device);
  return request;
}

}  // namespace

void JobManager::RunSweep(v1::Job job) {
  const std::string device = job.devices_size() > 0 ? job.devices(0) : std::string();
  auto cells = ExpandSweep(job.spec());
  if (!cells.ok()) {
    // Checked at Submit; a daemon of another version may have stored it.
    job.set_state(v1::JOB_STATE_FAILED);
    job.set_error_code(static_cast<int>(cells.status().code()));
    job.set_error_message(std::string(cells.status().message()));
    Finish(job);
    return;
  }
  const v1::SweepSpec& sweep = job.spec().sweep();
  std::optional<std::chrono::milliseconds> cell_limit;
  if (sweep.has_cell_timeout_seconds()) {
    cell_limit =
        std::chrono::milliseconds(static_cast<int64_t>(sweep.cell_timeout_seconds() * 1000));
  }
  v1::SweepResult* rows = job.mutable_result()->mutable_sweep();
  rows->set_cells_total(static_cast<int>(cells->size()));
  DeriveSweepColumns(sweep, rows);

  bool running = false;
  std::shared_ptr<WorkerClient> worker;
  for (size_t i = 0; i < cells->size(); ++i) {
    const SweepCellSpec& cell = (*cells)[i];
    const std::string label = SweepCellLabel(sweep, cell.values);
    // Before each cell: the worker may be restarting after the last one.
    std::string why;
    const WorkerWait wait = AwaitWorker(device, &worker, &why);
    if (wait == WorkerWait::kCancelled) {
      job.set_state(v1::JOB_STATE_CANCELLED);
      job.set_error_message(running ? absl::StrCat("cancelled after ", i, " of ", cells->size(),
                                                   " cells; the finished cells are kept")
                                    : "cancelled before it started");
      break;
    }
    if (wait == WorkerWait::kStopping) {
      if (!running) return;  // stays QUEUED; taken up at the next start
      job.set_state(v1::JOB_STATE_INTERRUPTED);
      job.set_error_code(static_cast<int>(absl::StatusCode::kAborted));
      job.set_error_message(absl::StrCat("the daemon stopped after ", i, " of ", cells->size(),
                                         " cells of this sweep; the finished cells are kept"));
      break;
    }
    if (wait == WorkerWait::kUnavailable) {
      job.set_state(v1::JOB_STATE_FAILED);
      job.set_error_code(static_cast<int>(absl::StatusCode::kUnavailable));
      job.set_error_message(absl::StrCat("the worker for ", device, " is not up for cell ", i, " (",
                                         label, "): ", why, "; cells ", i,
                                         ".. not run, the finished cells are kept"));
      if (!running) {
        Finish(job);
        return;
      }
      break;
    }
    if (!running) {
      if (!MarkRunning(job)) return;
      if (metrics_) metrics_->SetRunning(device, true);
      running = true;
    }
    v1::JobSpec spec = cell.spec;
    spec.set_device(job.spec().device());
    spec.set_progress_timeout_seconds(job.spec().progress_timeout_seconds());
    Publish(job, [&](v1::JobEvent* e) {
      e->set_log(absl::StrCat("sweep cell ", i + 1, " of ", cells->size(), ": ", label));
    });
    // Every cell starts with no model resident on the device, so its figures
    // and an out-of-memory row are its own: the models earlier cells (or
    // jobs) left resident would otherwise hold its memory (on an H100 a
    // preset x mode x precision sweep ran xl's train steps out of memory
    // behind the smaller presets' resident models and AdamW states).
    auto evicted = worker->EvictModel(EvictAllOn(device), kEvictModelTimeout);
    if (!evicted.ok()) {
      Publish(job, [&](v1::JobEvent* e) {
        e->set_log(absl::StrCat("sweep cell ", i + 1, ": the models resident on ", device,
                                " could not be evicted first (", evicted.status().message(),
                                "); the cell runs beside them"));
      });
    }
    const auto started = std::chrono::steady_clock::now();
    CallEnd end = RunCall(job, spec, *worker, cell_limit);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    if (end.state == v1::JOB_STATE_CANCELLED || end.state == v1::JOB_STATE_INTERRUPTED) {
      // The job's own cancel or the daemon's stop: no row for a cell cut short.
      job.set_state(end.state);
      job.set_error_code(end.error_code);
      job.set_error_message(absl::StrCat(end.error_message, " (cell ", i, ": ", label, "); the ", i,
                                         " finished cells of ", cells->size(), " are kept"));
      if (end.cancelled_mid_call) ReplaceIfSilent(job, *worker);
      break;
    }
    v1::SweepCell* row = rows->add_cells();
    row->set_index(static_cast<int>(i));
    for (const std::string& v : cell.values) row->add_values(v);
    row->set_outcome(OutcomeOf(end.state, end.timed_out, end.error_code));
    row->set_error_code(end.error_code);
    row->set_error_message(end.error_message);
    *row->mutable_spec() = spec;
    if (end.state == v1::JOB_STATE_SUCCEEDED) *row->mutable_result() = std::move(end.result);
    row->set_wall_seconds(wall);
    DeriveSweepColumns(sweep, rows);
    Publish(job, [&](v1::JobEvent* e) { *e->mutable_sweep_cell() = StreamedCell(*row); });
    // The RUNNING job keeps its rows so far: GetJob shows them, and a daemon
    // killed mid-sweep leaves them with the INTERRUPTED job. Best effort: the
    // final record is stored (or kept and retried) by Finish, bounded; a
    // sweep already past the bound is not rewritten after every cell.
    if (job.ByteSizeLong() <= kMaxStoredJobBytes) {
      if (auto st = store_->Update(job); !st.ok()) {
        fprintf(stderr, "benchd: job %s: rows of the sweep so far not stored: %s\n",
                job.id().c_str(), std::string(st.message()).c_str());
      }
    }
    // A timed-out cell's worker stops at its next step; one that does not
    // answer is replaced, and the next cell waits for the new one.
    if (end.cancelled_mid_call) ReplaceIfSilent(job, *worker);
  }
  if (job.state() == v1::JOB_STATE_RUNNING) {
    // Every cell ran: the job succeeded when one did; the rows say how each went.
    if (rows->cells_ok() > 0) {
      job.set_state(v1::JOB_STATE_SUCCEEDED);
    } else {
      const v1::SweepCell& first = rows->cells(0);
      job.set_state(v1::JOB_STATE_FAILED);
      job.set_error_code(first.error_code());
      job.set_error_message(
          absl::StrCat("every cell of the sweep failed (", rows->cells_out_of_memory(),
                       " out of memory, ", rows->cells_timeout(), " timed out, ",
                       rows->cells_failed(), " failed; the rows say why); cell 0 (",
                       SweepCellLabel(sweep, {first.values().begin(), first.values().end()}),
                       "): ", first.error_message()));
    }
  }
  if (!running) job.clear_result();
  if (metrics_ && running) metrics_->SetRunning(device, false);
  Finish(job);
}

}  // namespace benchd::server
