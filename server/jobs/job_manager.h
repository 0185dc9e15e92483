// The life of a job: Submit checks and stores it, a dispatcher thread per
// device takes it from the queue to its worker (WorkerClient::Run), turns the
// worker's events into JobEvents and the final Job in the store.
#ifndef BENCHD_SERVER_JOBS_JOB_MANAGER_H_
#define BENCHD_SERVER_JOBS_JOB_MANAGER_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "server/core/job_state.h"
#include "server/core/metrics.h"
#include "server/jobs/device_tickets.h"
#include "server/jobs/event_hub.h"
#include "server/jobs/gpu_sharing.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/group_run.h"
#include "server/jobs/job_queue.h"
#include "server/jobs/pending_results.h"
#include "server/store/store.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

// What a JobManager is given once, at construction.
struct JobManagerOptions {
  // Collective and data-parallel jobs run on the registry's groups; without
  // one they are refused (UNIMPLEMENTED).
  GroupRegistry* groups = nullptr;
  // Where the jobs' plots go (<artifacts_dir>/<job id>/); it also takes what
  // a finished job's result is cut of (server/jobs/result_bounds.h), and
  // Start claims it for the store (server/store/artifact_owner.h).
  std::string artifacts_dir;
  // The daemon's progress deadlines by kind name ("benchmark", ...; from
  // --progress-timeout); a kind not here uses DefaultProgressTimeoutSeconds.
  // Submit writes the one a job gets into its stored spec.
  std::map<std::string, double> progress_timeouts;
  // --gpu-sharing when-idle (server/jobs/gpu_sharing.h): a GPU job is refused
  // at Submit and fails before it starts while another process uses its GPU,
  // and a job during which one appeared gets a warning. null: dedicated.
  const GpuSharing* gpu_sharing = nullptr;
};

class JobManager {
 public:
  // `workers` is the Supervisor in the daemon, FakeWorkers in tests;
  // `metrics` may be null.
  JobManager(Store* store, EventHub* hub, Workers* workers, Metrics* metrics,
             std::vector<std::string> devices, JobManagerOptions options = {});
  ~JobManager();

  // Claims the artifacts dir for the store (refused: FAILED_PRECONDITION
  // naming both), takes up the jobs a previous daemon left queued and starts
  // the dispatchers.
  absl::Status Start();
  // The first part of a stop (SIGTERM): Submit refuses, no job starts, and
  // running ones get up to `grace` to finish; true when none is left.
  // Queued jobs stay QUEUED in the store. Stop then interrupts the rest.
  bool Drain(std::chrono::milliseconds grace);
  // Stops taking jobs; running ones are cancelled and marked INTERRUPTED; queued
  // ones stay QUEUED in the store for the next start; results not stored yet
  // get a last try (PendingResults::Flush).
  void Stop();

