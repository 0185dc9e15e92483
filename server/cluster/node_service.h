// benchd.internal.Node on the daemon's public port: this node's workers for
// the member that runs a group spanning nodes (server/cluster/cluster_workers.h is
// the other end). Each call is passed to the named device's worker as is.
// Synchronous API: a Run holds its thread for the collective, as the worker's
// own Run does. Callers need the admin role.
#ifndef BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_
#define BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_

#include "benchd/internal/cluster.grpc.pb.h"
#include "server/security/auth.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class NodeService final : public internal::Node::Service {
 public:
  NodeService(Workers* workers, const Authorizer* auth) : workers_(workers), auth_(auth) {}

  grpc::Status Run(grpc::ServerContext* ctx, const internal::NodeRunRequest* request,
                   grpc::ServerWriter<internal::WorkerEvent>* writer) override;
  grpc::Status PrepareGroup(grpc::ServerContext* ctx,
                            const internal::NodePrepareGroupRequest* request,
                            internal::PrepareGroupResponse* response) override;
  grpc::Status JoinGroup(grpc::ServerContext* ctx, const internal::NodeJoinGroupRequest* request,
                         internal::JoinGroupResponse* response) override;
  grpc::Status LeaveGroup(grpc::ServerContext* ctx, const internal::NodeLeaveGroupRequest* request,
                          internal::LeaveGroupResponse* response) override;

 private:
  // The caller's right and the device's worker, or why not.
  absl::StatusOr<std::shared_ptr<WorkerClient>> Worker(const grpc::ServerContext& ctx,
                                                       const std::string& method,
                                                       const std::string& device);

  Workers* const workers_;  // this node's own (the Supervisor)
  const Authorizer* const auth_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_
