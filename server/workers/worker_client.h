// The daemon's seam to its workers: WorkerClient is the only code that calls
// benchd.internal.Worker (proto/benchd/internal/worker.proto), and Workers is
// how the job manager, the collective job, the group registry and the
// service find a device's WorkerClient. Supervisor implements Workers over
// real processes and GrpcWorkerClient over their Unix sockets; tests use
// FakeWorkers and FakeWorkerClient (server/workers/fake_worker_client.h), in-process.
//
// Unary calls come in two forms. The async form takes a completion callback
// and never blocks: a gRPC server thread can start it and finish its reactor
// from the callback. The blocking form waits for the same call; use it on
// threads that may wait (dispatchers, the supervisor, group set-up). Never
// wait for an async form's callback on a gRPC thread: the callback may need
// that very thread.
// Every unary call takes its own deadline; Run has none (a job may run for
// hours) and ends early only through its CancelHandle.
#ifndef BENCHD_SERVER_WORKERS_WORKER_CLIENT_H_
#define BENCHD_SERVER_WORKERS_WORKER_CLIENT_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
template <class R>
class ClientReaderInterface;
}  // namespace grpc

namespace benchd::server {

// Deadlines of the daemon's unary calls to a worker. A worker answers these
// from memory in milliseconds; only EvictModel frees device memory, and only
// JoinGroup waits for other processes (the group's own timeout, plus this).
inline constexpr std::chrono::seconds kStartupInfoTimeout{30};  // first GetInfo of a new worker
inline constexpr std::chrono::seconds kMemoryInfoTimeout{
    2};  // the supervisor's free-memory refresh
inline constexpr std::chrono::seconds kListModelsTimeout{5};
inline constexpr std::chrono::seconds kEvictModelTimeout{30};
inline constexpr std::chrono::seconds kPrepareGroupTimeout{30};
inline constexpr std::chrono::seconds kJoinGroupSlack{30};
inline constexpr std::chrono::seconds kLeaveGroupTimeout{10};

// Async unary calls in flight to one worker incarnation, at most: past this a
// call fails at once (RESOURCE_EXHAUSTED naming the device) rather than pile
// up behind a worker that stopped answering. Each answers in milliseconds
// from a healthy worker, so 16 at once is already a worker in trouble.
inline constexpr int kMaxUnaryCallsInFlight = 16;

// Cancels the Run calls registered with it, now and later: a call that
// registers after Cancel is cancelled at once. One handle may serve several
// calls (a collective's members). Thread-safe.
class CancelHandle {
 public:
  CancelHandle() = default;
  CancelHandle(const CancelHandle&) = delete;
  CancelHandle& operator=(const CancelHandle&) = delete;

  void Cancel();
  bool cancelled() const;

  // For WorkerClient implementations: runs `on_cancel` at Cancel, or at once
  // when already cancelled, until Unregister(the returned id) returns. It
  // runs under the handle's lock, so after Unregister nothing calls it any
  // more (the call it cancels may then be destroyed); keep it short and do
  // not call back into the handle from it.
  uint64_t Register(std::function<void()> on_cancel);
  void Unregister(uint64_t id);

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> on_cancel_;
};

// A Run stream's last event: the result, a failure or cancelled.
bool IsLastWorkerEvent(const internal::WorkerEvent& event);

struct RunEnd;
// The daemon's one loop over a Run stream, a worker's own or another
// member's passing one through (RemoteWorkerClient): every event before the
// last to `on_event`, the last kept; then the call is finished. `who` names
// the other end in "<who> ended the stream without a final event".
RunEnd ReadRunStream(grpc::ClientContext& context,
                     grpc::ClientReaderInterface<internal::WorkerEvent>& reader,
                     const std::function<void(const internal::WorkerEvent&)>& on_event,
                     const std::string& who);

// How a Run stream ended.
struct RunEnd {
  // The worker's last event (result, failure or cancelled) when it sent one;
  // status is then OK.
  std::optional<internal::WorkerEvent> last;
  // Without a last event, why the stream ended as gRPC says: CANCELLED after
  // a cancel, UNAVAILABLE when the worker went away, ...
  absl::Status status;
};

// One incarnation of one device's worker (its generation counts the starts
// of that device's worker; a restarted worker is a new WorkerClient).
class WorkerClient {
 public:
  template <typename T>
  using Done = std::function<void(absl::StatusOr<T>)>;
  using EventCallback = std::function<void(const internal::WorkerEvent&)>;
  using Timeout = std::chrono::milliseconds;

  virtual ~WorkerClient() = default;
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  const std::string& device() const { return device_; }
  uint64_t generation() const { return generation_; }
  pid_t pid() const { return pid_; }

