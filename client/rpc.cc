#include "client/rpc.h"

#include <cstdlib>

#include <fmt/format.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

namespace benchd::client {
namespace {

// A job's result holds every step (~60 bytes each): past gRPC's 4 MB default
// for long runs.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::string TimeoutText(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", t.count() / 1000.0);
}

}  // namespace

std::string DefaultAddress() {
  const char* env = std::getenv("BENCHD_ADDRESS");
  return env != nullptr && *env != '\0' ? env : "127.0.0.1:7531";
}

BenchClient::BenchClient(std::string address, std::chrono::milliseconds timeout)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(MakeChannel(address_)),
      stub_(v1::Bench::NewStub(channel_)) {}

absl::Status BenchClient::Unreachable(const std::string& why) const {
  return absl::UnavailableError(
      fmt::format("cannot reach benchd at {} ({}); check that the daemon runs there, or set "
                  "--address or BENCHD_ADDRESS",
                  address_, why));
}

absl::Status BenchClient::Connect(std::chrono::system_clock::time_point deadline) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return Unreachable("connection failed");
    }
    if (!channel_->WaitForStateChange(state, deadline)) {
      return Unreachable("no connection within " + TimeoutText(timeout_));
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

absl::Status BenchClient::Convert(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // Still connected: the daemon itself answered UNAVAILABLE (e.g. a worker
      // is down), and its message says more than ours would.
      if (channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
        return absl::UnavailableError("UNAVAILABLE: " + status.error_message());
      }
      return Unreachable(status.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      // Connected, but no answer in time: the daemon is there and busy or stuck.
      return absl::DeadlineExceededError(
          fmt::format("benchd at {} did not answer within {} (raise --timeout?)", address_,
                      TimeoutText(timeout_)));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
  }
}

template <typename Response, typename Call>
absl::StatusOr<Response> BenchClient::Unary(Call call) {
  const auto deadline = std::chrono::system_clock::now() + timeout_;
  if (absl::Status s = Connect(deadline); !s.ok()) return s;
  grpc::ClientContext context;
  context.set_deadline(deadline);
  Response response;
  grpc::Status status = call(&context, &response);
  if (!status.ok()) return Convert(status);
  return response;
}

absl::StatusOr<v1::Job> BenchClient::Submit(const v1::JobSpec& spec) {
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  return Unary<v1::Job>(
      [&](grpc::ClientContext* c, v1::Job* r) { return stub_->Submit(c, request, r); });
}

absl::StatusOr<v1::Job> BenchClient::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  return Unary<v1::Job>(
      [&](grpc::ClientContext* c, v1::Job* r) { return stub_->GetJob(c, request, r); });
}

absl::StatusOr<v1::ListJobsResponse> BenchClient::ListJobs(const v1::ListJobsRequest& request) {
  return Unary<v1::ListJobsResponse>([&](grpc::ClientContext* c, v1::ListJobsResponse* r) {
    return stub_->ListJobs(c, request, r);
  });
}

absl::StatusOr<v1::Job> BenchClient::CancelJob(const std::string& job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  return Unary<v1::Job>(
      [&](grpc::ClientContext* c, v1::Job* r) { return stub_->CancelJob(c, request, r); });
}

absl::StatusOr<v1::Group> BenchClient::CreateGroup(const v1::CreateGroupRequest& request,
                                                   std::chrono::milliseconds at_least) {
  const auto saved = timeout_;
  timeout_ = std::max(timeout_, at_least);
  auto out = Unary<v1::Group>(
      [&](grpc::ClientContext* c, v1::Group* r) { return stub_->CreateGroup(c, request, r); });
  timeout_ = saved;
  return out;
}

absl::StatusOr<v1::ListGroupsResponse> BenchClient::ListGroups() {
  v1::ListGroupsRequest request;
  return Unary<v1::ListGroupsResponse>([&](grpc::ClientContext* c, v1::ListGroupsResponse* r) {
    return stub_->ListGroups(c, request, r);
  });
}