  // `submitter`: who asked (Job.submitter; "" when the daemon checks nobody).
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec, std::string submitter = "");
  // A queued job is cancelled at once; a running one stops at its next step.
  absl::StatusOr<v1::Job> Cancel(const std::string& id);
  // The stored job; one that has ended but waits to be stored says so in
  // result_pending.
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // One page of summaries (server/jobs/job_summary.h): no result arrays.
  absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size, int64_t before_id);
  const std::vector<std::string>& devices() const { return devices_; }
  // `device` as this node's workers name it: "node0/cpu:0" on node0 is "cpu:0".
  std::string CanonicalDevice(const std::string& device) {
    return workers_->CanonicalDevice(device);
  }

  // Sets the resident-model metrics of `device` ("" = every device) from
  // its worker's answer, without waiting for it (server/jobs/model_calls.h).
  // After each job, and after an eviction (BenchService::SetOnEvicted).
  void RefreshResidentModels(const std::string& device);

 private:
  struct Running {
    std::string job_id;
    bool cancel_requested = false;
    CancelHandle* calls = nullptr;  // the worker calls in flight (all members of a collective)
  };

  // How waiting for a device's worker ended (AwaitWorker).
  enum class WorkerWait { kUp, kCancelled, kStopping, kUnavailable };
  // How one worker call of a job ended (RunCall): the job's state had it
  // been the whole job, and what a sweep's row needs.
  struct CallEnd {
    v1::JobState state = v1::JOB_STATE_FAILED;
    int error_code = 0;
    std::string error_message;
    v1::JobResult result;             // SUCCEEDED only
    bool timed_out = false;           // the call's time limit passed (it was cancelled)
    bool worker_lost = false;         // the worker died or was killed for the progress deadline
    bool cancelled_mid_call = false;  // our call ended before the worker's last event
  };

  void Dispatch(const std::string& device);
  // Holds every device's worker of `job` into `holds` (kept until the job
  // ends, so none is parked under it) and, for one that was parked
  // (--worker-idle-exit), waits for it to start again, with a log event
  // before and after (its start time). OK also on a cancel or a stop (the
  // run handles those); an error when a parked worker could not start.
  absl::Status HoldWorkers(const v1::Job& job, const std::string& key,
                           std::vector<std::shared_ptr<void>>* holds);
  // --gpu-sharing when-idle, before a job starts: OK when its GPUs have no
  // other process (or it will not start: a cancel or a stop, which its run
  // handles), once their workers are up (their UUIDs known); else why not.
  absl::Status CheckGpusIdle(const v1::Job& job, const std::string& key);
  // Waits (up to 5 minutes, seeing cancels and stops) for `device`'s worker.
  WorkerWait AwaitWorker(const std::string& device, std::shared_ptr<WorkerClient>* worker,
                         std::string* why);
  // One Run of `spec` for `job` on `worker`: its events published as the
  // job's, under the job's progress deadline, cancelled by the job's cancel
  // and, with `time_limit`, when that passes.
  CallEnd RunCall(const v1::Job& job, const v1::JobSpec& spec, WorkerClient& worker,
                  std::optional<std::chrono::milliseconds> time_limit);
  // After a call cancelled mid-run: kills the worker if it does not answer.
  void ReplaceIfSilent(const v1::Job& job, WorkerClient& worker);
  void RunOnWorker(v1::Job job);
  // A sweep (server/jobs/sweep_job.cc): every cell a RunCall, in order.
  void RunSweep(v1::Job job);
  // A job on a process group, on all its devices: `run` between the shared
  // start (a cancel before it, MarkRunning, the devices' running gauge) and
  // end (the gauge, Finish). `key` is its RunningKey.
  void RunOnGroup(v1::Job job,
                  const std::function<void(v1::Job& job, const std::string& key)>& run);
  // A collective job (server/jobs/collective_job.cc) on all its devices.
  void RunCollective(v1::Job job);
  // A data-parallel job (server/jobs/ddp_job.cc) on all its devices.
  void RunDdp(v1::Job job);
  // A group job's log, cancel and stop hooks for the job running under `key`.
  void SetGroupJobCallbacks(const v1::Job& job, const std::string& key, GroupJobCallbacks* cb);
  // Writes the final state, publishes the terminal event, counts it.
  // RUNNING, stored and published as started; false when the store refused
  // it (the job is then FAILED and finished).
  bool MarkRunning(v1::Job& job);
  void Finish(v1::Job job);
  // After the final job is stored: the terminal event, the metrics, Cancel's wait.
  void Announce(const v1::Job& job);
  void Publish(const v1::Job& job, const std::function<void(v1::JobEvent*)>& fill);

  Store* const store_;
  EventHub* const hub_;
  Workers* const workers_;
  Metrics* const metrics_;
  const std::vector<std::string> devices_;
  JobQueue queue_;
  DeviceTickets tickets_;  // who holds which devices (one job per device at a time)
  GroupRegistry* const groups_;
  const std::string artifacts_dir_;
  const std::map<std::string, double> progress_timeouts_;
  const GpuSharing* const gpu_sharing_;

  std::mutex mu_;
  std::condition_variable finished_cv_;
  bool stopping_ = false;
  bool draining_ = false;  // Drain: no new job starts, Submit refuses
  int refreshes_ = 0;      // RefreshResidentModels calls out; Stop waits for none
  std::map<std::string, Running>
      running_;  // by RunningKey ("cpu:0"; "cpu:0,cpu:1" for a collective)
  std::set<std::string> cancelled_in_flight_;  // popped but not yet running
  std::vector<std::thread> dispatchers_;
  // Last: its thread calls Announce, so it goes first.
  PendingResults pending_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_JOB_MANAGER_H_
