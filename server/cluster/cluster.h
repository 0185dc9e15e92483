// Cluster membership (docs/architecture.md "Cluster"). The coordinator (rank
// 0) keeps a table of every rank the cluster was launched with; each member
// heartbeats to it (benchd.internal.Cluster, proto/benchd/internal/cluster.proto)
// and gets the table back. A member the coordinator has not heard from for
// `lost_after` is LOST (and so is the coordinator, to a member that cannot
// reach it): the lost-node listener breaks the groups it was in. A member that
// heartbeats again, restarted or reconnected, is READY again.
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/internal/cluster.grpc.pb.h"
#include "benchd/v1/bench.pb.h"
#include "server/cluster/cluster_config.h"
#include "server/cluster/peer_channels.h"

namespace benchd::server {

class Cluster {
 public:
  // This node as it is now: hostname, devices, versions (name, rank and
  // address are filled in here).
  using DescribeSelf = std::function<v1::ClusterNode()>;
  // A node went LOST: its name and why ("no heartbeat for 10.2 s").
  using NodeLostListener = std::function<void(const std::string& name, const std::string& why)>;

  // `peers` opens the member's channel to the coordinator (unused on rank 0
  // and outside a cluster).
  Cluster(ClusterOptions options, DescribeSelf describe, const PeerChannels& peers);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Before Start. Called on the cluster's own thread, never under its lock.
  void SetNodeLostListener(NodeLostListener listener);
  // Starts heartbeating (a member) or watching for lost members (rank 0).
  void Start();
  void Stop();

  const ClusterOptions& options() const { return options_; }
  bool coordinator() const { return options_.enabled && options_.rank == 0; }

  // Rank 0: a member's heartbeat, from a caller that proved the cluster's
  // secret (ClusterService) and, with mTLS, showed a certificate of
  // `subject`. FAILED_PRECONDITION when it does not fit: another cluster
  // size, a rank out of range or rank 0, a rank that another daemon holds
  // live (whatever address it claims: a restarted member joins once the old
  // one is LOST), a name another rank has or the coordinator's, more than
  // kMaxNodeDevices devices or a device that is no device name.
  // PERMISSION_DENIED for a rank another certificate subject joined first.
  absl::StatusOr<internal::HeartbeatResponse> OnHeartbeat(const internal::HeartbeatRequest& request,
                                                          const std::string& subject = "");

  // Every rank, this node's entry fresh from DescribeSelf.
  v1::ListNodesResponse List();

  // What another member calls "node1/7" or "node1/cuda:0": that member and
  // its own name for it. nullopt outside a cluster, for a plain name, and for
  // this node's own prefix (requests may use it for this node's things).
  struct Qualified {
    std::string node;  // "node1"
    std::string name;  // "7", "cuda:0"
  };
  std::optional<Qualified> OtherMember(const std::string& qualified) const;

  // The node named `name` when it is READY; NOT_FOUND naming the members,
  // UNAVAILABLE when it is WAITING or LOST (with why).
  absl::StatusOr<v1::ClusterNode> ReadyNode(const std::string& name);

 private:
  struct Member {
    v1::ClusterNode node;  // as last described; state and detail kept here
    std::string incarnation;
    // With mTLS, the certificate subject that first joined this rank: no
    // other may take it (until the coordinator restarts).
    std::string subject;
    std::chrono::steady_clock::time_point last_heard{};
  };
  void HeartbeatLoop();  // a member
  void WatchLoop();      // the coordinator
  v1::ClusterNode Self();
  // Marks `rank` LOST under mu_; returns the listener call to make after.
  std::function<void()> MarkLost(int rank, const std::string& why);

  const ClusterOptions options_;
  const DescribeSelf describe_;
  const std::string incarnation_;
  std::unique_ptr<internal::Cluster::Stub> coordinator_stub_;
  const PeerChannels& peers_;
  NodeLostListener on_lost_;

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::vector<Member> members_;  // by rank
  // A member's view of the coordinator: when it last answered, and the last
  // refusal or error (logged once per change).
  std::chrono::steady_clock::time_point coordinator_answered_{};
  std::string last_problem_;
  std::thread thread_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_H_
