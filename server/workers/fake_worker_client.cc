#include "server/workers/fake_worker_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace benchd::server {

// ---------------------------------------------------------------- Gate

void Gate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

bool Gate::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return open_; });
}

bool Gate::is_open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

// ---------------------------------------------------------------- FakeRun

bool FakeRun::Send(const internal::WorkerEvent& event) {
  if (cancelled()) return false;
  on_event_(event);  // on the caller's thread, as the real client's loop does
  return true;
}

bool FakeRun::WaitForCancel(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return cancelled_; });
}

bool FakeRun::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void FakeRun::MarkCancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
}

// ---------------------------------------------------------------- events

namespace fake {

internal::WorkerEvent Step(int64_t index, double seconds) {
  internal::WorkerEvent e;
  v1::StepEvent* step = e.mutable_step();
  step->mutable_timing()->set_index(index);
  step->mutable_timing()->set_step_seconds(seconds);
  step->set_total_steps(index + 1);
  return e;
}

internal::WorkerEvent Log(const std::string& line) {
  internal::WorkerEvent e;
  e.set_log(line);
  return e;
}

internal::WorkerEvent BenchmarkResult(const std::string& device, double seconds) {
  internal::WorkerEvent e;
  v1::BenchmarkResult* r = e.mutable_result()->mutable_benchmark();
  r->set_device(device);
  r->mutable_step()->set_median(seconds);
  return e;
}

internal::WorkerEvent CollectiveResult(const std::string& torch_version) {
  internal::WorkerEvent e;
  e.mutable_result()->mutable_collective()->mutable_versions()->set_torch(torch_version);
  return e;
}

internal::WorkerEvent Failure(absl::StatusCode code, const std::string& message) {
  internal::WorkerEvent e;
  e.mutable_failure()->set_code(static_cast<int>(code));
  e.mutable_failure()->set_message(message);
  return e;
}

internal::WorkerEvent Cancelled() {
  internal::WorkerEvent e;
  e.set_cancelled(true);
  return e;
}

internal::WorkerEvent RankSize(int rank, int64_t size_bytes, std::vector<double> iteration_seconds,
                               int64_t wrong_elements, int64_t checked_elements) {
  internal::WorkerEvent e;
  internal::CollectiveRankSize* s = e.mutable_collective_size();
  s->set_rank(rank);
  s->set_size_bytes(size_bytes);
  s->set_count(size_bytes / 4);
  for (double t : iteration_seconds) s->add_iteration_seconds(t);
  s->set_wrong_elements(wrong_elements);
  s->set_checked_elements(checked_elements);
  s->set_timer("host_steady_clock");
  return e;
}

RunEnd Last(internal::WorkerEvent event) { return RunEnd{std::move(event), absl::OkStatus()}; }

RunEnd Broken(absl::Status status) { return RunEnd{std::nullopt, std::move(status)}; }

RunScript Stream(std::vector<internal::WorkerEvent> events, internal::WorkerEvent last) {
  return [events = std::move(events), last = std::move(last)](FakeRun& run) {
    for (const auto& e : events) run.Send(e);
    return Last(last);
  };
}

RunScript UntilCancelled(std::vector<internal::WorkerEvent> events, Gate* started) {
  return [events = std::move(events), started](FakeRun& run) {
    for (const auto& e : events) run.Send(e);
    if (started) started->Open();
    if (!run.WaitForCancel()) return Broken(absl::InternalError("the test never cancelled"));
    return Broken(absl::CancelledError("Cancelled"));
  };
}

}  // namespace fake

// ---------------------------------------------------------------- FakeWorkerClient

FakeWorkerClient::FakeWorkerClient(std::string device, uint64_t generation, pid_t pid)
    : WorkerClient(std::move(device), generation, pid) {
  default_run_ = [dev = this->device()](FakeRun& run) {
    run.Send(fake::Step(0));
    return fake::Last(fake::BenchmarkResult(dev));
  };
  internal::WorkerInfo info;
  info.mutable_device()->set_name(this->device());
  info.mutable_device()->set_total_memory_bytes(int64_t{80} << 30);
  info.mutable_device()->set_free_memory_bytes(int64_t{70} << 30);
  info.set_pid(pid);
  get_info.Return(info);
  internal::PrepareGroupResponse prepared;
  prepared.set_store_host("127.0.0.1");
  prepared.set_store_port(29500);
  prepare_group.Return(prepared);
  internal::JoinGroupResponse joined;
  joined.set_pid(pid);
  joined.set_setup_seconds(0.25);
  join_group.Return(joined);
  internal::LeaveGroupResponse left;
  left.set_found(true);
  leave_group.Return(left);
}

FakeWorkerClient::~FakeWorkerClient() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(answering_);
  }
  for (auto& t : threads) {
    // The last owner may let go of this client inside a callback that runs
    // on one of these threads; that one ends by itself.
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else {
      t.join();
    }
  }
}

