// benchd.internal.Cluster on the daemon's public port: the coordinator's end
// of the members' heartbeats. A caller is a member when it carries the
// cluster's secret (cluster_secret.h) and, where the daemon checks callers,
// has the admin role (members call with the credentials of
// common/credentials.h); with mTLS its certificate's subject is bound to the
// rank it joins (Cluster::OnHeartbeat). A refusal is logged once per cause.
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_

#include "benchd/internal/cluster.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_secret.h"
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
  RefusalLog refusals_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_SERVICE_H_
