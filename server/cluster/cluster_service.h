// benchd.internal.Cluster on the daemon's public port: the coordinator's end
// of the members' heartbeats. Callers need the admin role (members call with
// the credentials of common/credentials.h).
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_

#include "benchd/internal/cluster.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/security/auth.h"

namespace benchd::server {

class ClusterService final : public internal::Cluster::CallbackService {
 public:
  ClusterService(Cluster* cluster, const Authorizer* auth) : cluster_(cluster), auth_(auth) {}

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const internal::HeartbeatRequest* request,
                                      internal::HeartbeatResponse* response) override;

 private:
  Cluster* const cluster_;
  const Authorizer* const auth_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_