absl::StatusOr<v1::DestroyGroupResponse> BenchClient::DestroyGroup(const std::string& id) {
  v1::DestroyGroupRequest request;
  request.set_group(id);
  return Unary<v1::DestroyGroupResponse>([&](grpc::ClientContext* c, v1::DestroyGroupResponse* r) {
    return stub_->DestroyGroup(c, request, r);
  });
}

absl::StatusOr<v1::ListModelsResponse> BenchClient::ListModels(const std::string& device) {
  v1::ListModelsRequest request;
  request.set_device(device);
  return Unary<v1::ListModelsResponse>([&](grpc::ClientContext* c, v1::ListModelsResponse* r) {
    return stub_->ListModels(c, request, r);
  });
}

absl::StatusOr<v1::EvictModelResponse> BenchClient::EvictModel(
    const v1::EvictModelRequest& request) {
  return Unary<v1::EvictModelResponse>([&](grpc::ClientContext* c, v1::EvictModelResponse* r) {
    return stub_->EvictModel(c, request, r);
  });
}

absl::StatusOr<v1::NodeInfo> BenchClient::GetNodeInfo() {
  v1::GetNodeInfoRequest request;
  return Unary<v1::NodeInfo>(
      [&](grpc::ClientContext* c, v1::NodeInfo* r) { return stub_->GetNodeInfo(c, request, r); });
}

absl::StatusOr<v1::ListArtifactsResponse> BenchClient::ListArtifacts(const std::string& job_id) {
  v1::ListArtifactsRequest request;
  request.set_job_id(job_id);
  return Unary<v1::ListArtifactsResponse>(
      [&](grpc::ClientContext* c, v1::ListArtifactsResponse* r) {
        return stub_->ListArtifacts(c, request, r);
      });
}

absl::StatusOr<int64_t> BenchClient::FetchArtifact(
    const std::string& job_id, const std::string& name,
    const std::function<void(const std::string&)>& on_chunk) {
  if (absl::Status s = Connect(std::chrono::system_clock::now() + timeout_); !s.ok()) return s;
  grpc::ClientContext context;
  v1::FetchArtifactRequest request;
  request.set_job_id(job_id);
  request.set_name(name);
  std::unique_ptr<grpc::ClientReader<v1::ArtifactChunk>> reader =
      stub_->FetchArtifact(&context, request);
  v1::ArtifactChunk chunk;
  int64_t received = 0, total = -1;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != received) {
      context.TryCancel();
      (void)reader->Finish();
      return absl::DataLossError(
          fmt::format("artifact {} of job {}: a chunk at offset {} came "
                      "after {} bytes",
                      name, job_id, chunk.offset(), received));
    }
    total = chunk.total_bytes();
    received += static_cast<int64_t>(chunk.data().size());
    on_chunk(chunk.data());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return Convert(status);
  if (received != total) {
    return absl::DataLossError(fmt::format("artifact {} of job {}: {} of {} bytes arrived", name,
                                           job_id, received, total < 0 ? 0 : total));
  }
  return received;
}

absl::StatusOr<v1::JobEvent> BenchClient::Watch(
    const std::string& job_id, const std::function<void(const v1::JobEvent&)>& on_event) {
  if (absl::Status s = Connect(std::chrono::system_clock::now() + timeout_); !s.ok()) return s;
  grpc::ClientContext context;
  v1::WatchRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->Watch(&context, request);
  v1::JobEvent event;
  bool terminal = false;
  while (reader->Read(&event)) {
    on_event(event);
    switch (event.event_case()) {
      case v1::JobEvent::kResult:
      case v1::JobEvent::kFailed:
      case v1::JobEvent::kCancelled:
      case v1::JobEvent::kInterrupted:
        terminal = true;
        break;
      default:
        break;
    }
    if (terminal) break;
  }
  if (terminal) {
    // The daemon ends the stream after a terminal event; don't depend on it.
    context.TryCancel();
    (void)reader->Finish();
    return event;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return Convert(status);
  return absl::UnknownError(
      fmt::format("the event stream of job {} ended before the job finished", job_id));
}

}  // namespace benchd::client
