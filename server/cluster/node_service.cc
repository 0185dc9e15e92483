#include "server/cluster/node_service.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/core/devices.h"
#include "server/core/grpc_status.h"

namespace benchd::server {
namespace {

// How long a call waits for a worker that is restarting.
constexpr std::chrono::seconds kWorkerUpWait{30};

// The deadline the calling node set, else `fallback`.
std::chrono::milliseconds Remaining(const grpc::ServerContext& ctx,
                                    std::chrono::milliseconds fallback) {
  const auto left = ctx.deadline() - std::chrono::system_clock::now();
  if (left <= std::chrono::milliseconds(0) || left > std::chrono::hours(24)) return fallback;
  return std::chrono::duration_cast<std::chrono::milliseconds>(left);
}

}  // namespace

absl::StatusOr<std::shared_ptr<WorkerClient>> NodeService::Worker(const grpc::ServerContext& ctx,
                                                                  const std::string& method,
                                                                  const std::string& device) {
  auto caller = auth_->Check(ctx, absl::StrCat("Node.", method));
  if (!caller.ok()) return caller.status();
  if (auto s = CheckDeviceName(device); !s.ok()) return s;
  return workers_->WaitUntilUp(device, kWorkerUpWait);
}

grpc::Status NodeService::Run(grpc::ServerContext* ctx, const internal::NodeRunRequest* request,
                              grpc::ServerWriter<internal::WorkerEvent>* writer) {
  auto worker = Worker(*ctx, "Run", request->device());
  if (!worker.ok()) return ToGrpc(worker.status());
  // The calling node cancels (a cancelled job, a failed member) or goes away:
  // the worker's call is cancelled with it.
  CancelHandle cancel;
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished.load()) {
      if (ctx->IsCancelled()) {
        cancel.Cancel();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  RunEnd end = (*worker)->Run(request->run(), cancel,
                              [writer](const internal::WorkerEvent& e) { writer->Write(e); });
  finished = true;
  watcher.join();
  if (end.last) {
    writer->Write(*end.last);
    return grpc::Status::OK;
  }
  return ToGrpc(end.status);
}

grpc::Status NodeService::PrepareGroup(grpc::ServerContext* ctx,
                                       const internal::NodePrepareGroupRequest* request,
                                       internal::PrepareGroupResponse* response) {
  auto worker = Worker(*ctx, "PrepareGroup", request->device());
  if (!worker.ok()) return ToGrpc(worker.status());
  auto answer = (*worker)->PrepareGroup(request->request(), Remaining(*ctx, kPrepareGroupTimeout));
  if (answer.ok()) *response = *std::move(answer);
  return ToGrpc(answer.status());
}

grpc::Status NodeService::JoinGroup(grpc::ServerContext* ctx,
                                    const internal::NodeJoinGroupRequest* request,
                                    internal::JoinGroupResponse* response) {
  auto worker = Worker(*ctx, "JoinGroup", request->device());
  if (!worker.ok()) return ToGrpc(worker.status());
  auto answer = (*worker)->JoinGroup(request->request(), Remaining(*ctx, kJoinGroupSlack));
  if (answer.ok()) *response = *std::move(answer);
  return ToGrpc(answer.status());
}

grpc::Status NodeService::LeaveGroup(grpc::ServerContext* ctx,
                                     const internal::NodeLeaveGroupRequest* request,
                                     internal::LeaveGroupResponse* response) {
  auto worker = Worker(*ctx, "LeaveGroup", request->device());
  if (!worker.ok()) return ToGrpc(worker.status());
  auto answer = (*worker)->LeaveGroup(request->request(), Remaining(*ctx, kLeaveGroupTimeout));
  if (answer.ok()) *response = *std::move(answer);
  return ToGrpc(answer.status());
}

}  // namespace benchd::server
