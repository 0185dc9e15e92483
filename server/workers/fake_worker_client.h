// In-process stand-ins for the workers, for unit tests of what calls them
// (JobManager, the collective job, GroupRegistry, BenchService): FakeWorkers
// plays the Supervisor (workers up, exits, restarts) and FakeWorkerClient one
// worker incarnation, with scripted Run streams and unary answers, every
// request recorded. No processes, no sockets. Test-only (benchd_server_testing).
#ifndef BENCHD_SERVER_WORKERS_FAKE_WORKER_CLIENT_H_
#define BENCHD_SERVER_WORKERS_FAKE_WORKER_CLIENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/workers/worker_client.h"

namespace benchd::server {

inline constexpr std::chrono::seconds kFakeWait{10};  // how long a test waits for anything

// A one-way switch a test or a script waits on.
class Gate {
 public:
  void Open();
  bool Wait(std::chrono::milliseconds timeout = kFakeWait);  // true once open
  bool is_open() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What one scripted Run call sees: the request, a way to stream events to the
// daemon's loop, and the daemon's cancel.
class FakeRun {
 public:
  FakeRun(const internal::RunRequest& request, const WorkerClient::EventCallback& on_event)
      : request_(request), on_event_(on_event) {}

  const internal::RunRequest& request() const { return request_; }
  // Hands `event` to the caller's on_event; once the call is cancelled it is
  // dropped and false returned, as a cancelled gRPC stream reads nothing more.
  bool Send(const internal::WorkerEvent& event);
  // True once the caller has cancelled the call; false after `timeout`.
  bool WaitForCancel(std::chrono::milliseconds timeout = kFakeWait);
  bool cancelled() const;

  void MarkCancelled();  // for FakeWorkerClient

 private:
  const internal::RunRequest& request_;
  const WorkerClient::EventCallback& on_event_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
};

// A Run call's behaviour: stream, wait, and say how the stream ends.
using RunScript = std::function<RunEnd(FakeRun&)>;

// Events and endings for scripts.
namespace fake {
// How a worker the kernel's SIGKILL ended exits, as the supervisor words it.
inline constexpr char kKilledExit[] = "killed by signal 9 (SIGKILL: Killed)";
internal::WorkerEvent Step(int64_t index, double seconds = 0.01);
internal::WorkerEvent Log(const std::string& line);
// A benchmark result on `device` (its step median = `seconds`).
internal::WorkerEvent BenchmarkResult(const std::string& device, double seconds = 0.01);
internal::WorkerEvent CollectiveResult(const std::string& torch_version = "fake-torch");
internal::WorkerEvent Failure(absl::StatusCode code, const std::string& message);
internal::WorkerEvent Cancelled();
internal::WorkerEvent RankSize(int rank, int64_t size_bytes, std::vector<double> iteration_seconds,
                               int64_t wrong_elements = 0, int64_t checked_elements = 0);
RunEnd Last(internal::WorkerEvent event);
// The stream broke without a last event (a worker that died: UNAVAILABLE).
RunEnd Broken(absl::Status status = absl::UnavailableError("Socket closed"));

// Sends `events`, then ends with `last`.
RunScript Stream(std::vector<internal::WorkerEvent> events, internal::WorkerEvent last);
// Sends `events`, opens `started` (if any), then waits for the caller's
// cancel and ends as a cancelled gRPC call does (CANCELLED, no last event).
RunScript UntilCancelled(std::vector<internal::WorkerEvent> events = {}, Gate* started = nullptr);
}  // namespace fake

// One unary method of a fake worker: its answer (a function of the request)
// and every call it got. Thread-safe.
template <typename Req, typename Resp>
class FakeUnary {
 public:
  using Answer = std::function<absl::StatusOr<Resp>(const Req&)>;

  void Set(Answer answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }
  void Return(Resp response) {
    Set([response](const Req&) -> absl::StatusOr<Resp> { return response; });
  }
  void Fail(absl::Status status) {
    Set([status](const Req&) -> absl::StatusOr<Resp> { return status; });
  }
  // As a worker that does not answer within the call's deadline: the call
  // ends as gRPC ends it then (at once here; the deadline asked for is in
  // timeouts()).
  void MissDeadline() { Fail(absl::DeadlineExceededError("Deadline Exceeded")); }

  std::vector<Req> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::chrono::milliseconds> timeouts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timeouts_;
  }
  size_t calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.size();
  }
  // True once `n` calls have come (answered or not).
  bool WaitForCalls(size_t n, std::chrono::milliseconds timeout = kFakeWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
  }

  // For FakeWorkerClient: records the call and answers it.
  absl::StatusOr<Resp> Call(const Req& request, std::chrono::milliseconds timeout) {
    Answer answer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
      timeouts_.push_back(timeout);
      answer = answer_;
      cv_.notify_all();
    }
    return answer ? answer(request) : absl::StatusOr<Resp>(Resp());
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Answer answer_;
  std::vector<Req> requests_;
  std::vector<std::chrono::milliseconds> timeouts_;
};

// One incarnation of a worker, scripted. Unary calls answer on a thread of
// their own (never on the caller's), as gRPC's callbacks do. By default Run
// streams one step and a benchmark result, and the unary calls answer as a
// healthy idle worker (no models, a group store on 127.0.0.1:29500, joins
// with this worker's pid).
class FakeWorkerClient final : public WorkerClient {
 public:
  FakeWorkerClient(std::string device, uint64_t generation, pid_t pid);
  ~FakeWorkerClient() override;

