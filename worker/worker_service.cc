#include "worker/worker_service.h"

#include <unistd.h>

#include <c10/core/DeviceGuard.h>

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/job_spec.h"
#include "worker/attention_run.h"
#include "worker/benchmark.h"
#include "worker/collective_run.h"
#include "worker/ddp/ddp_run.h"
#include "worker/device_info.h"
#include "worker/memory_run.h"
#include "worker/parity_export.h"
#include "worker/precision_run.h"
#include "worker/profile_run.h"

namespace benchd::worker {
namespace {

internal::WorkerEvent Failure(absl::StatusCode code, const std::string& message) {
  internal::WorkerEvent e;
  e.mutable_failure()->set_code(static_cast<int32_t>(code));
  e.mutable_failure()->set_message(message);
  return e;
}

internal::WorkerEvent Failure(const absl::Status& s) {
  return Failure(s.code(), std::string(s.message()));
}

// A request is for this worker when it names no device or this one.
bool ForThisDevice(const std::string& requested, const WorkerDevice& device) {
  return requested.empty() || requested == device.name;
}

// The job's stream: steps and log lines written as they come, and the
// cancellation a job polls (the daemon cancelled, the worker stops, or the
// stream broke).
class JobStream {
 public:
  JobStream(grpc::ServerContext* context, grpc::ServerWriter<internal::WorkerEvent>* writer,
            const std::atomic<bool>& stopping)
      : context_(context), writer_(writer), stopping_(stopping) {}

  void Step(const v1::StepTiming& timing, int64_t total) {
    internal::WorkerEvent e;
    v1::StepEvent* step = timing.warmup() ? e.mutable_warmup_step() : e.mutable_step();
    *step->mutable_timing() = timing;
    step->set_total_steps(total);
    Write(e);
  }
  void Log(const std::string& line) {
    internal::WorkerEvent e;
    e.set_log(line);
    Write(e);
  }
  bool Cancelled() const { return broken_ || stopping_ || context_->IsCancelled(); }

  template <typename Hooks>
  Hooks MakeHooks() {
    Hooks hooks;
    hooks.on_step = [this](const v1::StepTiming& t, int64_t total) { Step(t, total); };
    hooks.cancelled = [this] { return Cancelled(); };
    return hooks;
  }

