#include "client/rpc.h"

#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace benchd::client {
namespace {

// A job's result holds every step (~60 bytes each): past gRPC's 4 MB default
// for long runs.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  AddChannelArgs(security, &args);
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(security), args);
}

std::string TimeoutText(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", t.count() / 1000.0);
}

// gRPC's reason for a failed connection (e.g. "... Ssl handshake failed:
// ... certificate verify failed") said as a TLS failure with what to check;
// nullopt when it is not about TLS (refused, no route, DNS).
std::optional<std::string> TlsFailure(const std::string& address, const std::string& why,
                                      bool tls) {
  const std::string lower = absl::AsciiStrToLower(why);
  const bool handshake = absl::StrContains(lower, "ssl") || absl::StrContains(lower, "handshake") ||
                         absl::StrContains(lower, "certificate");
  // The peer hung up before HTTP/2 began: a TLS port closing on plaintext,
  // or (TLS 1.3) a daemon refusing the client certificate, or none.
  const bool closed_in_setup = absl::StrContains(lower, "socket closed");
  if (!tls) {
    if (!handshake && !closed_in_setup) return std::nullopt;
    return fmt::format(
        "TLS failed at {}: the daemon closed this plaintext connection during setup, so it "
        "probably speaks TLS; give --tls-ca CA.pem (or --tls for the system's CAs) ({})",
        address, why);
  }
  if (absl::StrContains(lower, "wrong version number")) {
    return fmt::format(
        "TLS failed at {}: the daemon does not speak TLS there; drop --tls/--tls-ca, or start the "
        "daemon with --tls-cert/--tls-key ({})",
        address, why);
  }
  if (absl::StrContains(lower, "peer name")) {
    return fmt::format(
        "TLS failed at {}: the daemon's certificate does not name this host; give the name it "
        "has with --tls-server-name ({})",
        address, why);
  }
  if (handshake) {
    return fmt::format(
        "TLS failed at {}: check that --tls-ca is the CA that signed the daemon's certificate "
        "and that the certificate is still valid; where the daemon asks for one, the client "
        "certificate (--tls-cert/--tls-key) ({})",
        address, why);
  }
  if (closed_in_setup) {
    return fmt::format(
        "TLS failed at {}: the daemon closed the connection during the handshake; it may want a "
        "client certificate signed by its CA (--tls-cert/--tls-key), or not speak TLS ({})",
        address, why);
  }
  return std::nullopt;
}

}  // namespace

BenchClient::BenchClient(std::string address, std::chrono::milliseconds timeout,
                         ChannelSecurity security)
    : address_(std::move(address)),
      timeout_(timeout),
      security_(std::move(security)),
      channel_(MakeChannel(address_, security_)),
      stub_(v1::Bench::NewStub(channel_)) {}

void BenchClient::Prepare(grpc::ClientContext* context) const {
  if (!security_.token.empty()) {
    context->AddMetadata(kAuthorizationKey, AuthorizationValue(security_.token));
  }
}

absl::Status BenchClient::Unreachable(const std::string& why) const {
  return absl::UnavailableError(
      fmt::format("cannot reach benchd at {} ({}); check that the daemon runs there, or set "
                  "--address or BENCHD_ADDRESS",
                  address_, why));
}

absl::Status BenchClient::Connect(std::chrono::system_clock::time_point deadline) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    // The fail-fast call that follows fails at once with gRPC's reason
    // (refused, TLS handshake, ...), which Convert words for the user.
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) return absl::OkStatus();
    if (state == GRPC_CHANNEL_SHUTDOWN) return Unreachable("the channel was shut down");
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
      if (std::optional<std::string> tls =
              TlsFailure(address_, status.error_message(), security_.tls)) {
        return absl::UnavailableError(*tls);
      }
      return Unreachable(status.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      if (security_.token.empty()) {
        return absl::UnauthenticatedError(
            fmt::format("{} (benchctl sent no token: none of --token-file, BENCHD_TOKEN, "
                        "BENCHD_TOKEN_FILE or the client config's \"token_file\" is set)",
                        status.error_message()));
      }
      return absl::UnauthenticatedError(status.error_message());
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
  Prepare(&context);
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

absl::StatusOr<v1::ListNodesResponse> BenchClient::ListNodes() {
  v1::ListNodesRequest request;
  return Unary<v1::ListNodesResponse>([&](grpc::ClientContext* c, v1::ListNodesResponse* r) {
    return stub_->ListNodes(c, request, r);
  });
}

absl::StatusOr<v1::MemoryEstimate> BenchClient::Estimate(const v1::EstimateRequest& request) {
  return Unary<v1::MemoryEstimate>([&](grpc::ClientContext* c, v1::MemoryEstimate* r) {
    return stub_->Estimate(c, request, r);
  });
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
  Prepare(&context);
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
    const std::string& job_id, const std::function<void(const v1::JobEvent&)>& on_event,
    const std::atomic<bool>* stop) {
  if (absl::Status s = Connect(std::chrono::system_clock::now() + timeout_); !s.ok()) return s;
  grpc::ClientContext context;
  Prepare(&context);
  v1::WatchRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->Watch(&context, request);
  // Read blocks: a stop is noticed beside it and ends the stream from here
  // (TryCancel is thread-safe; a signal handler could not call it).
  std::atomic<bool> reading_done{false};
  std::thread stopper;
  if (stop != nullptr) {
    stopper = std::thread([&] {
      while (!reading_done) {
        if (*stop) {
          context.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  struct JoinAtExit {
    std::atomic<bool>& done;
    std::thread& thread;
    ~JoinAtExit() {
      done = true;
      if (thread.joinable()) thread.join();
    }
  } join_at_exit{reading_done, stopper};
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
  if (stop != nullptr && *stop) {
    return absl::CancelledError(fmt::format("stopped watching job {}", job_id));
  }
  if (!status.ok()) return Convert(status);
  return absl::UnknownError(
      fmt::format("the event stream of job {} ended before the job finished", job_id));
}

}  // namespace benchd::client
