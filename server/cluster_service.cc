#include "server/cluster_service.h"

#include "server/bench_service.h"

namespace benchd::server {

grpc::ServerUnaryReactor* ClusterService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                    const internal::HeartbeatRequest* request,
                                                    internal::HeartbeatResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_->Check(*ctx, "Cluster.Heartbeat");
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  auto answer = cluster_->OnHeartbeat(*request);
  if (answer.ok()) *response = *std::move(answer);
  reactor->Finish(ToGrpc(answer.status()));
  return reactor;
}

}  // namespace benchd::server