 private:
  void Write(const internal::WorkerEvent& e) {
    if (!writer_->Write(e)) broken_ = true;
  }
  grpc::ServerContext* const context_;
  grpc::ServerWriter<internal::WorkerEvent>* const writer_;
  const std::atomic<bool>& stopping_;
  bool broken_ = false;
};

// A job's outcome as its terminal event: the result, cancelled, or a failure.
template <typename Result>
internal::WorkerEvent Terminal(absl::StatusOr<Result> result,
                               Result* (v1::JobResult::*mutable_field)()) {
  internal::WorkerEvent e;
  if (result.ok()) {
    *(e.mutable_result()->*mutable_field)() = *std::move(result);
  } else if (absl::IsCancelled(result.status())) {
    e.set_cancelled(true);
  } else {
    e = Failure(result.status());
  }
  return e;
}

}  // namespace

WorkerService::WorkerService(const WorkerDevice& device, std::string artifacts_dir)
    : device_(device),
      artifacts_dir_(std::move(artifacts_dir)),
      cache_(device),
      groups_(device),
      peaks_(device) {}

grpc::Status WorkerService::Run(grpc::ServerContext* context, const internal::RunRequest* request,
                                grpc::ServerWriter<internal::WorkerEvent>* writer) {
  std::lock_guard<std::mutex> lock(run_mu_);
  {
    std::lock_guard<std::mutex> running(running_mu_);
    running_job_id_ = request->job_id();
  }
  internal::WorkerEvent last;
  try {
    last = RunJob(context, *request, writer);
  } catch (const c10::Error& e) {
    last = Failure(absl::StatusCode::kInternal, e.what_without_backtrace());
  } catch (const std::exception& e) {
    last = Failure(absl::StatusCode::kInternal, e.what());
  } catch (...) {
    last = Failure(absl::StatusCode::kInternal, "unknown exception");
  }
  {
    std::lock_guard<std::mutex> running(running_mu_);
    running_job_id_.clear();
  }
  writer->Write(last);
  return grpc::Status::OK;
}

internal::WorkerEvent WorkerService::RunJob(grpc::ServerContext* context,
                                            const internal::RunRequest& request,
                                            grpc::ServerWriter<internal::WorkerEvent>* writer) {
  if (stopping_) {
    return Failure(absl::StatusCode::kUnavailable, "benchd-worker is shutting down");
  }
  // Checked again here: the worker never trusts its caller.
  auto spec = ResolveJobSpec(request.spec());
  if (!spec.ok()) return Failure(spec.status());
  if (!ForThisDevice(spec->device(), device_)) {
    return Failure(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("spec.device: this worker serves ", device_.name, ", not ", spec->device()));
  }
  switch (spec->kind_case()) {
    case v1::JobSpec::kBenchmark:
    case v1::JobSpec::kProfile:
    case v1::JobSpec::kMemory:
    case v1::JobSpec::kAttention:
    case v1::JobSpec::kPrecision:
      break;
    case v1::JobSpec::kCollective:
      return RunCollectiveJob(context, request, writer);
    case v1::JobSpec::kDdp:
      return RunDdpJob(context, request, writer, *spec);
    default:
      return Failure(absl::StatusCode::kUnimplemented,
                     absl::StrCat("spec.", JobKindName(*spec), ": not implemented by this worker"));
  }
  // Refused before touching the artifacts dir: a CPU worker cannot record.
  if (spec->kind_case() == v1::JobSpec::kMemory && !device_.is_cuda()) {
    return Failure(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("memory: needs a CUDA device (it records the CUDA caching "
                                "allocator's history); this worker is ",
                                device_.name));
  }

  // gRPC handlers run on pool threads, whose current CUDA device is not ours.
  c10::OptionalDeviceGuard device_guard;
  if (device_.is_cuda()) device_guard.reset_device(device_.device);
  JobStream stream(context, writer, stopping_);

  if (spec->kind_case() == v1::JobSpec::kAttention) {
    // The daemon checked this at Submit; the worker knows its device for sure.
    if (auto s = CheckKindForDevice(*spec, device_.name); !s.ok()) return Failure(s);
    return Terminal(RunAttention(spec->attention(), device_, stream.MakeHooks<AttentionHooks>()),
                    &v1::JobResult::mutable_attention);
  }
  if (spec->kind_case() == v1::JobSpec::kPrecision) {
    PrecisionHooks hooks;
    hooks.log = [&](const std::string& line) { stream.Log(line); };
    hooks.cancelled = [&] { return stream.Cancelled(); };
    return Terminal(RunPrecision(spec->precision(), device_, hooks),
                    &v1::JobResult::mutable_precision);
  }
  if (spec->kind_case() == v1::JobSpec::kBenchmark) {
    BenchmarkHooks hooks = stream.MakeHooks<BenchmarkHooks>();
    if (spec->benchmark().export_parity()) {
      auto path = ParityBundlePath(artifacts_dir_, request.job_id());
      if (!path.ok()) return Failure(path.status());
      hooks.parity_bundle_path = *std::move(path);
    }
    hooks.peaks = &peaks_;
    return Terminal(RunBenchmark(spec->benchmark(), cache_, hooks),
                    &v1::JobResult::mutable_benchmark);
  }

  const bool memory = spec->kind_case() == v1::JobSpec::kMemory;
  auto dir = JobArtifactsDir(artifacts_dir_, request.job_id(), memory ? "memory" : "profile");
  if (!dir.ok()) return Failure(dir.status());
  if (memory) {
    MemoryHooks hooks = stream.MakeHooks<MemoryHooks>();
    hooks.log = [&](const std::string& line) { stream.Log(line); };
    return Terminal(RunMemory(spec->memory(), cache_, *dir, hooks), &v1::JobResult::mutable_memory);
  }
  ProfileHooks hooks = stream.MakeHooks<ProfileHooks>();
  hooks.log = [&](const std::string& line) { stream.Log(line); };
  return Terminal(RunProfile(spec->profile(), cache_, *dir, hooks),
                  &v1::JobResult::mutable_profile);
}

internal::WorkerEvent WorkerService::RunCollectiveJob(
    grpc::ServerContext* context, const internal::RunRequest& request,
    grpc::ServerWriter<internal::WorkerEvent>* writer) {
  if (!request.has_collective()) {
    return Failure(
        absl::StatusCode::kInvalidArgument,
        "a collective job reaches a worker with its part (RunRequest.collective); none came");
  }
  const internal::CollectiveRun& run = request.collective();
  auto member = groups_.Get(run.group());
  if (!member) {
    return Failure(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("group ", run.group(), " has no member on ", device_.name,
                     " (the worker restarted, or the group was dropped); re-create the group"));
  }
  if (run.sizes_bytes_size() == 0 || run.iters() < 1 || run.warmup_iters() < 0) {
    return Failure(absl::StatusCode::kInvalidArgument, "collective run: no sizes or no iterations");
  }
  c10::OptionalDeviceGuard device_guard;
  if (device_.is_cuda()) device_guard.reset_device(device_.device);
  bool stream_broken = false;
  CollectiveHooks hooks;
  hooks.on_size = [&](const internal::CollectiveRankSize& size) {
    internal::WorkerEvent e;
    *e.mutable_collective_size() = size;
    if (!writer->Write(e)) stream_broken = true;
  };
  hooks.cancelled = [&] { return stream_broken || stopping_ || context->IsCancelled(); };
  bool broken = false;
  const absl::Status status = RunCollective(run, *member, hooks, &broken);
  if (broken) groups_.Leave(run.group(), /*abort=*/true);
  if (status.ok()) {
    internal::WorkerEvent e;
    *e.mutable_result()->mutable_collective()->mutable_versions() = WorkerVersions();
    return e;
  }
  if (absl::IsCancelled(status)) {
    internal::WorkerEvent e;
    e.set_cancelled(true);
    return e;
  }
  return Failure(status);
}

internal::WorkerEvent WorkerService::RunDdpJob(grpc::ServerContext* context,
                                               const internal::RunRequest& request,
                                               grpc::ServerWriter<internal::WorkerEvent>* writer,
                                               const v1::JobSpec& spec) {
  if (!request.has_ddp()) {
    return Failure(
        absl::StatusCode::kInvalidArgument,
        "a data-parallel job reaches a worker with its part (RunRequest.ddp); none came");
  }
  auto member = groups_.Get(request.ddp().group());
  if (!member) {
    return Failure(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat("group ", request.ddp().group(), " has no member on ", device_.name,
                     " (the worker restarted, or the group was dropped); re-create the group"));
  }
  if (!spec.ddp().step().has_batch_size()) {
    return Failure(absl::StatusCode::kInvalidArgument,
                   "ddp.step.batch_size: the daemon sends the batch per rank; none came");
  }
  c10::OptionalDeviceGuard device_guard;
  if (device_.is_cuda()) device_guard.reset_device(device_.device);
  bool stream_broken = false;
  auto write = [&](const internal::WorkerEvent& e) {
    if (!stream_broken && !writer->Write(e)) stream_broken = true;
    return !stream_broken;
  };
  ddp::DdpHooks hooks;
  hooks.on_run = [&](const internal::DdpRankRun& run) {
    internal::WorkerEvent e;
    *e.mutable_ddp_run() = run;
    return write(e);
  };
  hooks.log = [&](const std::string& line) {
    internal::WorkerEvent e;
    e.set_log(line);
    write(e);
  };
  hooks.cancelled = [&] { return stream_broken || stopping_ || context->IsCancelled(); };
  // Without an artifacts dir the traces are not kept (the timelines are).
  auto dir = JobArtifactsDir(artifacts_dir_, request.job_id(), "ddp");
  bool broken = false;
  const absl::Status status = ddp::RunDdp(spec.ddp(), *member, cache_, device_,
                                          dir.ok() ? *dir : std::string(), hooks, &broken);
  if (broken) groups_.Leave(request.ddp().group(), /*abort=*/true);
  if (status.ok()) {
    internal::WorkerEvent e;
    *e.mutable_result()->mutable_ddp()->mutable_versions() = WorkerVersions();
    return e;
  }
  if (absl::IsCancelled(status)) {
    internal::WorkerEvent e;
    e.set_cancelled(true);
    return e;
  }
  return Failure(status);
}

grpc::Status WorkerService::PrepareGroup(grpc::ServerContext*,
                                         const internal::PrepareGroupRequest* request,
                                         internal::PrepareGroupResponse* response) {
  try {
    auto r = groups_.Prepare(*request);
    if (!r.ok())
      return grpc::Status(static_cast<grpc::StatusCode>(r.status().code()),
                          std::string(r.status().message()));
    *response = *std::move(r);
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("cannot start the group's TCPStore on ", device_.name, ": ", e.what()));
  }
}