  // Runs a job: calls `on_event` (on this thread) with every event before the
  // last one (steps, logs, collective sizes) and returns the last one, or how
  // the stream broke. `cancel` ends the call (the worker sees it and stops at
  // its next step): Run then returns at once, CANCELLED with no last event
  // unless that had already come. The daemon's one loop over WorkerEvents.
  virtual RunEnd Run(const internal::RunRequest& request, CancelHandle& cancel,
                     const EventCallback& on_event) = 0;

  // The async forms: `done` runs exactly once, on another thread (a gRPC
  // thread for the real client), with the answer or the call's status
  // (DEADLINE_EXCEEDED past `timeout`, UNAVAILABLE for a worker gone, or the
  // worker's own error), its message as gRPC gives it.
  virtual void GetInfoAsync(Timeout timeout, Done<internal::WorkerInfo> done) = 0;
  // The supervisor's heartbeat (answered from the worker's memory).
  virtual void PingAsync(Timeout timeout, Done<internal::PingResponse> done) = 0;
  virtual void ListModelsAsync(const v1::ListModelsRequest& request, Timeout timeout,
                               Done<v1::ListModelsResponse> done) = 0;
  virtual void EvictModelAsync(const v1::EvictModelRequest& request, Timeout timeout,
                               Done<v1::EvictModelResponse> done) = 0;
  virtual void PrepareGroupAsync(const internal::PrepareGroupRequest& request, Timeout timeout,
                                 Done<internal::PrepareGroupResponse> done) = 0;
  virtual void JoinGroupAsync(const internal::JoinGroupRequest& request, Timeout timeout,
                              Done<internal::JoinGroupResponse> done) = 0;
  virtual void LeaveGroupAsync(const internal::LeaveGroupRequest& request, Timeout timeout,
                               Done<internal::LeaveGroupResponse> done) = 0;

  // The blocking forms: the same calls, waited for on the calling thread.
  // They never wait on gRPC's callback threads (the real client uses the
  // synchronous stub); only threads that may wait call them (dispatchers,
  // group set-up and teardown), never a gRPC server thread.
  // By default (fakes): the async form, waited for.
  virtual absl::StatusOr<internal::WorkerInfo> GetInfo(Timeout timeout);
  absl::StatusOr<internal::PingResponse> Ping(Timeout timeout);
  virtual absl::StatusOr<v1::ListModelsResponse> ListModels(const v1::ListModelsRequest& request,
                                                            Timeout timeout);
  virtual absl::StatusOr<v1::EvictModelResponse> EvictModel(const v1::EvictModelRequest& request,
                                                            Timeout timeout);
  virtual absl::StatusOr<internal::PrepareGroupResponse> PrepareGroup(
      const internal::PrepareGroupRequest& request, Timeout timeout);
  virtual absl::StatusOr<internal::JoinGroupResponse> JoinGroup(
      const internal::JoinGroupRequest& request, Timeout timeout);
  virtual absl::StatusOr<internal::LeaveGroupResponse> LeaveGroup(
      const internal::LeaveGroupRequest& request, Timeout timeout);

 protected:
  WorkerClient(std::string device, uint64_t generation, pid_t pid)
      : device_(std::move(device)), generation_(generation), pid_(pid) {}

 private:
  const std::string device_;
  const uint64_t generation_;
  const pid_t pid_;
};

// The real client: the worker's gRPC stub over `channel` (its Unix socket).
// Async forms use the stub's callback API, blocking forms its synchronous
// API; Run reads the stream on the calling thread.
class GrpcWorkerClient final : public WorkerClient {
 public:
  GrpcWorkerClient(std::string device, uint64_t generation, pid_t pid,
                   std::shared_ptr<grpc::Channel> channel);
  ~GrpcWorkerClient() override;

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
  absl::StatusOr<internal::WorkerInfo> GetInfo(Timeout timeout) override;
  absl::StatusOr<v1::ListModelsResponse> ListModels(const v1::ListModelsRequest& request,
                                                    Timeout timeout) override;
  absl::StatusOr<v1::EvictModelResponse> EvictModel(const v1::EvictModelRequest& request,
                                                    Timeout timeout) override;
  absl::StatusOr<internal::PrepareGroupResponse> PrepareGroup(
      const internal::PrepareGroupRequest& request, Timeout timeout) override;
  absl::StatusOr<internal::JoinGroupResponse> JoinGroup(const internal::JoinGroupRequest& request,
                                                        Timeout timeout) override;
  absl::StatusOr<internal::LeaveGroupResponse> LeaveGroup(
      const internal::LeaveGroupRequest& request, Timeout timeout) override;