  // The next Run call runs `script` (queued in order); calls beyond the
  // queue run the default script.
  void QueueRun(RunScript script);
  void SetDefaultRun(RunScript script);
  std::vector<internal::RunRequest> runs() const;
  // True once `n` Run calls have started.
  bool WaitForRuns(size_t n, std::chrono::milliseconds timeout = kFakeWait);
  // True once `n` Run calls have returned to their caller.
  bool WaitForRunsDone(size_t n, std::chrono::milliseconds timeout = kFakeWait);
  // Run calls the caller cancelled while they ran.
  int cancels_seen() const;

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

  FakeUnary<internal::GetInfoRequest, internal::WorkerInfo> get_info;
  FakeUnary<internal::PingRequest, internal::PingResponse> ping;
  FakeUnary<v1::ListModelsRequest, v1::ListModelsResponse> list_models;
  FakeUnary<v1::EvictModelRequest, v1::EvictModelResponse> evict_model;
  FakeUnary<internal::PrepareGroupRequest, internal::PrepareGroupResponse> prepare_group;
  FakeUnary<internal::JoinGroupRequest, internal::JoinGroupResponse> join_group;
  FakeUnary<internal::LeaveGroupRequest, internal::LeaveGroupResponse> leave_group;

 private:
  template <typename Req, typename Resp>
  void Answer(FakeUnary<Req, Resp>& method, const Req& request, Timeout timeout, Done<Resp> done);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RunScript> queued_;
  RunScript default_run_;
  std::vector<internal::RunRequest> runs_;
  int cancels_seen_ = 0;
  size_t runs_done_ = 0;
  std::vector<std::thread> answering_;  // unary calls' threads, joined at the end
};

// The workers of a node, in-process: each device's worker is down until the
// test brings it Up, and ends when the test says so (Exit), which calls the
// exit listener as the Supervisor does.
class FakeWorkers final : public Workers {
 public:
  using ExitListener = std::function<void(const std::string& device, uint64_t generation, pid_t pid,
                                          const std::string& how)>;

  explicit FakeWorkers(std::vector<std::string> devices);

  // A new incarnation of `device`'s worker (the next generation; pid
  // 1000 + 100 x the device's index + generation) is up; returns its client.
  std::shared_ptr<FakeWorkerClient> Up(const std::string& device);
  // Up on every device.
  void UpAll();
  // The current incarnation of `device` ended `how` ("killed by signal 9
  // (SIGKILL: Killed)"): down, WaitForExit on it answers `how`, and the exit
  // listener runs (on this thread, no lock held).
  void Exit(const std::string& device, const std::string& how);
  // The current incarnation stops answering its heartbeat (`detail` says
  // since when), or (`detail` empty) answers again.
  void SetUnresponsive(const std::string& device, const std::string& detail);
  // `device`'s worker is down and its starts fail (`how`), until the next Up.
  void FailStarts(const std::string& device, const std::string& how);
  // The device's total memory as Devices() reports it (the supervisor's
  // figure comes from the worker's GetInfo); 0, unknown, until set.
  void SetTotalMemory(const std::string& device, int64_t bytes);
  // `device`'s worker is parked (--worker-idle-exit): not up, PARKED with
  // `detail`. A Hold then counts a wake and, unless `on_wake` is set, brings
  // the next incarnation Up at once; `on_wake` (called with no lock held)
  // decides instead (e.g. FailStarts, or Up later from another thread).
  void Park(const std::string& device, const std::string& detail,
            std::function<void()> on_wake = nullptr);
  // Holds taken on `device` and not yet released; wakes of parked workers.
  int holds(const std::string& device);
  int wakes(const std::string& device);
  // The current (or last) incarnation's client; nullptr before the first Up.
  std::shared_ptr<FakeWorkerClient> client(const std::string& device);
  void SetExitListener(ExitListener listener);

  absl::StatusOr<std::shared_ptr<WorkerClient>> WaitUntilUp(
      const std::string& device, std::chrono::milliseconds timeout) override;
  std::string WaitForExit(const std::string& device, uint64_t generation,
                          std::chrono::milliseconds timeout) override;
  WorkerHealth Health(const std::string& device) override;
  // As the supervisor: that incarnation exits "killed by signal 9 (SIGKILL:
  // Killed), by benchd: <why>" (through Exit); kills() lists the calls.
  void Kill(const std::string& device, uint64_t generation, const std::string& why) override;
  std::vector<std::string> kills();
  std::vector<v1::Device> Devices() override;
  v1::Versions WorkerVersions() override;
  std::string LogPath(const std::string& device) const override;
  std::shared_ptr<void> Hold(const std::string& device, const std::string& why) override;

 private:
  struct Slot {
    int index = 0;
    bool up = false;
    std::string unresponsive;   // why, while up but not answering
    std::string failing_start;  // how its starts fail, while down
    uint64_t generation = 0;
    int restarts = 0;
    int64_t total_memory_bytes = 0;
    std::string parked;  // why, while parked
    std::function<void()> on_wake;
    std::shared_ptr<std::atomic<int>> holds = std::make_shared<std::atomic<int>>(0);
    int wakes = 0;
    std::shared_ptr<FakeWorkerClient> client;
    std::map<uint64_t, std::string> exits;  // generation -> how it ended
  };

  const std::vector<std::string> devices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Slot> slots_;
  ExitListener listener_;
  std::vector<std::string> kills_;  // "<device> <generation>: <why>"
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_WORKERS_FAKE_WORKER_CLIENT_H_
