#include "server/jobs/job_manager.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "google/protobuf/util/time_util.h"
#include "server/core/devices.h"
#include "server/core/timestamp.h"
#include "server/jobs/collective_job.h"
#include "server/jobs/ddp_job.h"
#include "server/jobs/job_summary.h"
#include "server/jobs/memory_admission.h"
#include "server/jobs/model_calls.h"
#include "server/jobs/progress_deadline.h"
#include "server/jobs/result_bounds.h"
#include "server/store/artifact_owner.h"

namespace benchd::server {
namespace {

using google::protobuf::util::TimeUtil;
constexpr auto kWorkerWait = std::chrono::minutes(5);

// Job.devices is one device, or (a collective job) all of its devices,
// sorted; its queue is the first one's.
std::vector<std::string> JobDevices(const v1::Job& job) {
  return {job.devices().begin(), job.devices().end()};
}
// The queue a job waits in: its first device of this node (a collective on
// a group spanning nodes also names other members' devices, "node1/cpu:0").
std::string QueueDevice(const v1::Job& job) {
  for (const std::string& d : job.devices()) {
    if (d.find('/') == std::string::npos) return d;
  }
  return job.devices().empty() ? std::string() : job.devices(0);
}
// What running_ is keyed by: the job's devices joined (one job holds them all).
std::string RunningKey(const v1::Job& job) { return absl::StrJoin(job.devices(), ","); }

// What a job was doing, for a progress deadline's message: "after
// step 17 of 105" (warm-up included), "after the log line 'building model small'".
std::string DescribeProgress(const internal::WorkerEvent& event) {
  switch (event.event_case()) {
    case internal::WorkerEvent::kWarmupStep:
      return absl::StrCat("after warm-up step ", event.warmup_step().timing().index() + 1);
    case internal::WorkerEvent::kStep:
      return absl::StrCat("after step ", event.step().timing().index() + 1,
                          event.step().total_steps() > 0
                              ? absl::StrCat(" of ", event.step().total_steps())
                              : std::string());
    case internal::WorkerEvent::kLog:
      return absl::StrCat("after the log line '", event.log().substr(0, 120), "'");
    default:
      return "after its last event";
  }
}

// How long a worker has to answer after its job was cancelled.
constexpr std::chrono::seconds kCancelledPingTimeout{5};

double Seconds(const google::protobuf::Timestamp& from, const google::protobuf::Timestamp& to) {
  return static_cast<double>(TimeUtil::DurationToNanoseconds(to - from)) / 1e9;
}

}  // namespace

JobManager::JobManager(Store* store, EventHub* hub, Workers* workers, Metrics* metrics,
                       std::vector<std::string> devices, JobManagerOptions options)
    : store_(store),
      hub_(hub),
      workers_(workers),
      metrics_(metrics),
      devices_(std::move(devices)),
      queue_(devices_),
      tickets_(devices_),
      groups_(options.groups),
      artifacts_dir_(std::move(options.artifacts_dir)),
      progress_timeouts_(std::move(options.progress_timeouts)),
      gpu_sharing_(options.gpu_sharing),
      pending_(
          store, [this](const v1::Job& job) { Announce(job); },
          [this](size_t n) {
            if (metrics_) metrics_->SetUnstoredResults(static_cast<int64_t>(n));
          }) {
  store_->SetBadRowListener([this](int64_t, const std::string&) {
    if (metrics_) metrics_->StoreBadRow();
  });
}

JobManager::~JobManager() { Stop(); }

void JobManager::Publish(const v1::Job& job, const std::function<void(v1::JobEvent*)>& fill) {
  v1::JobEvent e;
  e.set_job_id(job.id());
  *e.mutable_time() = Now();
  fill(&e);
  hub_->Publish(e);
}

absl::Status JobManager::Start() {
  if (!artifacts_dir_.empty()) {
    if (auto s = ClaimArtifactsDir(*store_, artifacts_dir_); !s.ok()) return s;
  }
  auto queued = store_->Recover();
  if (!queued.ok()) return queued.status();
  for (const v1::Job& job : *queued) {
    if (!queue_.Push(QueueDevice(job), job.id())) {
      // The daemon no longer serves that device: the job cannot run here.
      v1::Job failed = job;
      failed.set_state(v1::JOB_STATE_FAILED);
      failed.set_error_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
      failed.set_error_message(
          absl::StrCat("the daemon restarted without device ", absl::StrJoin(job.devices(), ","),
                       "; resubmit on one of ", absl::StrJoin(devices_, ", ")));
      Finish(failed);
      continue;
    }
    Publish(job, [&](v1::JobEvent* e) { *e->mutable_queued() = job; });
  }
  for (const auto& d : devices_) {
    if (metrics_) metrics_->SetQueueDepth(d, queue_.Depth(d));
    dispatchers_.emplace_back([this, d] { Dispatch(d); });
  }
  return absl::OkStatus();
}

bool JobManager::Drain(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || draining_) return running_.empty();
    draining_ = true;
  }
  queue_.Close();   // dispatchers end after the job they hold
  tickets_.Poke();  // and stop waiting for devices
  std::unique_lock<std::mutex> lock(mu_);
  // Jobs that had not started leave running_ without a Finish: look often.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!running_.empty() && std::chrono::steady_clock::now() < deadline) {
    finished_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return running_.empty();
}

void JobManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [device, r] : running_) {
      if (r.calls) r.calls->Cancel();
    }
  }
  queue_.Close();
  tickets_.Poke();
  for (auto& t : dispatchers_) t.join();
  dispatchers_.clear();
  {
    std::unique_lock<std::mutex> lock(mu_);
    finished_cv_.wait(lock, [&] { return refreshes_ == 0; });
  }
  pending_.Flush();
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& id) {
  auto job = store_->Get(id);
  if (!job.ok()) return job.status();
  if (!IsFinal(job->state())) {
    if (auto why = pending_.Reason(id)) job->set_result_pending(*why);
  }
  return job;
}

absl::StatusOr<JobPage> JobManager::List(const JobFilter& filter, int page_size,
                                         int64_t before_id) {
  auto page = store_->List(filter, page_size, before_id);
  if (!page.ok()) return page.status();
  for (v1::Job& job : page->jobs) {
    if (!IsFinal(job.state())) {
      if (auto why = pending_.Reason(job.id())) job.set_result_pending(*why);
    }
    job = SummarizeJob(std::move(job));
  }
  return page;
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::JobSpec& in, std::string submitter) {
  auto spec = ResolveJobSpec(in);
  if (!spec.ok()) return spec.status();
  std::vector<std::string> job_devices;
  if (spec->has_collective()) {
    if (groups_ == nullptr) {
      return absl::UnimplementedError("collective: this daemon runs no process groups");
    }
    // In a cluster a target may name other members' devices: this node's
    // own under their plain names, the others' as served by READY members.
    std::vector<std::string> served = devices_;
    for (auto& d : workers_->RemoteDevices()) served.push_back(std::move(d));
    for (v1::CollectiveTarget& t : *spec->mutable_collective()->mutable_targets()) {
      for (std::string& d : *t.mutable_devices()) d = workers_->CanonicalDevice(d);
    }
    auto devices = CollectiveJobDevices(spec->collective(), groups_, served);
    if (!devices.ok()) return devices.status();
    job_devices = *std::move(devices);
    if (std::none_of(job_devices.begin(), job_devices.end(),
                     [](const std::string& d) { return d.find('/') == std::string::npos; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective: every device [", absl::StrJoin(job_devices, ", "),
                       "] is another node's; submit it to one of those nodes"));
    }
  } else if (spec->has_ddp()) {
    if (groups_ == nullptr) {
      return absl::UnimplementedError("ddp: this daemon runs no process groups");
    }
    std::vector<std::string> served = devices_;
    for (auto& d : workers_->RemoteDevices()) served.push_back(std::move(d));
    for (std::string& d : *spec->mutable_ddp()->mutable_target()->mutable_devices()) {
      d = workers_->CanonicalDevice(d);
    }
    auto devices = DdpJobDevices(spec->mutable_ddp(), groups_, served);
    if (!devices.ok()) return devices.status();
    job_devices = *std::move(devices);
    if (std::none_of(job_devices.begin(), job_devices.end(),
                     [](const std::string& d) { return d.find('/') == std::string::npos; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("ddp: every device [", absl::StrJoin(job_devices, ", "),
                       "] is another node's; submit it to one of those nodes"));
    }
  } else {
    if (spec->device().empty()) spec->set_device(devices_.front());
    spec->set_device(workers_->CanonicalDevice(spec->device()));  // "node0/cpu:0" on node0
    if (auto s = CheckServedDevice("device", spec->device(), devices_); !s.ok()) return s;
    job_devices = {spec->device()};
  }
  if (auto s = CheckKindForDevice(*spec, spec->device()); !s.ok()) return s;
  // A step that cannot fit its GPU is refused now, not after minutes queued.
  if (auto s = CheckFitsDeviceMemory(*spec, job_devices, workers_->Devices()); !s.ok()) {
    return s;
  }
  if (spec->progress_timeout_seconds() == 0) {
    auto it = progress_timeouts_.find(JobKindName(*spec));
    spec->set_progress_timeout_seconds(
        it != progress_timeouts_.end() ? it->second : DefaultProgressTimeoutSeconds(*spec));
  }
  // A worker that cannot start, or stopped answering, would only hold the job.
  for (const std::string& d : job_devices) {
    if (auto s = AcceptingJobs(workers_->Health(d), d, workers_->LogPath(d)); !s.ok()) return s;
  }
  // --gpu-sharing when-idle: a GPU another process uses now refuses the job
  // (the dispatcher checks again before it starts).
  if (gpu_sharing_) {
    if (auto s = gpu_sharing_->CheckIdle(job_devices, /*unknown_ok=*/true); !s.ok()) return s;
  }
  v1::Job job;
  *job.mutable_spec() = *spec;
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_kind(JobKindOf(*spec));
  for (auto& d : job_devices) job.add_devices(std::move(d));
  *job.mutable_created() = Now();
  job.set_submitter(std::move(submitter));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || draining_)
      return absl::UnavailableError("the daemon is stopping; submit again after it restarts");
  }
  auto id = store_->Insert(job);
  if (!id.ok()) return id.status();
  job.set_id(*id);
  // Published before it is queued so that every watcher sees 'queued' first.
  Publish(job, [&](v1::JobEvent* e) { *e->mutable_queued() = job; });
  if (metrics_) metrics_->JobSubmitted(JobKindName(job.kind()));
  queue_.Push(QueueDevice(job), job.id());
  if (metrics_) metrics_->SetQueueDepth(QueueDevice(job), queue_.Depth(QueueDevice(job)));
  return job;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto job = store_->Get(id);
  if (!job.ok()) return job.status();
  if (auto why = pending_.Reason(id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has already ended; nothing to cancel (", *why, ")"));
  }
  if (IsFinal(job->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " has already ended (", JobStateName(job->state()), "); nothing to cancel"));
  }
  if (queue_.Remove(id)) {
    if (metrics_) metrics_->SetQueueDepth(QueueDevice(*job), queue_.Depth(QueueDevice(*job)));
    job->set_state(v1::JOB_STATE_CANCELLED);
    job->set_error_message("cancelled before it started");
    lock.unlock();
    Finish(*job);
    return store_->Get(id);
  }
  auto it = running_.find(RunningKey(*job));
  if (it != running_.end() && it->second.job_id == id) {
    it->second.cancel_requested = true;
    if (it->second.calls) it->second.calls->Cancel();
  } else {
    // Taken off the queue by its dispatcher a moment ago, not yet running.
    cancelled_in_flight_.insert(id);
  }
  // Cancelling the worker call ends it at once; wait briefly so the answer
  // usually carries the final state.
  finished_cv_.wait_for(lock, std::chrono::seconds(2), [&] {
    auto j = store_->Get(id);
    return j.ok() && IsFinal(j->state());
  });
  lock.unlock();
  return store_->Get(id);
}