void FakeWorkerClient::QueueRun(RunScript script) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_.push_back(std::move(script));
}

void FakeWorkerClient::SetDefaultRun(RunScript script) {
  std::lock_guard<std::mutex> lock(mu_);
  default_run_ = std::move(script);
}

std::vector<internal::RunRequest> FakeWorkerClient::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

bool FakeWorkerClient::WaitForRuns(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return runs_.size() >= n; });
}

bool FakeWorkerClient::WaitForRunsDone(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return runs_done_ >= n; });
}

int FakeWorkerClient::cancels_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancels_seen_;
}

RunEnd FakeWorkerClient::Run(const internal::RunRequest& request, CancelHandle& cancel,
                             const EventCallback& on_event) {
  RunScript script;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs_.push_back(request);
    if (!queued_.empty()) {
      script = std::move(queued_.front());
      queued_.pop_front();
    } else {
      script = default_run_;
    }
    cv_.notify_all();
  }
  FakeRun run(request, on_event);
  const uint64_t registration = cancel.Register([&run] { run.MarkCancelled(); });
  RunEnd end = script(run);
  cancel.Unregister(registration);
  std::lock_guard<std::mutex> lock(mu_);
  if (run.cancelled()) {
    ++cancels_seen_;
    // A cancelled gRPC call reads nothing more: whatever the script ended
    // with, the caller sees the cancel.
    end = fake::Broken(absl::CancelledError("Cancelled"));
  }
  ++runs_done_;
  cv_.notify_all();
  return end;
}

template <typename Req, typename Resp>
void FakeWorkerClient::Answer(FakeUnary<Req, Resp>& method, const Req& request, Timeout timeout,
                              Done<Resp> done) {
  std::lock_guard<std::mutex> lock(mu_);
  answering_.emplace_back(
      [&method, request, timeout, done = std::move(done)] { done(method.Call(request, timeout)); });
}

void FakeWorkerClient::GetInfoAsync(Timeout timeout, Done<internal::WorkerInfo> done) {
  Answer(get_info, internal::GetInfoRequest(), timeout, std::move(done));
}

void FakeWorkerClient::PingAsync(Timeout timeout, Done<internal::PingResponse> done) {
  Answer(ping, internal::PingRequest(), timeout, std::move(done));
}

void FakeWorkerClient::ListModelsAsync(const v1::ListModelsRequest& request, Timeout timeout,
                                       Done<v1::ListModelsResponse> done) {
  Answer(list_models, request, timeout, std::move(done));
}

void FakeWorkerClient::EvictModelAsync(const v1::EvictModelRequest& request, Timeout timeout,
                                       Done<v1::EvictModelResponse> done) {
  Answer(evict_model, request, timeout, std::move(done));
}

void FakeWorkerClient::PrepareGroupAsync(const internal::PrepareGroupRequest& request,
                                         Timeout timeout,
                                         Done<internal::PrepareGroupResponse> done) {
  Answer(prepare_group, request, timeout, std::move(done));
}

void FakeWorkerClient::JoinGroupAsync(const internal::JoinGroupRequest& request, Timeout timeout,
                                      Done<internal::JoinGroupResponse> done) {
  Answer(join_group, request, timeout, std::move(done));
}

void FakeWorkerClient::LeaveGroupAsync(const internal::LeaveGroupRequest& request, Timeout timeout,
                                       Done<internal::LeaveGroupResponse> done) {
  Answer(leave_group, request, timeout, std::move(done));
}

// ---------------------------------------------------------------- FakeWorkers

FakeWorkers::FakeWorkers(std::vector<std::string> devices) : devices_(std::move(devices)) {
  for (size_t i = 0; i < devices_.size(); ++i) slots_[devices_[i]].index = static_cast<int>(i);
}

std::shared_ptr<FakeWorkerClient> FakeWorkers::Up(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.at(device);
  ++slot.generation;
  const pid_t pid = static_cast<pid_t>(1000 + 100 * slot.index + slot.generation);
  slot.client = std::make_shared<FakeWorkerClient>(device, slot.generation, pid);
  slot.up = true;
  slot.unresponsive.clear();
  slot.failing_start.clear();
  slot.parked.clear();
  cv_.notify_all();
  return slot.client;
}

void FakeWorkers::UpAll() {
  for (const auto& d : devices_) Up(d);
}

void FakeWorkers::Exit(const std::string& device, const std::string& how) {
  uint64_t generation;
  pid_t pid;
  ExitListener listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = slots_.at(device);
    if (!slot.up) return;
    slot.up = false;
    ++slot.restarts;
    slot.exits[slot.generation] = how;
    generation = slot.generation;
    pid = slot.client->pid();
    listener = listener_;
    cv_.notify_all();
  }
  if (listener) listener(device, generation, pid, how);
}

