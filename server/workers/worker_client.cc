#include "server/workers/worker_client.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchd/internal/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/core/grpc_status.h"

namespace benchd::server {
namespace {

// The result of an async call, for the thread that waits for it. The state
// is shared with the callback, which may run after the waiter has returned.
template <typename T>
class Waiter {
 public:
  WorkerClient::Done<T> Callback() {
    return [state = state_](absl::StatusOr<T> result) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->result = std::move(result);
      state->cv.notify_all();
    };
  }
  absl::StatusOr<T> Wait() {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->result.has_value(); });
    return *std::move(state_->result);
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<absl::StatusOr<T>> result;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

template <typename T, typename Start>
absl::StatusOr<T> Blocking(Start start) {
  Waiter<T> waiter;
  start(waiter.Callback());
  return waiter.Wait();
}

}  // namespace

bool IsLastWorkerEvent(const internal::WorkerEvent& e) {
  return e.has_result() || e.has_failure() || e.has_cancelled();
}

// ---------------------------------------------------------------- CancelHandle

void CancelHandle::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, on_cancel] : on_cancel_) on_cancel();
}

bool CancelHandle::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

uint64_t CancelHandle::Register(std::function<void()> on_cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) on_cancel();
  const uint64_t id = next_id_++;
  on_cancel_.emplace(id, std::move(on_cancel));
  return id;
}

void CancelHandle::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  on_cancel_.erase(id);
}

// ---------------------------------------------------------------- blocking forms (default)

absl::StatusOr<internal::WorkerInfo> WorkerClient::GetInfo(Timeout timeout) {
  return Blocking<internal::WorkerInfo>([&](auto done) { GetInfoAsync(timeout, done); });
}

absl::StatusOr<internal::PingResponse> WorkerClient::Ping(Timeout timeout) {
  return Blocking<internal::PingResponse>([&](auto done) { PingAsync(timeout, done); });
}

absl::StatusOr<v1::ListModelsResponse> WorkerClient::ListModels(
    const v1::ListModelsRequest& request, Timeout timeout) {
  return Blocking<v1::ListModelsResponse>(
      [&](auto done) { ListModelsAsync(request, timeout, done); });
}

absl::StatusOr<v1::EvictModelResponse> WorkerClient::EvictModel(
    const v1::EvictModelRequest& request, Timeout timeout) {
  return Blocking<v1::EvictModelResponse>(
      [&](auto done) { EvictModelAsync(request, timeout, done); });
}

absl::StatusOr<internal::PrepareGroupResponse> WorkerClient::PrepareGroup(
    const internal::PrepareGroupRequest& request, Timeout timeout) {
  return Blocking<internal::PrepareGroupResponse>(
      [&](auto done) { PrepareGroupAsync(request, timeout, done); });
}

absl::StatusOr<internal::JoinGroupResponse> WorkerClient::JoinGroup(
    const internal::JoinGroupRequest& request, Timeout timeout) {
  return Blocking<internal::JoinGroupResponse>(
      [&](auto done) { JoinGroupAsync(request, timeout, done); });
}

absl::StatusOr<internal::LeaveGroupResponse> WorkerClient::LeaveGroup(
    const internal::LeaveGroupRequest& request, Timeout timeout) {
  return Blocking<internal::LeaveGroupResponse>(
      [&](auto done) { LeaveGroupAsync(request, timeout, done); });
}

// ---------------------------------------------------------------- GrpcWorkerClient