 private:
  struct Stub;  // the generated stub, kept out of this header
  // One async unary call: admitted under kMaxUnaryCallsInFlight, then started.
  template <typename Req, typename Resp, typename Start>
  void CallAsync(const Req& request, Timeout timeout, Done<Resp> done, Start start);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  // Shared with the calls, which may end after this client is dropped.
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
};

// A channel to the worker that listens on the Unix socket `socket_path`,
// taking answers as large as a long run's result.
std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& socket_path);

// Where one device's worker stands: what GetNodeInfo, the health service,
// Submit and the calls that need a worker go by.
struct WorkerHealth {
  // STARTING, UP, UNRESPONSIVE (up, but its heartbeat has gone unanswered
  // past the supervisor's bound), DOWN, or PARKED (stopped on purpose after
  // --worker-idle-exit of idleness; a Hold starts it again).
  v1::WorkerState state = v1::WORKER_STATE_DOWN;
  std::shared_ptr<WorkerClient> client;  // while UP or UNRESPONSIVE
  // Why it is not UP, for messages: "exited with code 1", "has not answered
  // its heartbeat for 12.0 s"; "" when UP.
  std::string detail;
  // Its last start failed (it never answered) and it is being retried.
  bool failing_to_start = false;
};

// Whether a call's status came from the worker process itself (OK, or its
// own error, e.g. UNIMPLEMENTED from an older worker): it is alive. Not
// DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED, or our own RESOURCE_EXHAUSTED.
bool WorkerAnswered(const absl::Status& status);

// The client of `device`'s worker when it is UP, else UNAVAILABLE naming the
// device, its state and why (with its log), for calls that need the worker now.
absl::StatusOr<std::shared_ptr<WorkerClient>> ServingWorker(const WorkerHealth& health,
                                                            const std::string& device,
                                                            const std::string& log_path);
// OK unless jobs for `device` would only wait on a worker that cannot serve
// them: one failing to start, or one not answering. A worker that is starting
// or restarting after an exit accepts (its jobs wait for it).
absl::Status AcceptingJobs(const WorkerHealth& health, const std::string& device,
                           const std::string& log_path);

// The workers of this node, as the rest of the daemon sees them. Supervisor
// implements it over processes; FakeWorkers in tests.
class Workers {
 public:
  virtual ~Workers() = default;

  // The client of `device`'s worker once it is UP (answering, heartbeat
  // included), or UNAVAILABLE after `timeout` naming why not.
  virtual absl::StatusOr<std::shared_ptr<WorkerClient>> WaitUntilUp(
      const std::string& device, std::chrono::milliseconds timeout) = 0;
  // After a failed call to incarnation `generation`: waits up to `timeout`
  // for it to exit and says how it ended ("killed by signal 9 (SIGKILL:
  // Killed)"), or "" if it is still running.
  virtual std::string WaitForExit(const std::string& device, uint64_t generation,
                                  std::chrono::milliseconds timeout) = 0;
  // Where `device`'s worker stands now, without waiting.
  virtual WorkerHealth Health(const std::string& device) = 0;
  // Kills incarnation `generation` of `device`'s worker (SIGKILL: a stopped
  // or hung worker answers nothing else) if it still runs; the supervisor
  // restarts it, and its exit says `why` ("killed by benchd: …").
  virtual void Kill(const std::string& device, uint64_t generation, const std::string& why) = 0;
  // Every device with its worker's state, pid and restarts.
  virtual std::vector<v1::Device> Devices() = 0;
  // Versions as the first worker that came up reports them (torch, CUDA, ...).
  virtual v1::Versions WorkerVersions() = 0;
  // The worker's log file (stdout and stderr), for messages that point there.
  virtual std::string LogPath(const std::string& device) const = 0;
  // Claims `device`'s worker while the returned handle lives (a job from its
  // dispatch to its end, a resident group for its life, a call on its
  // models): where idle workers are parked (--worker-idle-exit), a held
  // worker is never parked, and a parked one is started again for the
  // holder, who waits for it with WaitUntilUp. `why` names the holder in the
  // daemon's log. nullptr where nothing is ever parked (the default).
  virtual std::shared_ptr<void> Hold(const std::string& /*device*/, const std::string& /*why*/) {
    return nullptr;
  }

  // In a cluster (server/cluster/cluster_workers.h) a request may name another
  // member's device ("node1/cpu:0"). CanonicalDevice is the name the daemon
  // keeps for `device` ("node0/cpu:0" on node0 is "cpu:0"); RemoteDevices
  // the devices of the other READY members; NodeHost the address of
  // `device`'s node that the other nodes reach ("" outside a cluster).
  virtual std::string CanonicalDevice(const std::string& device) { return device; }
  virtual std::vector<std::string> RemoteDevices() { return {}; }
  virtual std::string NodeHost(const std::string& /*device*/) { return ""; }
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_WORKERS_WORKER_CLIENT_H_
