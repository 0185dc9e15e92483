// benchd.v1.Bench over gRPC's callback API: thin translation between the wire
// and JobManager / EventHub / Workers. Input checks live in common/job_spec.
#ifndef BENCHD_SERVER_API_BENCH_SERVICE_H_
#define BENCHD_SERVER_API_BENCH_SERVICE_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "benchd/v1/bench.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/forwarding.h"
#include "server/jobs/event_hub.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/job_manager.h"
#include "server/security/auth.h"
#include "server/security/call_policy.h"
#include "server/store/artifact_store.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class BenchService final : public v1::Bench::CallbackService {
 public:
  struct NodeDetails {
    std::string data_dir;
    std::string metrics_address;
    std::string artifacts_dir;  // <data_dir>/artifacts: the workers write there
  };
  BenchService(JobManager* jobs, EventHub* hub, Workers* workers, NodeDetails node,
               GroupRegistry* groups = nullptr)
      : jobs_(jobs),
        hub_(hub),
        workers_(workers),
        node_(std::move(node)),
        artifacts_(node_.artifacts_dir),
        groups_(groups) {}
  ~BenchService();

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx, const v1::SubmitRequest* req,
                                   v1::Job* resp) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Watch(grpc::CallbackServerContext* ctx,
                                                const v1::WatchRequest* req) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest* req,
                                   v1::Job* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* req, v1::Job* resp) override;
  // ListModels and EvictModel ask the workers without blocking a server
  // thread (server/jobs/model_calls.h).
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx,
                                       const v1::ListModelsRequest* req,
                                       v1::ListModelsResponse* resp) override;
  grpc::ServerUnaryReactor* EvictModel(grpc::CallbackServerContext* ctx,
                                       const v1::EvictModelRequest* req,
                                       v1::EvictModelResponse* resp) override;
  // From the daemon's own state (the supervisor's heartbeat keeps each
  // worker's state and free memory): answers whatever the workers do.
  grpc::ServerUnaryReactor* GetNodeInfo(grpc::CallbackServerContext* ctx,
                                        const v1::GetNodeInfoRequest* req,
                                        v1::NodeInfo* resp) override;
  grpc::ServerUnaryReactor* ListArtifacts(grpc::CallbackServerContext* ctx,
                                          const v1::ListArtifactsRequest* req,
                                          v1::ListArtifactsResponse* resp) override;
  grpc::ServerWriteReactor<v1::ArtifactChunk>* FetchArtifact(
      grpc::CallbackServerContext* ctx, const v1::FetchArtifactRequest* req) override;
  // Process groups (server/jobs/group_registry.h). A request that fails
  // GroupRegistry::CheckRequest, or names a worker that cannot serve, is
  // refused on the calling thread; a good one is set up on a thread of its
  // own (the rendezvous and NCCL's set-up take seconds) that ends with the
  // call, kMaxGroupOperations at most (creates and destroys together).
  grpc::ServerUnaryReactor* CreateGroup(grpc::CallbackServerContext* ctx,
                                        const v1::CreateGroupRequest* req,
                                        v1::Group* resp) override;
  grpc::ServerUnaryReactor* ListGroups(grpc::CallbackServerContext* ctx,
                                       const v1::ListGroupsRequest* req,
                                       v1::ListGroupsResponse* resp) override;
  grpc::ServerUnaryReactor* DestroyGroup(grpc::CallbackServerContext* ctx,
                                         const v1::DestroyGroupRequest* req,
                                         v1::DestroyGroupResponse* resp) override;

  // Memory by formula (common/memory_estimate.h), computed here: no worker
  // is asked and no job made.
  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* ctx,
                                     const v1::EstimateRequest* req,
                                     v1::MemoryEstimate* resp) override;
  // The cluster's members (server/cluster/cluster.h), from memory: no peer is asked.
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const v1::ListNodesRequest* req,
                                      v1::ListNodesResponse* resp) override;

  // Runs after every EvictModel (the daemon refreshes its resident-model
  // metrics there). Set before serving.
  void SetOnEvicted(std::function<void()> on_evicted) { on_evicted_ = std::move(on_evicted); }
  // Who may call what (server/security/auth.h); without one every caller is admin.
  // Set before serving; it must outlive the service.
  void SetAuthorizer(const Authorizer* auth) { auth_ = auth; }
  // Without one, ListNodes is UNIMPLEMENTED (tests that need no cluster).
  // With a forwarder, requests for another member's devices and jobs go
  // there (server/cluster/forwarding.h).
  void SetCluster(Cluster* cluster, Forwarder* forwarder = nullptr) {
    cluster_ = cluster;
    forwarder_ = forwarder;
  }

  static constexpr int kMaxGroupOperations = 4;

 private:
  // What the one gate (Gate) let through: the principal the call's
  // credentials prove, the caller it acts for (another member forwarding
  // vouches for its own caller), the call's policy (server/security/call_policy.h),
  // and the member that owns the job or device the call names, when that is
  // not this node.
  struct Gated {
    Principal checked;
    Principal caller;
    const CallPolicy* policy;
    std::optional<Cluster::Qualified> member;
  };
  // Every call passes here first: the caller's role, the request's size
  // limits, the member its route field names.
  template <typename Req>
  absl::StatusOr<Gated> Gate(const grpc::CallbackServerContext& ctx, const Req& req) const;
  // A unary call (a stream): Gate, then forwarded to the member, or
  // `serve(gated)` here.
  template <typename Req, typename Resp, typename Serve>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, const Req* req, Resp* resp,
                                  Serve serve);
  template <typename Resp, typename Req, typename Serve>
  grpc::ServerWriteReactor<Resp>* ServerStream(grpc::CallbackServerContext* ctx, const Req* req,
                                               Serve serve);
  absl::Status ListJobsHere(const v1::ListJobsRequest& req, v1::ListJobsResponse* resp);

  std::vector<std::string> DeviceNames() const;  // served here, in order
  // UNAVAILABLE naming the first device whose worker cannot take part.
  absl::Status CheckMembersServing(const google::protobuf::RepeatedPtrField<std::string>& devices);
  // Runs `operation` on a thread of its own and finishes `reactor` with its
  // status; false (nothing started) when kMaxGroupOperations are under way.
  bool StartGroupOperation(grpc::ServerUnaryReactor* reactor,
                           std::function<grpc::Status()> operation);
  static grpc::Status TooManyGroupOperations();

  JobManager* const jobs_;
  EventHub* const hub_;
  Workers* const workers_;
  const NodeDetails node_;
  const ArtifactStore artifacts_;
  GroupRegistry* const groups_;
  Cluster* cluster_ = nullptr;
  Forwarder* forwarder_ = nullptr;
  std::function<void()> on_evicted_;
  const Authorizer open_{{}, nullptr};
  const Authorizer* auth_ = &open_;
  // Group operations under way: each runs on a detached thread (nothing is
  // left behind when it ends) that counts itself out last; the destructor
  // waits for the count to reach zero.
  std::mutex setups_mu_;
  std::condition_variable setups_done_;
  int setups_ = 0;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_API_BENCH_SERVICE_H_
