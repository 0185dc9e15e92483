#include "server/cluster/cluster_service.h"

#include <cstdio>
#include <string>

#include "server/core/grpc_status.h"

namespace benchd::server {

grpc::ServerUnaryReactor* ClusterService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                    const internal::HeartbeatRequest* request,
                                                    internal::HeartbeatResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_->Check(*ctx, "Cluster.Heartbeat");
  if (!caller.ok()) {
    // The refusal is logged with the TCP peer; say which member it was.
    fprintf(stderr, "benchd: cluster: refused the heartbeat of %s (rank %d, %s): %s\n",
            request->node().name().c_str(), request->node().rank(),
            request->node().address().c_str(), std::string(caller.status().message()).c_str());
    reactor->Finish(ToGrpc(caller.status()));
    return reactor;
  }
  auto answer = cluster_->OnHeartbeat(*request);
  if (answer.ok()) *response = *std::move(answer);
  reactor->Finish(ToGrpc(answer.status()));
  return reactor;
}

}  // namespace benchd::server
