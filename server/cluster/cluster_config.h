// Where a daemon stands in a cluster, from its flags or its launcher's
// environment (docs/architecture.md "Cluster"):
//
//   flags       --cluster-coordinator HOST:PORT --node-rank N --nodes M
//   Slurm       --cluster-from slurm: SLURM_NODEID, SLURM_NNODES, the first
//               host of SLURM_JOB_NODELIST as coordinator, SLURMD_NODENAME as
//               this node's host (the port is --listen's everywhere)
//   Kubernetes  --cluster-from kubernetes: JOB_COMPLETION_INDEX (an Indexed
//               Job), BENCHD_NODES, coordinator ${BENCHD_CLUSTER_JOB}-0.${BENCHD_CLUSTER_SERVICE},
//               this node ${HOSTNAME}.${BENCHD_CLUSTER_SERVICE} (a headless Service)
//
// A flag given beside --cluster-from wins over the environment.
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_CONFIG_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_CONFIG_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/node_name.h"

namespace benchd::server {

// At most this many members: far above any launch we know of, low enough
// that the coordinator's table stays small.
inline constexpr int kMaxClusterNodes = 1024;

struct ClusterOptions {
  bool enabled = false;     // false: a lone daemon (ListNodes lists itself)
  std::string coordinator;  // rank 0's host:port
  int rank = 0;
  int nodes = 1;
  std::string name;       // "node<rank>" unless --node-name
  std::string advertise;  // host:port the other members reach this daemon at
  std::string launcher;   // "flags", "slurm" or "kubernetes", for the log
  // What every member proves on each call to another (LoadClusterSecret).
  std::string secret;
  // A member heartbeats this often; the coordinator marks a member LOST (and a
  // member the coordinator) after `lost_after` without one.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds lost_after{10000};
};

// What the command line said; unset = not given.
struct ClusterFlags {
  std::string from;  // "", "slurm" or "kubernetes"
  std::string coordinator;
  std::optional<int> rank;
  std::optional<int> nodes;
  std::string name;
  std::string advertise;
  std::optional<double> lost_after_s;
  std::string secret_file;  // --cluster-secret-file
};

using ClusterEnvironment = std::function<std::optional<std::string>(const std::string& name)>;
ClusterEnvironment ProcessClusterEnvironment();

// Slurm's hostlist syntax into host names, in order: "gpu[01-03,7],login"
// -> gpu01 gpu02 gpu03 gpu7 login. INVALID_ARGUMENT naming `origin` for an
// unbalanced bracket, a bad range or more than kMaxClusterNodes hosts.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist,
                                                        absl::string_view origin);

// The options for a daemon that listens on `listen_address`, whose host name
// is `hostname` (used when it listens on a wildcard address and nothing
// names its advertised address). INVALID_ARGUMENT naming the flag or
// variable, what came and what is accepted.
// The host of "HOST:PORT" as a socket dials it: "[::1]:7531" -> "::1".
std::string HostOfAddress(const std::string& address);

absl::StatusOr<ClusterOptions> ResolveClusterOptions(const ClusterFlags& flags,
                                                     const std::string& listen_address,
                                                     const std::string& hostname,
                                                     const ClusterEnvironment& env);

// The cluster's secret, which every member proves on each call to another
// (server/cluster/cluster_secret.h): the first line of `path` (--cluster-secret-file) when
// given, else BENCHD_CLUSTER_SECRET. Never a flag's value: `ps` shows those.
// A file that others may read, or group or others may write, is refused, and
// so is a secret of fewer than kMinClusterSecretBytes (a launcher makes one:
// deploy/slurm/benchd.sbatch, deploy/kubernetes/cluster). INVALID_ARGUMENT
// naming the file or variable.
inline constexpr size_t kMinClusterSecretBytes = 16;
inline constexpr size_t kMaxClusterSecretBytes = 1024;
absl::StatusOr<std::string> LoadClusterSecret(const std::string& path,
                                              const ClusterEnvironment& env);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_CONFIG_H_
