// The workers of a cluster, as one Workers: this node's own (the Supervisor)
// and, by "node/device" names, the other members' (RemoteWorkerClient over
// their benchd.internal.Node service). The group registry and the collective
// job use it unchanged: a group whose ranks sit on several nodes is set up and
// run exactly as a local one, its store on rank 0's node address.
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_WORKERS_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_WORKERS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "benchd/internal/cluster.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/peer_channels.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

// One worker of another member, reached through that member's daemon. Only
// what a cluster group needs: Run, PrepareGroup, JoinGroup, LeaveGroup; the
// rest are UNIMPLEMENTED (models and pings stay with each node).
class RemoteWorkerClient final : public WorkerClient {
 public:
  // `device` as this node names it ("node1/cpu:0"); `node_device` as the
  // member does ("cpu:0"); `self` this node's name, which the member files
  // this node's groups and runs under (node_service.h); `pid` the worker's as
  // the member last announced it (0: not known).
  RemoteWorkerClient(std::string device, std::string node_device, std::string self, pid_t pid,
                     std::shared_ptr<grpc::Channel> channel, const PeerChannels* peers);

  // Node.Kill: the member kills its worker while it runs this node's Run
  // (the job's progress deadline passed); the pid it killed, or why not.
  absl::StatusOr<int64_t> Kill(const std::string& why, std::chrono::milliseconds timeout);

  RunEnd Run(const internal::RunRequest& request, CancelHandle& cancel,
             const EventCallback& on_event) override;
  void GetInfoAsync(Timeout timeout, Done<internal::WorkerInfo> done) override;
  void PingAsync(Timeout timeout, Done<internal::PingResponse> done) override;
  void ListModelsAsync(const v1::ListModelsRequest& request, Timeout timeout,
                       Done<v1::ListModelsResponse> done) override;
  void EvictModelAsync(const v1::EvictModelRequest& request, Timeout timeout,
                       Done<v1::EvictModelResponse> done) override;
  void PrepareGroupAsync(const internal::PrepareGroupRequest& request, Timeout timeout,
                         Done<internal::PrepareGroupResponse> done) override;
  void JoinGroupAsync(const internal::JoinGroupRequest& request, Timeout timeout,
                      Done<internal::JoinGroupResponse> done) override;
  void LeaveGroupAsync(const internal::LeaveGroupRequest& request, Timeout timeout,
                       Done<internal::LeaveGroupResponse> done) override;

 private:
  template <typename Req, typename Resp, typename Start>
  void CallAsync(Req request, Timeout timeout, Done<Resp> done, Start start);

  const std::string node_device_;
  const std::string self_;
  std::unique_ptr<internal::Node::Stub> stub_;
  const PeerChannels* const peers_;
};

class ClusterWorkers final : public Workers {
 public:
  ClusterWorkers(Workers* local, Cluster* cluster, const PeerChannels* peers)
      : local_(local), cluster_(cluster), peers_(peers) {}

  absl::StatusOr<std::shared_ptr<WorkerClient>> WaitUntilUp(
      const std::string& device, std::chrono::milliseconds timeout) override;
  std::string WaitForExit(const std::string& device, uint64_t generation,
                          std::chrono::milliseconds timeout) override;
  WorkerHealth Health(const std::string& device) override;
  void Kill(const std::string& device, uint64_t generation, const std::string& why) override;
  std::vector<v1::Device> Devices() override { return local_->Devices(); }
  v1::Versions WorkerVersions() override { return local_->WorkerVersions(); }
  std::string LogPath(const std::string& device) const override;
  // This node's devices only: another member's daemon parks and starts its
  // own workers (its Node calls hold them while they run).
  std::shared_ptr<void> Hold(const std::string& device, const std::string& why) override;
  std::string CanonicalDevice(const std::string& device) override;
  std::vector<std::string> RemoteDevices() override;
  std::string NodeHost(const std::string& device) override;

 private:
  absl::StatusOr<std::shared_ptr<RemoteWorkerClient>> RemoteClient(
      const std::string& device, const Cluster::Qualified& remote);

  Workers* const local_;
  Cluster* const cluster_;
  const PeerChannels* const peers_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // by address
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_WORKERS_H_