void JobManager::Dispatch(const std::string& device) {
  while (auto id = queue_.Pop(device)) {
    if (metrics_) metrics_->SetQueueDepth(device, queue_.Depth(device));
    auto job = store_->Get(*id);
    if (!job.ok() || job->state() != v1::JOB_STATE_QUEUED) continue;
    const std::string key = RunningKey(*job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_[key] = Running{*id, cancelled_in_flight_.erase(*id) > 0, nullptr};
    }
    // Hold every device of the job (a collective's members may be busy with
    // jobs of their own queues); a cancel or a stop ends the wait.
    const uint64_t ticket = tickets_.Acquire(JobDevices(*job), [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return stopping_ || draining_ || running_[key].cancel_requested;
    });
    if (ticket == 0) {
      bool cancelled;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled = running_[key].cancel_requested;
        running_.erase(key);
      }
      if (cancelled) {
        job->set_state(v1::JOB_STATE_CANCELLED);
        job->set_error_message("cancelled before it started");
        Finish(*job);
      }
      continue;  // stopping: stays QUEUED for the next start
    }
    std::vector<std::shared_ptr<void>> holds;  // released when this iteration ends
    absl::Status held = HoldWorkers(*job, key, &holds);
    if (held.ok()) held = CheckGpusIdle(*job, key);
    if (!held.ok()) {
      job->set_state(v1::JOB_STATE_FAILED);
      job->set_error_code(static_cast<int>(held.code()));
      job->set_error_message(std::string(held.message()));
      Finish(*job);
    } else if (job->spec().has_collective()) {
      RunCollective(*job);
    } else if (job->spec().has_ddp()) {
      RunDdp(*job);
    } else if (job->spec().has_sweep()) {
      RunSweep(*job);
    } else {
      RunOnWorker(*job);
    }
    tickets_.Release(ticket);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_.erase(key);
    }
    if (!job->spec().has_collective()) RefreshResidentModels(device);  // a ddp job's models too
  }
}

