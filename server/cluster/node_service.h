// benchd.internal.Node on the daemon's public port: this node's workers for
// the member that runs a group spanning nodes (server/cluster/cluster_workers.h is
// the other end). It takes only what the cluster itself sends:
//   - callers that are members: the cluster's secret (cluster_secret.h), the
//     admin role where this node checks callers, and a from_node that is a
//     READY member of the table other than this node;
//   - each member's own things: its group ids become "<from_node>/<id>" on
//     this node's workers (so one member cannot leave, join or run another's
//     group), and a Run is one rank of such a group (a collective or ddp part)
//     whose job id becomes "<from_node>/<id>", so its artifacts go to
//     artifacts/<from_node>/<id>, never into this node's own job folders;
//   - this node's addresses: a store listens, and Gloo binds, on the host the
//     cluster was given for this node (--advertise), and a member dials a
//     store on a member's host only;
//   - a Kill only of the worker that runs one of the caller's Runs (its
//     progress deadline passed on the calling node): killed and restarted
//     as a local one is, and logged;
//   - bounded: at most kMaxCallsInFlightPerMember calls of one member at once
//     (RESOURCE_EXHAUSTED past them, at once), each unary call within its
//     own deadline, and a Run's wait for a restarting worker within the
//     caller's deadline.
// Refusals are logged once per cause. Synchronous API: a Run holds its thread
// for the collective, as the worker's own Run does.
#ifndef BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_
#define BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "benchd/internal/cluster.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_secret.h"
#include "server/security/auth.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class NodeService final : public internal::Node::Service {
 public:
  // As many as a worker client lets one worker have: a member's group calls
  // to this node are a few per device; more is a member in trouble or not a
  // member's doing.
  static constexpr int kMaxCallsInFlightPerMember = kMaxUnaryCallsInFlight;

  NodeService(Workers* workers, const Authorizer* auth, Cluster* cluster)
      : workers_(workers), auth_(auth), cluster_(cluster) {}

  grpc::Status Run(grpc::ServerContext* ctx, const internal::NodeRunRequest* request,
                   grpc::ServerWriter<internal::WorkerEvent>* writer) override;
  grpc::Status PrepareGroup(grpc::ServerContext* ctx,
                            const internal::NodePrepareGroupRequest* request,
                            internal::PrepareGroupResponse* response) override;
  grpc::Status JoinGroup(grpc::ServerContext* ctx, const internal::NodeJoinGroupRequest* request,
                         internal::JoinGroupResponse* response) override;
  grpc::Status LeaveGroup(grpc::ServerContext* ctx, const internal::NodeLeaveGroupRequest* request,
                          internal::LeaveGroupResponse* response) override;
  grpc::Status Kill(grpc::ServerContext* ctx, const internal::NodeKillRequest* request,
                    internal::NodeKillResponse* response) override;

  // "<from>/<group>" when `group` is a group id a member may send, else
  // INVALID_ARGUMENT naming `field`.
  static absl::StatusOr<std::string> MemberGroup(const std::string& from, const std::string& group,
                                                 absl::string_view field);

 private:
  struct Admitted {
    std::shared_ptr<WorkerClient> worker;
    std::shared_ptr<void> slot;  // the member's place among its calls in flight
    std::shared_ptr<void> hold;  // the worker is not parked during the call (Workers::Hold)
  };
  // The caller a member (its secret, role and from_node) and `device` a
  // device name; or why not.
  absl::Status CheckMember(const grpc::ServerContext& ctx, const std::string& method,
                           const std::string& from, const std::string& device);
  // The caller a member, within its calls in flight, and the device's
  // worker; or why not (logged once per cause).
  absl::StatusOr<Admitted> Admit(const grpc::ServerContext& ctx, const std::string& method,
                                 const std::string& from, const std::string& device);
  absl::StatusOr<Admitted> AdmitUnlogged(const grpc::ServerContext& ctx, const std::string& method,
                                         const std::string& from, const std::string& device);
  // Logs `status` for `method` once per cause; returns it as a grpc::Status.
  grpc::Status Refuse(const grpc::ServerContext& ctx, const std::string& method,
                      const std::string& from, const absl::Status& status);
  // This node's host as the cluster knows it (--advertise).
  std::string OwnHost() const;
  // OK when `host` is a READY member's host (this node's included).
  absl::Status CheckMemberHost(absl::string_view field, const std::string& host);

  Workers* const workers_;  // this node's own (the Supervisor)
  const Authorizer* const auth_;
  Cluster* const cluster_;
  RefusalLog refusals_;
  std::mutex mu_;
  std::map<std::string, int> in_flight_;  // by member name
  // A member's group joined on this node keeps its worker from being parked
  // until the member leaves it: "<group> <device>" (the group as filed,
  // "node1/g1") -> the hold.
  std::map<std::string, std::shared_ptr<void>> group_holds_;
  // Runs in flight, for Kill: which member's, on which worker.
  struct RunInFlight {
    uint64_t id;
    std::string device;
    std::string from;
    uint64_t generation;
    pid_t pid;
  };
  std::vector<RunInFlight> runs_;
  uint64_t next_run_id_ = 0;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_NODE_SERVICE_H_