std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& socket_path) {
  // A result holds every step (~60 bytes each): beyond gRPC's 4 MB default
  // for long runs.
  constexpr int kMaxMessageBytes = 256 << 20;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

struct GrpcWorkerClient::Stub {
  std::unique_ptr<internal::Worker::Stub> stub;
};

namespace {

// Channels whose async calls have called back, until a caller's thread lets
// them go. gRPC 1.51 cannot destroy a channel inside one of that channel's
// own callbacks (its callback queue shuts down and is freed twice: seen
// under ASan when a worker parked, its client dropped, while a ping was out),
// so a callback never drops the last reference: it leaves it here.
std::mutex& ReleasedMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<std::shared_ptr<grpc::Channel>>& Released() {
  static auto* channels = new std::vector<std::shared_ptr<grpc::Channel>>;
  return *channels;
}

void KeepForRelease(std::shared_ptr<grpc::Channel> channel) {
  std::lock_guard<std::mutex> lock(ReleasedMu());
  Released().push_back(std::move(channel));
}

// On a thread that is no channel's callback (a caller's): the channels left
// by finished calls go; a client still holding one keeps it alive.
void ReleaseFinishedCalls() {
  std::vector<std::shared_ptr<grpc::Channel>> released;
  {
    std::lock_guard<std::mutex> lock(ReleasedMu());
    released.swap(Released());
  }
}

}  // namespace

// One unary call through the stub's callback API. The call owns its context,
// request and response until gRPC calls back, so the caller need not wait;
// it also holds the channel, so the connection outlives a client dropped
// while its calls are out.
template <typename Req, typename Resp, typename Start>
void GrpcWorkerClient::CallAsync(const Req& request, Timeout timeout, Done<Resp> done,
                                 Start start) {
  ReleaseFinishedCalls();
  if (in_flight_->fetch_add(1) >= kMaxUnaryCallsInFlight) {
    in_flight_->fetch_sub(1);
    done(absl::ResourceExhaustedError(absl::StrCat(
        "the worker for ", device(), " (pid ", pid(), ") already has ", kMaxUnaryCallsInFlight,
        " calls waiting for an answer; it may be hung (benchctl node shows its state)")));
    return;
  }
  struct Call {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<std::atomic<int>> in_flight;
    grpc::ClientContext context;
    Req request;
    Resp response;
    Done<Resp> done;
  };
  auto* call = new Call;
  call->channel = channel_;
  call->in_flight = in_flight_;
  call->request = request;
  call->done = std::move(done);
  call->context.set_deadline(std::chrono::system_clock::now() + timeout);
  start(&call->context, &call->request, &call->response, [call](grpc::Status status) {
    std::unique_ptr<Call> owned(call);
    owned->in_flight->fetch_sub(1);
    if (status.ok()) {
      owned->done(std::move(owned->response));
    } else {
      owned->done(FromGrpc(status));
    }
    KeepForRelease(std::move(owned->channel));  // never the last reference here
  });
}

namespace {

// One unary call through the stub's synchronous API, on the calling thread.
template <typename Resp, typename Call>
absl::StatusOr<Resp> CallBlocking(WorkerClient::Timeout timeout, Call call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  Resp response;
  const grpc::Status status = call(&context, &response);
  if (!status.ok()) return FromGrpc(status);
  return response;
}

}  // namespace

GrpcWorkerClient::GrpcWorkerClient(std::string device, uint64_t generation, pid_t pid,
                                   std::shared_ptr<grpc::Channel> channel)
    : WorkerClient(std::move(device), generation, pid),
      channel_(std::move(channel)),
      stub_(std::make_unique<Stub>(Stub{internal::Worker::NewStub(channel_)})) {}

GrpcWorkerClient::~GrpcWorkerClient() = default;

RunEnd ReadRunStream(grpc::ClientContext& context,
                     grpc::ClientReaderInterface<internal::WorkerEvent>& reader,
                     const std::function<void(const internal::WorkerEvent&)>& on_event,
                     const std::string& who) {
  RunEnd end;
  internal::WorkerEvent event;
  while (reader.Read(&event)) {
    if (IsLastWorkerEvent(event)) {
      end.last = std::move(event);
      break;
    }
    if (event.event_case() != internal::WorkerEvent::EVENT_NOT_SET) on_event(event);
  }
  // Nothing more is read after the last event; cancelling lets Finish return
  // without waiting for the other end to close.
  if (end.last) context.TryCancel();
  const grpc::Status status = reader.Finish();
  if (!end.last) {
    end.status =
        status.ok()
            ? absl::UnknownError(absl::StrCat(who, " ended the stream without a final event"))
            : FromGrpc(status);
  }
  return end;
}

RunEnd GrpcWorkerClient::Run(const internal::RunRequest& request, CancelHandle& cancel,
                             const EventCallback& on_event) {
  grpc::ClientContext context;
  // TryCancel before the call starts is kept and applied when it does.
  const uint64_t registration = cancel.Register([&context] { context.TryCancel(); });
  auto reader = stub_->stub->Run(&context, request);
  RunEnd end = ReadRunStream(context, *reader, on_event, "the worker");
  cancel.Unregister(registration);  // before `context` goes
  return end;
}

void GrpcWorkerClient::GetInfoAsync(Timeout timeout, Done<internal::WorkerInfo> done) {
  CallAsync<internal::GetInfoRequest, internal::WorkerInfo>(
      internal::GetInfoRequest(), timeout, std::move(done),
      [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->GetInfo(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::PingAsync(Timeout timeout, Done<internal::PingResponse> done) {
  CallAsync<internal::PingRequest, internal::PingResponse>(
      internal::PingRequest(), timeout, std::move(done),
      [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->Ping(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::ListModelsAsync(const v1::ListModelsRequest& request, Timeout timeout,
                                       Done<v1::ListModelsResponse> done) {
  CallAsync<v1::ListModelsRequest, v1::ListModelsResponse>(
      request, timeout, std::move(done), [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->ListModels(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::EvictModelAsync(const v1::EvictModelRequest& request, Timeout timeout,
                                       Done<v1::EvictModelResponse> done) {
  CallAsync<v1::EvictModelRequest, v1::EvictModelResponse>(
      request, timeout, std::move(done), [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->EvictModel(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::PrepareGroupAsync(const internal::PrepareGroupRequest& request,
                                         Timeout timeout,
                                         Done<internal::PrepareGroupResponse> done) {
  CallAsync<internal::PrepareGroupRequest, internal::PrepareGroupResponse>(
      request, timeout, std::move(done), [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->PrepareGroup(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::JoinGroupAsync(const internal::JoinGroupRequest& request, Timeout timeout,
                                      Done<internal::JoinGroupResponse> done) {
  CallAsync<internal::JoinGroupRequest, internal::JoinGroupResponse>(
      request, timeout, std::move(done), [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->JoinGroup(ctx, req, resp, std::move(cb));
      });
}

void GrpcWorkerClient::LeaveGroupAsync(const internal::LeaveGroupRequest& request, Timeout timeout,
                                       Done<internal::LeaveGroupResponse> done) {
  CallAsync<internal::LeaveGroupRequest, internal::LeaveGroupResponse>(
      request, timeout, std::move(done), [this](auto* ctx, auto* req, auto* resp, auto cb) {
        stub_->stub->async()->LeaveGroup(ctx, req, resp, std::move(cb));
      });
}

absl::StatusOr<internal::WorkerInfo> GrpcWorkerClient::GetInfo(Timeout timeout) {
  return CallBlocking<internal::WorkerInfo>(timeout, [this](auto* ctx, auto* resp) {
    return stub_->stub->GetInfo(ctx, internal::GetInfoRequest(), resp);
  });
}

absl::StatusOr<v1::ListModelsResponse> GrpcWorkerClient::ListModels(
    const v1::ListModelsRequest& request, Timeout timeout) {
  return CallBlocking<v1::ListModelsResponse>(
      timeout, [&](auto* ctx, auto* resp) { return stub_->stub->ListModels(ctx, request, resp); });
}

absl::StatusOr<v1::EvictModelResponse> GrpcWorkerClient::EvictModel(
    const v1::EvictModelRequest& request, Timeout timeout) {
  return CallBlocking<v1::EvictModelResponse>(
      timeout, [&](auto* ctx, auto* resp) { return stub_->stub->EvictModel(ctx, request, resp); });
}

absl::StatusOr<internal::PrepareGroupResponse> GrpcWorkerClient::PrepareGroup(
    const internal::PrepareGroupRequest& request, Timeout timeout) {
  return CallBlocking<internal::PrepareGroupResponse>(timeout, [&](auto* ctx, auto* resp) {
    return stub_->stub->PrepareGroup(ctx, request, resp);
  });
}

absl::StatusOr<internal::JoinGroupResponse> GrpcWorkerClient::JoinGroup(
    const internal::JoinGroupRequest& request, Timeout timeout) {
  return CallBlocking<internal::JoinGroupResponse>(
      timeout, [&](auto* ctx, auto* resp) { return stub_->stub->JoinGroup(ctx, request, resp); });
}

absl::StatusOr<internal::LeaveGroupResponse> GrpcWorkerClient::LeaveGroup(
    const internal::LeaveGroupRequest& request, Timeout timeout) {
  return CallBlocking<internal::LeaveGroupResponse>(
      timeout, [&](auto* ctx, auto* resp) { return stub_->stub->LeaveGroup(ctx, request, resp); });
}

}  // namespace benchd::server

namespace benchd::server {

bool WorkerAnswered(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kResourceExhausted:
      return false;
    default:
      return true;
  }
}

absl::StatusOr<std::shared_ptr<WorkerClient>> ServingWorker(const WorkerHealth& health,
                                                            const std::string& device,
                                                            const std::string& log_path) {
  if (health.state == v1::WORKER_STATE_UP && health.client) return health.client;
  switch (health.state) {
    case v1::WORKER_STATE_STARTING:
      return absl::UnavailableError(absl::StrCat(
          "the worker for ", device, " is starting",
          health.failing_to_start ? absl::StrCat(" again (the last start failed: ", health.detail,
                                                 "; see ", log_path, ")")
                                  : "",
          "; try again in a few seconds"));
    case v1::WORKER_STATE_UNRESPONSIVE:
      return absl::UnavailableError(absl::StrCat(
          "the worker for ", device, " (pid ", health.client ? health.client->pid() : 0, ") ",
          health.detail, " (stopped or hung?); see ", log_path));
    case v1::WORKER_STATE_PARKED:
      return absl::UnavailableError(absl::StrCat("the worker for ", device, " is ",
                                                 health.detail.empty() ? "parked" : health.detail));
    default:
      return absl::UnavailableError(absl::StrCat(
          "the worker for ", device, " is not running",
          health.detail.empty() ? "" : absl::StrCat(" (the last one ", health.detail, ")"),
          "; see ", log_path));
  }
}

absl::Status AcceptingJobs(const WorkerHealth& health, const std::string& device,
                           const std::string& log_path) {
  if (health.state == v1::WORKER_STATE_UNRESPONSIVE) {
    return absl::UnavailableError(absl::StrCat(
        "device: the worker for ", device, " ", health.detail,
        " (stopped or hung?); jobs for it are refused until it answers or is restarted; see ",
        log_path));
  }
  if (health.state != v1::WORKER_STATE_UP && health.failing_to_start) {
    return absl::UnavailableError(
        absl::StrCat("device: the worker for ", device, " cannot start (", health.detail,
                     "); jobs for it are refused until it does; see ", log_path));
  }
  return absl::OkStatus();
}

}  // namespace benchd::server