absl::Status JobManager::HoldWorkers(const v1::Job& job, const std::string& key,
                                     std::vector<std::shared_ptr<void>>* holds) {
  std::vector<std::pair<std::string, std::string>> parked;  // device, why
  for (const std::string& d : JobDevices(job)) {
    const WorkerHealth health = workers_->Health(d);
    holds->push_back(workers_->Hold(d, absl::StrCat("job ", job.id())));
    if (health.state == v1::WORKER_STATE_PARKED) parked.emplace_back(d, health.detail);
  }
  auto not_starting = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_ || draining_ || running_[key].cancel_requested;
  };
  for (const auto& entry : parked) {
    // Named, not a structured binding: clang (the sanitizer build) cannot
    // capture bindings in the lambdas below.
    const std::string& d = entry.first;
    const std::string& why = entry.second;
    Publish(job, [&](v1::JobEvent* e) {
      e->set_log(absl::StrCat("starting the worker for ", d, " for this job, which waits for it (",
                              why, ")"));
    });
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + kWorkerWait;
    while (!not_starting()) {
      auto up = workers_->WaitUntilUp(d, std::chrono::milliseconds(500));
      const auto now = std::chrono::steady_clock::now();
      if (up.ok()) {
        const double seconds = std::chrono::duration<double>(now - start).count();
        Publish(job, [&](v1::JobEvent* e) {
          e->set_log(absl::StrFormat("the worker for %s started in %.1f s (pid %d)", d, seconds,
                                     static_cast<int>((*up)->pid())));
        });
        break;
      }
      const WorkerHealth health = workers_->Health(d);
      if (health.failing_to_start || now > deadline) {
        return absl::UnavailableError(
            absl::StrCat("the worker for ", d,
                         " was parked (--worker-idle-exit) and did not start again for this job: ",
                         health.detail.empty() ? std::string(up.status().message()) : health.detail,
                         "; see ", workers_->LogPath(d)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status JobManager::CheckGpusIdle(const v1::Job& job, const std::string& key) {
  const std::vector<std::string> devices = JobDevices(job);
  if (gpu_sharing_ == nullptr || GpuSharing::LocalGpus(devices).empty()) return absl::OkStatus();
  auto not_starting = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_ || draining_ || running_[key].cancel_requested;
  };
  // A GPU's UUID comes with its worker: wait for those starting, as a run would.
  const auto deadline = std::chrono::steady_clock::now() + kWorkerWait;
  for (const std::string& d : GpuSharing::LocalGpus(devices)) {
    while (!not_starting() && std::chrono::steady_clock::now() < deadline &&
           !workers_->WaitUntilUp(d, std::chrono::milliseconds(500)).ok()) {
    }
  }
  if (not_starting()) return absl::OkStatus();
  return gpu_sharing_->CheckIdle(devices, /*unknown_ok=*/false);
}

JobManager::WorkerWait JobManager::AwaitWorker(const std::string& device,
                                               std::shared_ptr<WorkerClient>* worker,
                                               std::string* why) {
  auto cancel_requested = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return running_[device].cancel_requested;
  };
  auto not_starting = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_ || draining_;
  };
  // The worker may be starting or restarting: wait in short slices so that
  // a cancel or a stop is seen.
  absl::StatusOr<std::shared_ptr<WorkerClient>> up = absl::UnavailableError("");
  const auto deadline = std::chrono::steady_clock::now() + kWorkerWait;
  while (true) {
    if (cancel_requested() || not_starting()) break;
    up = workers_->WaitUntilUp(device, std::chrono::milliseconds(500));
    if (up.ok() || std::chrono::steady_clock::now() > deadline) break;
  }
  if (cancel_requested()) return WorkerWait::kCancelled;
  if (not_starting()) return WorkerWait::kStopping;
  if (!up.ok()) {
    *why = std::string(up.status().message());
    return WorkerWait::kUnavailable;
  }
  *worker = *std::move(up);
  return WorkerWait::kUp;
}

JobManager::CallEnd JobManager::RunCall(const v1::Job& job, const v1::JobSpec& spec,
                                        WorkerClient& worker,
                                        std::optional<std::chrono::milliseconds> time_limit) {
  const std::string device = QueueDevice(job);
  internal::RunRequest request;
  request.set_job_id(job.id());
  *request.mutable_spec() = spec;
  // force was Submit's decision (the memory check), made; the worker has no
  // use for it, and one built before the field would refuse it as unknown.
  request.mutable_spec()->clear_force();
  CancelHandle cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[device].calls = &cancel;
    if (running_[device].cancel_requested || stopping_) cancel.Cancel();
  }
  // Every event is progress; none for the job's deadline (a stopped or hung
  // worker) kills the worker, which is the only way to stop it, and ends the call.
  const double deadline_seconds = ProgressTimeoutSeconds(job.spec());
  ProgressDeadline progress(
      std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1000)),
      "starting (building or loading the model)", [&](const std::string& doing) {
        workers_->Kill(device, worker.generation(),
                       absl::StrCat("job ", job.id(), " made no progress for ", deadline_seconds,
                                    " s ", doing));
        cancel.Cancel();
      });
  // A sweep cell's own limit: a timer that nothing moves on, which cancels
  // the call when it passes.
  std::optional<ProgressDeadline> limit;
  if (time_limit) limit.emplace(*time_limit, "", [&](const std::string&) { cancel.Cancel(); });
  const RunEnd end = worker.Run(request, cancel, [&](const internal::WorkerEvent& event) {
    progress.Progress(DescribeProgress(event));
    switch (event.event_case()) {
      case internal::WorkerEvent::kWarmupStep:
        Publish(job, [&](v1::JobEvent* e) { *e->mutable_warmup_step() = event.warmup_step(); });
        break;
      case internal::WorkerEvent::kStep:
        if (metrics_ && spec.has_benchmark()) {
          metrics_->ObserveStep(spec.benchmark(), event.step().timing().step_seconds());
        }
        Publish(job, [&](v1::JobEvent* e) { *e->mutable_step() = event.step(); });
        break;
      case internal::WorkerEvent::kLog:
        Publish(job, [&](v1::JobEvent* e) { e->set_log(event.log()); });
        break;
      default:
        break;  // a collective's sizes are not a single job's
    }
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[device].calls = nullptr;
  }
  CallEnd out;
  const bool cancel_requested = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return running_[device].cancel_requested;
  }();
  const bool stopping = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }();
  auto fail = [&](absl::StatusCode code, std::string message) {
    out.state = v1::JOB_STATE_FAILED;
    out.error_code = static_cast<int>(code);
    out.error_message = std::move(message);
  };
  if (progress.expired()) {
    fail(absl::StatusCode::kDeadlineExceeded,
         absl::StrCat("no progress for ", deadline_seconds,
                      " s (the job's progress deadline: progress_timeout_seconds, or the daemon's "
                      "--progress-timeout) ",
                      progress.doing(), "; the worker for ", device, " (pid ", worker.pid(),
                      ") was killed and is being restarted; its log is ",
                      workers_->LogPath(device)));
    out.worker_lost = true;
  } else if (end.last.has_value() && !end.last->has_cancelled()) {
    const internal::WorkerEvent& last = *end.last;
    if (last.has_result()) {
      out.state = v1::JOB_STATE_SUCCEEDED;
      out.result = last.result();
    } else if (last.has_failure()) {
      fail(static_cast<absl::StatusCode>(last.failure().code()), last.failure().message());
    } else {
      fail(absl::StatusCode::kInternal, "the worker ended the run without a result or failure");
    }
  } else if (limit && limit->expired() && !cancel_requested && !stopping) {
    out.timed_out = true;
    fail(absl::StatusCode::kDeadlineExceeded,
         absl::StrCat("still running after its time limit of ",
                      static_cast<double>(time_limit->count()) / 1000,
                      " s (sweep.cell_timeout_seconds); cancelled"));
  } else if (end.last.has_value()) {
    out.state = v1::JOB_STATE_CANCELLED;
    out.error_message = "cancelled while running; stopped at a step boundary";
  } else if (cancel_requested) {
    out.state = v1::JOB_STATE_CANCELLED;
    out.error_message = "cancelled while running; the worker stops at its next step";
  } else if (stopping) {
    out.state = v1::JOB_STATE_INTERRUPTED;
    out.error_code = static_cast<int>(absl::StatusCode::kAborted);
    out.error_message = "the daemon stopped while this job was running";
  } else {
    const std::string exit =
        workers_->WaitForExit(device, worker.generation(), std::chrono::seconds(5));
    out.worker_lost = true;
    fail(absl::StatusCode::kAborted,
         exit.empty()
             ? absl::StrCat("lost the worker for ", device, " (pid ", worker.pid(),
                            ") while running this job: ", end.status.message())
             : absl::StrCat("the worker for ", device, " (pid ", worker.pid(),
                            ") died while running this job: ", exit,
                            "; it is being restarted; its log is ", workers_->LogPath(device)));
  }
  out.cancelled_mid_call =
      !end.last.has_value() && (out.state == v1::JOB_STATE_CANCELLED || out.timed_out);
  return out;
}