grpc::Status WorkerService::JoinGroup(grpc::ServerContext*,
                                      const internal::JoinGroupRequest* request,
                                      internal::JoinGroupResponse* response) {
  c10::OptionalDeviceGuard device_guard;
  if (device_.is_cuda()) device_guard.reset_device(device_.device);
  auto r = groups_.Join(*request);
  if (!r.ok())
    return grpc::Status(static_cast<grpc::StatusCode>(r.status().code()),
                        std::string(r.status().message()));
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status WorkerService::LeaveGroup(grpc::ServerContext*,
                                       const internal::LeaveGroupRequest* request,
                                       internal::LeaveGroupResponse* response) {
  c10::OptionalDeviceGuard device_guard;
  if (device_.is_cuda()) device_guard.reset_device(device_.device);
  response->set_found(groups_.Leave(request->group(), request->abort()));
  return grpc::Status::OK;
}

grpc::Status WorkerService::GetInfo(grpc::ServerContext*, const internal::GetInfoRequest*,
                                    internal::WorkerInfo* response) {
  *response = DescribeWorker(device_);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Ping(grpc::ServerContext*, const internal::PingRequest*,
                                 internal::PingResponse* response) {
  response->set_pid(getpid());
  std::lock_guard<std::mutex> running(running_mu_);
  response->set_running_job_id(running_job_id_);
  return grpc::Status::OK;
}

grpc::Status WorkerService::ListModels(grpc::ServerContext*, const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) {
  if (!ForThisDevice(request->device(), device_)) return grpc::Status::OK;
  for (auto& m : cache_.List()) *response->add_models() = std::move(m);
  return grpc::Status::OK;
}

grpc::Status WorkerService::EvictModel(grpc::ServerContext*, const v1::EvictModelRequest* request,
                                       v1::EvictModelResponse* response) {
  int evicted = 0;
  if (!request->key().empty()) {
    evicted = cache_.Evict(request->key());
  } else if (ForThisDevice(request->device(), device_)) {
    evicted = cache_.EvictAll();
  }
  // Hand the memory back to the device, not just to PyTorch's cache. A job
  // running meanwhile keeps its blocks: only unused cached ones are freed.
  if (evicted > 0) ReleaseCachedMemory(device_);
  response->set_evicted(evicted);
  return grpc::Status::OK;
}

}  // namespace benchd::worker
