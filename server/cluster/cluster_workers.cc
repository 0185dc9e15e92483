#include "server/cluster/cluster_workers.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "server/core/grpc_status.h"

namespace benchd::server {

// ---------------------------------------------------------------- RemoteWorkerClient

RemoteWorkerClient::RemoteWorkerClient(std::string device, std::string node_device,
                                       std::string self, pid_t pid,
                                       std::shared_ptr<grpc::Channel> channel,
                                       const PeerChannels* peers)
    : WorkerClient(std::move(device), /*generation=*/0, pid),
      node_device_(std::move(node_device)),
      self_(std::move(self)),
      stub_(internal::Node::NewStub(std::move(channel))),
      peers_(peers) {}

RunEnd RemoteWorkerClient::Run(const internal::RunRequest& request, CancelHandle& cancel,
                               const EventCallback& on_event) {
  grpc::ClientContext context;
  peers_->Authorize(&context);
  const uint64_t registration = cancel.Register([&context] { context.TryCancel(); });
  internal::NodeRunRequest node_request;
  node_request.set_device(node_device_);
  node_request.set_from_node(self_);
  *node_request.mutable_run() = request;
  auto reader = stub_->Run(&context, node_request);
  RunEnd end = ReadRunStream(context, *reader, on_event, "its daemon");
  cancel.Unregister(registration);
  if (!end.last) {
    end.status = absl::Status(end.status.code(),
                              absl::StrCat("node ", device().substr(0, device().find('/')),
                                           " (its daemon): ", end.status.message()));
  }
  return end;
}

absl::StatusOr<int64_t> RemoteWorkerClient::Kill(const std::string& why,
                                                 std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  peers_->Authorize(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  internal::NodeKillRequest request;
  request.set_device(node_device_);
  request.set_from_node(self_);
  request.set_why(why);
  internal::NodeKillResponse response;
  if (auto s = FromGrpc(stub_->Kill(&ctx, request, &response)); !s.ok()) return s;
  return response.pid();
}

template <typename Req, typename Resp, typename Start>
void RemoteWorkerClient::CallAsync(Req request, Timeout timeout, Done<Resp> done, Start start) {
  struct Call {
    grpc::ClientContext ctx;
    Req request;
    Resp response;
    Done<Resp> done;
  };
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->done = std::move(done);
  peers_->Authorize(&call->ctx);
  call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  start(&call->ctx, &call->request, &call->response, [call](grpc::Status s) {
    if (s.ok()) {
      call->done(std::move(call->response));
    } else {
      call->done(FromGrpc(s));
    }
  });
}

void RemoteWorkerClient::GetInfoAsync(Timeout, Done<internal::WorkerInfo> done) {
  done(absl::UnimplementedError(absl::StrCat(device(), " is another node's: ask it")));
}
void RemoteWorkerClient::PingAsync(Timeout, Done<internal::PingResponse> done) {
  done(absl::UnimplementedError(absl::StrCat(device(), " is another node's: ask it")));
}
void RemoteWorkerClient::ListModelsAsync(const v1::ListModelsRequest&, Timeout,
                                         Done<v1::ListModelsResponse> done) {
  done(absl::UnimplementedError(absl::StrCat(device(), " is another node's: ask it")));
}
void RemoteWorkerClient::EvictModelAsync(const v1::EvictModelRequest&, Timeout,
                                         Done<v1::EvictModelResponse> done) {
  done(absl::UnimplementedError(absl::StrCat(device(), " is another node's: ask it")));
}

void RemoteWorkerClient::PrepareGroupAsync(const internal::PrepareGroupRequest& request,
                                           Timeout timeout,
                                           Done<internal::PrepareGroupResponse> done) {
  internal::NodePrepareGroupRequest wrapped;
  wrapped.set_device(node_device_);
  wrapped.set_from_node(self_);
  *wrapped.mutable_request() = request;
  CallAsync<internal::NodePrepareGroupRequest, internal::PrepareGroupResponse>(
      std::move(wrapped), timeout, std::move(done),
      [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->async()->PrepareGroup(ctx, req, resp, std::move(cb));
      });
}

void RemoteWorkerClient::JoinGroupAsync(const internal::JoinGroupRequest& request, Timeout timeout,
                                        Done<internal::JoinGroupResponse> done) {
  internal::NodeJoinGroupRequest wrapped;
  wrapped.set_device(node_device_);
  wrapped.set_from_node(self_);
  *wrapped.mutable_request() = request;
  CallAsync<internal::NodeJoinGroupRequest, internal::JoinGroupResponse>(
      std::move(wrapped), timeout, std::move(done),
      [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->async()->JoinGroup(ctx, req, resp, std::move(cb));
      });
}

void RemoteWorkerClient::LeaveGroupAsync(const internal::LeaveGroupRequest& request,
                                         Timeout timeout, Done<internal::LeaveGroupResponse> done) {
  internal::NodeLeaveGroupRequest wrapped;
  wrapped.set_device(node_device_);
  wrapped.set_from_node(self_);
  *wrapped.mutable_request() = request;
  CallAsync<internal::NodeLeaveGroupRequest, internal::LeaveGroupResponse>(
      std::move(wrapped), timeout, std::move(done),
      [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->async()->LeaveGroup(ctx, req, resp, std::move(cb));
      });
}

// ---------------------------------------------------------------- ClusterWorkers

std::string ClusterWorkers::CanonicalDevice(const std::string& device) {
  const std::string own = cluster_->options().name + "/";
  if (cluster_->options().enabled && device.rfind(own, 0) == 0) return device.substr(own.size());
  return device;
}

absl::StatusOr<std::shared_ptr<RemoteWorkerClient>> ClusterWorkers::RemoteClient(
    const std::string& device, const Cluster::Qualified& remote) {
  auto node = cluster_->ReadyNode(remote.node);
  if (!node.ok()) return node.status();
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& cached = channels_[node->address()];
    if (!cached) cached = peers_->Open(node->address());
    channel = cached;
  }
  // The worker's pid as the member announced it (its heartbeat, at most a
  // second old): the job's messages name it.
  pid_t pid = 0;
  for (const v1::Device& d : node->devices()) {
    if (d.name() == remote.name) pid = static_cast<pid_t>(d.worker_pid());
  }
  return std::make_shared<RemoteWorkerClient>(device, remote.name, cluster_->options().name, pid,
                                              channel, peers_);
}

absl::StatusOr<std::shared_ptr<WorkerClient>> ClusterWorkers::WaitUntilUp(
    const std::string& device, std::chrono::milliseconds timeout) {
  if (auto remote = cluster_->OtherMember(device)) {
    auto client = RemoteClient(device, *remote);
    if (!client.ok()) return client.status();
    return std::shared_ptr<WorkerClient>(*std::move(client));
  }
  return local_->WaitUntilUp(CanonicalDevice(device), timeout);
}

std::string ClusterWorkers::WaitForExit(const std::string& device, uint64_t generation,
                                        std::chrono::milliseconds timeout) {
  if (cluster_->OtherMember(device)) return "";  // its own node's supervisor sees that
  return local_->WaitForExit(CanonicalDevice(device), generation, timeout);
}

WorkerHealth ClusterWorkers::Health(const std::string& device) {
  auto remote = cluster_->OtherMember(device);
  if (!remote) return local_->Health(CanonicalDevice(device));
  WorkerHealth health;
  auto client = RemoteClient(device, *remote);
  if (client.ok()) {
    health.state = v1::WORKER_STATE_UP;
    health.client = *std::move(client);
  } else {
    health.detail = std::string(client.status().message());
  }
  return health;
}

void ClusterWorkers::Kill(const std::string& device, uint64_t generation, const std::string& why) {
  if (auto remote = cluster_->OtherMember(device)) {
    // Its own daemon kills it (Node.Kill, while it runs this node's Run) and
    // restarts it, as the supervisor here does a local one. Bounded: this
    // runs on the job's deadline thread.
    auto client = RemoteClient(device, *remote);
    absl::StatusOr<int64_t> pid =
        client.ok() ? (*client)->Kill(why, std::chrono::seconds(5)) : client.status();
    if (pid.ok()) {
      fprintf(stderr, "benchd: cluster: %s killed its worker for %s (pid %lld): %s\n",
              remote->node.c_str(), remote->name.c_str(), static_cast<long long>(*pid),
              why.c_str());
    } else {
      fprintf(stderr, "benchd: cluster: could not have %s kill its worker for %s: %s\n",
              remote->node.c_str(), remote->name.c_str(), pid.status().ToString().c_str());
    }
    return;
  }
  local_->Kill(CanonicalDevice(device), generation, why);
}

std::shared_ptr<void> ClusterWorkers::Hold(const std::string& device, const std::string& why) {
  if (cluster_->OtherMember(device)) return nullptr;
  return local_->Hold(CanonicalDevice(device), why);
}

std::string ClusterWorkers::LogPath(const std::string& device) const {
  if (auto remote = cluster_->OtherMember(device)) {
    return absl::StrCat("the worker log of ", remote->name, " on ", remote->node);
  }
  return local_->LogPath(device);
}

std::vector<std::string> ClusterWorkers::RemoteDevices() {
  std::vector<std::string> devices;
  if (!cluster_->options().enabled) return devices;
  const v1::ListNodesResponse nodes = cluster_->List();
  for (const v1::ClusterNode& node : nodes.nodes()) {
    if (node.self() || node.state() != v1::NODE_STATE_READY) continue;
    for (const v1::Device& d : node.devices()) devices.push_back(node.name() + "/" + d.name());
  }
  return devices;
}

std::string ClusterWorkers::NodeHost(const std::string& device) {
  if (!cluster_->options().enabled) return "";
  if (auto remote = cluster_->OtherMember(device)) {
    auto node = cluster_->ReadyNode(remote->node);
    return node.ok() ? HostOfAddress(node->address()) : "";
  }
  return HostOfAddress(cluster_->options().advertise);
}

}  // namespace benchd::server