void JobManager::ReplaceIfSilent(const v1::Job& job, WorkerClient& worker) {
  // A cancel ends our call at once; the worker stops at its next step. One
  // that does not answer now (stopped, hung) would never stop: replace it.
  if (auto ping = worker.Ping(kCancelledPingTimeout); !WorkerAnswered(ping.status())) {
    workers_->Kill(
        worker.device(), worker.generation(),
        absl::StrCat("it did not answer within ", kCancelledPingTimeout.count(), " s after job ",
                     job.id(), " was cancelled (", ping.status().message(), ")"));
  }
}

void JobManager::RunOnWorker(v1::Job job) {
  const std::string device = QueueDevice(job);
  std::shared_ptr<WorkerClient> worker;
  std::string why;
  switch (AwaitWorker(device, &worker, &why)) {
    case WorkerWait::kCancelled:
      job.set_state(v1::JOB_STATE_CANCELLED);
      job.set_error_message("cancelled before it started");
      Finish(job);
      return;
    case WorkerWait::kStopping:
      return;  // stays QUEUED in the store; taken up at the next start
    case WorkerWait::kUnavailable:
      job.set_state(v1::JOB_STATE_FAILED);
      job.set_error_code(static_cast<int>(absl::StatusCode::kUnavailable));
      job.set_error_message(why);
      Finish(job);
      return;
    case WorkerWait::kUp:
      break;
  }
  if (!MarkRunning(job)) return;
  if (metrics_) metrics_->SetRunning(device, true);
  CallEnd end = RunCall(job, job.spec(), *worker, std::nullopt);
  job.set_state(end.state);
  if (end.state == v1::JOB_STATE_SUCCEEDED) *job.mutable_result() = std::move(end.result);
  if (end.error_code != 0) job.set_error_code(end.error_code);
  if (!end.error_message.empty()) job.set_error_message(end.error_message);
  if (metrics_) metrics_->SetRunning(device, false);
  Finish(job);
  if (end.cancelled_mid_call) ReplaceIfSilent(job, *worker);
}

