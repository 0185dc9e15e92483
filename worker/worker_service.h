// benchd.internal.Worker over the sync gRPC API: the daemon runs one job at a
// time per worker, so a blocking handler per call is all this needs.
#ifndef BENCHD_WORKER_WORKER_SERVICE_H_
#define BENCHD_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <mutex>
#include <string>

#include "benchd/internal/worker.grpc.pb.h"
#include "worker/device_peaks.h"
#include "worker/model_cache.h"
#include "worker/process_groups.h"

namespace benchd::worker {

class WorkerService final : public internal::Worker::Service {
 public:
  // `artifacts_dir`: where jobs write files, under <artifacts_dir>/<job id>/
  // (export_parity's parity.pt, the memory request's snapshots and plots, the
  // profile request's trace.json); "" = none, such jobs are refused.
  explicit WorkerService(const WorkerDevice& device, std::string artifacts_dir = "");

  // Streams warm-up and measured steps, then exactly one terminal event:
  // result, failure (google.rpc code + message) or cancelled. The RPC itself
  // always ends OK; a job's failure is data, not a transport error.
  grpc::Status Run(grpc::ServerContext* context, const internal::RunRequest* request,
                   grpc::ServerWriter<internal::WorkerEvent>* writer) override;
  grpc::Status GetInfo(grpc::ServerContext* context, const internal::GetInfoRequest* request,
                       internal::WorkerInfo* response) override;
  // From memory only: the pid and the job running now.
  grpc::Status Ping(grpc::ServerContext* context, const internal::PingRequest* request,
                    internal::PingResponse* response) override;
  grpc::Status ListModels(grpc::ServerContext* context, const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override;
  grpc::Status EvictModel(grpc::ServerContext* context, const v1::EvictModelRequest* request,
                          v1::EvictModelResponse* response) override;
  // Process groups (worker/process_groups.h). Not serialized with Run: a
  // JoinGroup blocks until every member joined.
  grpc::Status PrepareGroup(grpc::ServerContext* context,
                            const internal::PrepareGroupRequest* request,
                            internal::PrepareGroupResponse* response) override;
  grpc::Status JoinGroup(grpc::ServerContext* context, const internal::JoinGroupRequest* request,
                         internal::JoinGroupResponse* response) override;
  grpc::Status LeaveGroup(grpc::ServerContext* context, const internal::LeaveGroupRequest* request,
                          internal::LeaveGroupResponse* response) override;

  // Makes a running job stop at its next step (ending its stream with
  // `cancelled`) and refuses new ones; for shutting down quickly on SIGTERM.
  void Stop() { stopping_ = true; }

  ModelCache& cache() { return cache_; }

 private:
  // The job's terminal event (steps are streamed from inside).
  internal::WorkerEvent RunJob(grpc::ServerContext* context, const internal::RunRequest& request,
                               grpc::ServerWriter<internal::WorkerEvent>* writer);

  // A collective job's part on this rank (worker/collective_run.h).
  internal::WorkerEvent RunCollectiveJob(grpc::ServerContext* context,
                                         const internal::RunRequest& request,
                                         grpc::ServerWriter<internal::WorkerEvent>* writer);
  // A data-parallel job's part on this member (worker/ddp/ddp_run.h).
  internal::WorkerEvent RunDdpJob(grpc::ServerContext* context, const internal::RunRequest& request,
                                  grpc::ServerWriter<internal::WorkerEvent>* writer,
                                  const v1::JobSpec& spec);

  const WorkerDevice device_;
  const std::string artifacts_dir_;
  ModelCache cache_;
  ProcessGroups groups_;
  DevicePeaks peaks_;  // measured on first use, kept for the worker's life
  std::mutex run_mu_;  // one job at a time
  std::mutex running_mu_;
  std::string running_job_id_;  // guarded by running_mu_; "" when idle
  std::atomic<bool> stopping_{false};
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_WORKER_SERVICE_H_
