// One running benchd: the wings wired together from a DaemonConfig. Start
// makes every part in dependency order and serves; ServeUntilStopped waits
// for SIGTERM/SIGINT (SIGHUP reloads TLS and the auth file) and stops in
// order: drain, interrupt what still runs while watchers are served, then
// shut the server and the workers down.
#ifndef BENCHD_SERVER_DAEMON_DAEMON_H_
#define BENCHD_SERVER_DAEMON_DAEMON_H_

#include <signal.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/api/bench_service.h"
#include "server/api/health.h"
#include "server/api/public_reflection.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_service.h"
#include "server/cluster/cluster_workers.h"
#include "server/cluster/forwarding.h"
#include "server/cluster/node_service.h"
#include "server/cluster/peer_channels.h"
#include "server/core/metrics.h"
#include "server/daemon/daemon_config.h"
#include "server/jobs/event_hub.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/job_manager.h"
#include "server/security/auth.h"
#include "server/security/tls.h"
#include "server/store/store.h"
#include "server/workers/supervisor.h"

namespace benchd::server {

class Daemon {
 public:
  // Everything up and serving, or why not (the message is for the log: it
  // names the flag or file at fault). Blocks SIGTERM, SIGINT and SIGHUP in
  // every thread it starts: ServeUntilStopped takes them.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonConfig config);
  ~Daemon();

  // Until SIGTERM or SIGINT; then the orderly stop. Returns the exit code.
  int ServeUntilStopped();

 private:
  explicit Daemon(DaemonConfig config) : config_(std::move(config)) {}
  absl::Status Prepare();  // settings, folders, credentials: nothing started
  absl::Status Wire();     // the parts, in dependency order
  absl::Status Serve();    // the gRPC server, workers, jobs, cluster
  void Reload();           // SIGHUP
  void LogStarted() const;

  DaemonConfig config_;
  std::string hostname_, data_, run_dir_, temporary_run_dir_, bound_;
  sigset_t signals_;
  ClusterOptions cluster_options_;
  PeerChannels peers_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ReloadableTls> tls_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<Metrics> metrics_;
  EventHub hub_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<ClusterWorkers> cluster_workers_;
  std::unique_ptr<GroupRegistry> groups_;
  std::unique_ptr<GpuSharing> gpu_sharing_;  // --gpu-sharing when-idle only
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<BenchService> service_;
  std::unique_ptr<Forwarder> forwarder_;
  std::unique_ptr<ClusterService> cluster_service_;
  std::unique_ptr<NodeService> node_service_;
  std::unique_ptr<PublicReflection> reflection_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<NodeHealth> health_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_DAEMON_DAEMON_H_