void JobManager::RunOnGroup(v1::Job job,
                            const std::function<void(v1::Job& job, const std::string& key)>& run) {
  const std::string key = RunningKey(job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || draining_) return;  // stays QUEUED
    if (running_[key].cancel_requested) {
      job.set_state(v1::JOB_STATE_CANCELLED);
      job.set_error_message("cancelled before it started");
      Finish(job);
      return;
    }
  }
  if (!MarkRunning(job)) return;
  const auto devices = JobDevices(job);
  if (metrics_) {
    for (const auto& d : devices) metrics_->SetRunning(d, true);
  }
  run(job, key);
  if (job.state() == v1::JOB_STATE_CANCELLED && job.error_message().empty()) {
    job.set_error_message("cancelled while running");
  }
  if (metrics_) {
    for (const auto& d : devices) metrics_->SetRunning(d, false);
  }
  Finish(job);
}

void JobManager::RunCollective(v1::Job job) {
  RunOnGroup(std::move(job), [this](v1::Job& job, const std::string& key) {
    CollectiveJobCallbacks cb;
    cb.on_row = [&](const v1::CollectiveRow& row) {
      Publish(job, [&](v1::JobEvent* e) { *e->mutable_collective_row() = row; });
    };
    SetGroupJobCallbacks(job, key, &cb);
    RunCollectiveJob({groups_, workers_, metrics_, artifacts_dir_}, &job, cb);
  });
}