void FakeWorkers::SetUnresponsive(const std::string& device, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.at(device).unresponsive = detail;
  cv_.notify_all();
}

void FakeWorkers::FailStarts(const std::string& device, const std::string& how) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.at(device);
  slot.up = false;
  slot.parked.clear();
  slot.failing_start = how;
  cv_.notify_all();
}

void FakeWorkers::Park(const std::string& device, const std::string& detail,
                       std::function<void()> on_wake) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.at(device);
  slot.up = false;
  slot.parked = detail;
  slot.on_wake = std::move(on_wake);
  cv_.notify_all();
}

int FakeWorkers::holds(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.at(device).holds->load();
}

int FakeWorkers::wakes(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.at(device).wakes;
}

std::shared_ptr<void> FakeWorkers::Hold(const std::string& device, const std::string& /*why*/) {
  std::function<void()> on_wake;
  bool wake = false;
  std::shared_ptr<std::atomic<int>> holds;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(device);
    if (it == slots_.end()) return nullptr;
    Slot& slot = it->second;
    holds = slot.holds;
    ++*holds;
    if (!slot.parked.empty()) {
      wake = true;
      ++slot.wakes;
      slot.parked.clear();
      on_wake = std::move(slot.on_wake);
    }
  }
  if (wake) {
    if (on_wake) {
      on_wake();
    } else {
      Up(device);
    }
  }
  return std::shared_ptr<void>(nullptr, [holds](void*) { --*holds; });
}

void FakeWorkers::Kill(const std::string& device, uint64_t generation, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kills_.push_back(absl::StrCat(device, " ", generation, ": ", why));
    const Slot& slot = slots_.at(device);
    if (!slot.up || slot.generation != generation) return;
  }
  Exit(device, absl::StrCat(fake::kKilledExit, ", by benchd: ", why));
}

std::vector<std::string> FakeWorkers::kills() {
  std::lock_guard<std::mutex> lock(mu_);
  return kills_;
}

WorkerHealth FakeWorkers::Health(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  const Slot& slot = slots_.at(device);
  WorkerHealth health;
  if (slot.up) {
    health.client = slot.client;
    health.state = slot.unresponsive.empty() ? v1::WORKER_STATE_UP : v1::WORKER_STATE_UNRESPONSIVE;
    health.detail = slot.unresponsive;
  } else if (!slot.parked.empty()) {
    health.state = v1::WORKER_STATE_PARKED;
    health.detail = slot.parked;
  } else {
    health.failing_to_start = !slot.failing_start.empty();
    health.detail = slot.failing_start;
  }
  return health;
}

std::shared_ptr<FakeWorkerClient> FakeWorkers::client(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.at(device).client;
}

void FakeWorkers::SetExitListener(ExitListener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
}

absl::StatusOr<std::shared_ptr<WorkerClient>> FakeWorkers::WaitUntilUp(
    const std::string& device, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) return absl::NotFoundError(absl::StrCat("no worker for device ", device));
  Slot& slot = it->second;
  auto serving = [&] { return slot.up && slot.unresponsive.empty(); };
  cv_.wait_for(lock, timeout, serving);
  if (serving()) return std::shared_ptr<WorkerClient>(slot.client);
  return absl::UnavailableError(absl::StrCat("the worker for ", device, " is not running"));
}

std::string FakeWorkers::WaitForExit(const std::string& device, uint64_t generation,
                                     std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_.at(device);
  if (!cv_.wait_for(lock, timeout, [&] { return slot.exits.count(generation) > 0; })) return "";
  return slot.exits.at(generation);
}

void FakeWorkers::SetTotalMemory(const std::string& device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.at(device).total_memory_bytes = bytes;
}

std::vector<v1::Device> FakeWorkers::Devices() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Device> out;
  for (const auto& d : devices_) {
    const Slot& slot = slots_.at(d);
    v1::Device device;
    device.set_name(d);
    device.set_worker_state(!slot.parked.empty()        ? v1::WORKER_STATE_PARKED
                            : !slot.up                  ? v1::WORKER_STATE_DOWN
                            : slot.unresponsive.empty() ? v1::WORKER_STATE_UP
                                                        : v1::WORKER_STATE_UNRESPONSIVE);
    device.set_worker_pid(slot.up ? slot.client->pid() : 0);
    device.set_worker_restarts(slot.restarts);
    device.set_total_memory_bytes(slot.total_memory_bytes);
    out.push_back(std::move(device));
  }
  return out;
}

v1::Versions FakeWorkers::WorkerVersions() {
  v1::Versions v;
  v.set_torch("fake-torch");
  return v;
}

std::string FakeWorkers::LogPath(const std::string& device) const {
  return absl::StrCat("/fake/logs/worker-", absl::StrReplaceAll(device, {{":", "-"}}), ".log");
}

}  // namespace benchd::server
