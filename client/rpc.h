// A thin client of benchd's Bench service: every unary call has the --timeout
// deadline, every call carries the token (common/credentials.h), a failed
// connection becomes one UNAVAILABLE message naming the address (and saying
// when TLS failed), and gRPC statuses come back as absl::Status.
#ifndef BENCHD_CLIENT_RPC_H_
#define BENCHD_CLIENT_RPC_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.grpc.pb.h"
#include "common/credentials.h"

namespace benchd::client {

class BenchClient {
 public:
  BenchClient(std::string address, std::chrono::milliseconds timeout,
              ChannelSecurity security = {});

  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  absl::StatusOr<v1::ListModelsResponse> ListModels(const std::string& device);
  absl::StatusOr<v1::EvictModelResponse> EvictModel(const v1::EvictModelRequest& request);
  absl::StatusOr<v1::NodeInfo> GetNodeInfo();
  absl::StatusOr<v1::ListNodesResponse> ListNodes();
  absl::StatusOr<v1::MemoryEstimate> Estimate(const v1::EstimateRequest& request);
  absl::StatusOr<v1::ListArtifactsResponse> ListArtifacts(const std::string& job_id);
  // Streams the artifact's chunks to `on_chunk` in order (no overall
  // deadline: a trace may be large); returns its size. DATA_LOSS when the
  // chunks do not add up to the size the daemon announced.
  absl::StatusOr<int64_t> FetchArtifact(const std::string& job_id, const std::string& name,
                                        const std::function<void(const std::string&)>& on_chunk);
  // CreateGroup may take as long as the group's rendezvous: its deadline is
  // the larger of the timeout and `at_least`.
  absl::StatusOr<v1::Group> CreateGroup(const v1::CreateGroupRequest& request,
                                        std::chrono::milliseconds at_least);
  absl::StatusOr<v1::ListGroupsResponse> ListGroups();
  absl::StatusOr<v1::DestroyGroupResponse> DestroyGroup(const std::string& id);

  // Streams the job's events to `on_event` until a terminal one, which is
  // returned. No overall deadline (jobs take as long as they take), but the
  // connection must come up within the timeout. Once `stop` (if given) is
  // set, the stream is cancelled and CANCELLED returned (Ctrl-C).
  absl::StatusOr<v1::JobEvent> Watch(const std::string& job_id,
                                     const std::function<void(const v1::JobEvent&)>& on_event,
                                     const std::atomic<bool>* stop = nullptr);

  // gRPC status -> absl::Status, with UNAVAILABLE and DEADLINE_EXCEEDED
  // reworded to name the address, a TLS failure said as such, and a hint on
  // UNAUTHENTICATED when no token was sent.
  absl::Status Convert(const grpc::Status& status) const;

 private:
  // READY within the deadline, else UNAVAILABLE. A refused connection (or a
  // failed TLS handshake) ends the wait at once (TRANSIENT_FAILURE): the call
  // then fails fast with gRPC's reason instead of waiting out the deadline.
  absl::Status Connect(std::chrono::system_clock::time_point deadline);
  absl::Status Unreachable(const std::string& why) const;
  // The one place every call's context is set up: the token goes here.
  void Prepare(grpc::ClientContext* context) const;

  template <typename Response, typename Call>
  absl::StatusOr<Response> Unary(Call call);

  std::string address_;
  std::chrono::milliseconds timeout_;
  ChannelSecurity security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Bench::Stub> stub_;
};

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_RPC_H_