void JobManager::RunDdp(v1::Job job) {
  RunOnGroup(std::move(job), [this](v1::Job& job, const std::string& key) {
    DdpJobCallbacks cb;
    SetGroupJobCallbacks(job, key, &cb);
    cb.on_row = [&](const v1::DdpRow& row) {
      Publish(job, [&](v1::JobEvent* e) { *e->mutable_ddp_row() = row; });
    };
    RunDdpJob(groups_, workers_, artifacts_dir_, &job, cb);
  });
}

void JobManager::SetGroupJobCallbacks(const v1::Job& job, const std::string& key,
                                      GroupJobCallbacks* cb) {
  cb->log = [this, job](const std::string& line) {
    Publish(job, [&](v1::JobEvent* e) { e->set_log(line); });
  };
  cb->set_calls = [this, key](CancelHandle* calls) {
    std::lock_guard<std::mutex> lock(mu_);
    running_[key].calls = calls;
    return !(stopping_ || running_[key].cancel_requested);
  };
  cb->cancel_requested = [this, key] {
    std::lock_guard<std::mutex> lock(mu_);
    return running_[key].cancel_requested;
  };
  cb->stopping = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  };
}

bool JobManager::MarkRunning(v1::Job& job) {
  job.set_state(v1::JOB_STATE_RUNNING);
  *job.mutable_started() = Now();
  if (auto s = store_->Update(job); !s.ok()) {
    job.set_state(v1::JOB_STATE_FAILED);
    job.set_error_code(static_cast<int>(s.code()));
    job.set_error_message(std::string(s.message()));
    Finish(job);
    return false;
  }
  Publish(job, [&](v1::JobEvent* e) { *e->mutable_started() = job; });
  return true;
}

void JobManager::Finish(v1::Job job) {
  *job.mutable_finished() = Now();
  // --gpu-sharing when-idle: another process on its GPUs now came during the
  // run (it started on idle ones): the figures were taken on a shared GPU.
  if (gpu_sharing_ && job.has_started()) {
    for (const std::string& warning : gpu_sharing_->SharedDuring(JobDevices(job))) {
      job.add_warnings(warning);
      Publish(job, [&](v1::JobEvent* e) { e->set_log(absl::StrCat("warning: ", warning)); });
    }
  }
  if (auto s = BoundJobResult(&job, artifacts_dir_); !s.ok()) {
    fprintf(stderr, "benchd: job %s: part of its result is not kept: %s\n", job.id().c_str(),
            std::string(s.message()).c_str());
  }
  if (auto s = store_->Update(job); !s.ok()) {
    if (s.code() != absl::StatusCode::kNotFound) {
      // Nobody is told the job is done before it is stored: kept and retried.
      fprintf(stderr, "benchd: job %s ended (%s) but cannot be stored yet: %s; kept and retried\n",
              job.id().c_str(), JobStateName(job.state()).c_str(),
              std::string(s.message()).c_str());
      pending_.Add(std::move(job), s);
      return;
    }
    fprintf(stderr, "benchd: cannot store job %s: %s\n", job.id().c_str(),
            std::string(s.message()).c_str());
  }
  Announce(job);
}

void JobManager::Announce(const v1::Job& job) {
  Publish(job, [&](v1::JobEvent* e) { SetTerminalEvent(job, e); });
  if (metrics_) {
    const double seconds = job.has_started() ? Seconds(job.started(), job.finished()) : -1;
    metrics_->JobFinished(JobKindName(job.kind()), JobStateName(job.state()), seconds);
    if (job.result().has_benchmark()) metrics_->SetLastBenchmark(job.result().benchmark());
    metrics_->SetLastPeakMemory(JobKindName(job.kind()), job.result());
  }
  std::lock_guard<std::mutex> lock(mu_);
  finished_cv_.notify_all();
}

void JobManager::RefreshResidentModels(const std::string& device) {
  if (!metrics_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++refreshes_;
  }
  // Asks without waiting (it may run on a gRPC thread, after an eviction);
  // Stop waits for the answers, which touch the metrics.
  ListModelsOnWorkers(workers_, devices_, device,
                      [this, device](absl::StatusOr<v1::ListModelsResponse> all) {
                        if (all.ok()) {
                          std::map<std::string, std::pair<int, int64_t>> by_device;  // count, bytes
                          for (const std::string& d : devices_) {
                            if (device.empty() || d == device) by_device[d];
                          }
                          for (const auto& m : all->models()) {
                            auto& [count, bytes] = by_device[m.device()];
                            ++count;
                            bytes += m.bytes();
                          }
                          for (const auto& [d, figures] : by_device) {
                            metrics_->SetResidentModels(d, figures.first, figures.second);
                          }
                        }
                        std::lock_guard<std::mutex> lock(mu_);
                        if (--refreshes_ == 0) finished_cv_.notify_all();
                      });
}

}  // namespace benchd::server
