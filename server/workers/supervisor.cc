#include "server/workers/supervisor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/grpcpp.h"
#include "server/core/job_state.h"
#include "server/core/metrics.h"
#include "server/core/timestamp.h"

extern char** environ;

namespace benchd::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string SafeName(const std::string& device) {
  return absl::StrReplaceAll(device, {{":", "-"}});
}

}  // namespace

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return absl::StrCat("killed by signal ", sig, " (SIG", abbrev ? abbrev : "?", ": ",
                        strsignal(sig), ")", WCOREDUMP(status) ? ", core dumped" : "");
  }
  return absl::StrCat("ended with wait status ", status);
}

Supervisor::Supervisor(Options options, std::vector<std::string> devices, Metrics* metrics)
    : options_(std::move(options)), metrics_(metrics), device_order_(devices) {
  for (const auto& d : devices) {
    auto slot = std::make_unique<Slot>();
    slot->device = d;
    slots_.emplace(d, std::move(slot));
  }
}

Supervisor::~Supervisor() { Stop(); }

std::string Supervisor::SocketPath(const std::string& device) const {
  return absl::StrCat(options_.run_dir, "/worker-", SafeName(device), ".sock");
}

std::string Supervisor::LogPath(const std::string& device) const {
  return absl::StrCat(options_.log_dir, "/worker-", SafeName(device), ".log");
}

void Supervisor::Start() {
  if (health_listener_) {
    for (const auto& d : device_order_) health_listener_(d, false);
  }
  for (auto& [device, slot] : slots_) {
    Slot* s = slot.get();
    s->thread = std::thread([this, s] { Supervise(s); });
  }
  heartbeat_ = std::thread([this] { Heartbeat(); });
}

void Supervisor::Heartbeat() {
  struct Change {
    std::string device;
    bool serving;
  };
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    std::vector<std::pair<std::shared_ptr<WorkerClient>, uint64_t>> to_ping;
    std::vector<Change> changes;
    const Clock::time_point now = Clock::now();
    for (const auto& name : device_order_) {
      Slot& slot = *slots_.at(name);
      const bool up = slot.state == State::kUp && slot.client;
      if (up) {
        if (!slot.ping_in_flight) {
          slot.ping_in_flight = true;
          ++heartbeat_calls_;
          to_ping.emplace_back(slot.client, slot.generation);
        }
        slot.unresponsive = now - slot.last_answer > options_.heartbeat_timeout;
      }
      ParkIfIdle(slot, now);
      const bool answering = up && !slot.unresponsive;
      // A parked worker, and one starting again for a job, leave the device
      // ready: parking is not a failure (a failed start is).
      const bool serving = answering || slot.state == State::kParked ||
                           (slot.state == State::kStarting && slot.woken);
      if (serving != slot.reported_serving) {
        slot.reported_serving = serving;
        changes.push_back({name, serving});
      }
      if (metrics_) {
        metrics_->SetWorkerUp(name, answering);
        metrics_->SetWorkerParked(name, slot.state == State::kParked);
      }
    }
    lock.unlock();
    for (auto& [client, generation] : to_ping) {
      client->PingAsync(options_.heartbeat_timeout,
                        [this, device = client->device(),
                         generation = generation](absl::StatusOr<internal::PingResponse> answer) {
                          OnPing(device, generation, std::move(answer));
                        });
    }
    for (const Change& c : changes) {
      fprintf(stderr, "benchd: the worker for %s %s\n", c.device.c_str(),
              c.serving ? "is serving" : "is not serving");
      if (health_listener_) health_listener_(c.device, c.serving);
    }
    lock.lock();
    cv_.wait_for(lock, options_.heartbeat_interval, [&] { return stopping_; });
  }
  cv_.wait(lock, [&] { return heartbeat_calls_ == 0; });
}

void Supervisor::ParkIfIdle(Slot& slot, Clock::time_point now) {
  if (options_.idle_exit.count() <= 0) return;
  if (slot.parking) {
    // Told to exit and still there after the grace: it will not be parked
    // cleanly, so end it (still a park: no restart follows).
    if (now - slot.parking_since > options_.park_grace && !slot.exited && slot.pid > 0) {
      kill(slot.pid, SIGKILL);
    }
    return;
  }
  if (slot.state != State::kUp || !slot.client || slot.unresponsive || slot.job_running ||
      slot.holds->load() > 0) {
    slot.busy_at = now;
    return;
  }
  if (now - slot.busy_at < options_.idle_exit) return;
  const double idle = std::chrono::duration<double>(now - slot.busy_at).count();
  slot.parking = true;
  slot.parking_since = now;
  slot.parked_detail = absl::StrFormat(
      "parked after %.1f s idle (--worker-idle-exit %g s; pid %d stopped); the next job starts it",
      idle, std::chrono::duration<double>(options_.idle_exit).count(), slot.pid);
  fprintf(stderr,
          "benchd: parking the worker for %s (pid %d): idle for %.1f s (--worker-idle-exit)\n",
          slot.device.c_str(), slot.pid, idle);
  kill(slot.pid, SIGTERM);
}

std::shared_ptr<void> Supervisor::Hold(const std::string& device, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) return nullptr;
  Slot& slot = *it->second;
  std::shared_ptr<std::atomic<int>> holds = slot.holds;
  ++*holds;
  slot.busy_at = Clock::now();
  if (slot.state == State::kParked && !slot.wake) {
    slot.wake = true;
    fprintf(stderr, "benchd: starting the parked worker for %s for %s\n", device.c_str(),
            why.c_str());
    cv_.notify_all();
  }
  // The deleter touches only the counter: a handle may outlive this object.
  return std::shared_ptr<void>(nullptr, [holds](void*) { --*holds; });
}

void Supervisor::OnPing(const std::string& device, uint64_t generation,
                        absl::StatusOr<internal::PingResponse> answer) {
  std::shared_ptr<WorkerClient> refresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& slot = *slots_.at(device);
    if (slot.generation == generation) {
      slot.ping_in_flight = false;
      if (WorkerAnswered(answer.status())) {
        const Clock::time_point now = Clock::now();
        slot.last_answer = now;
        slot.last_heartbeat = Now();
        slot.unresponsive = false;
        if (answer.ok()) slot.job_running = !answer->running_job_id().empty();
        // Free memory is asked for only while no job runs: the worker reads
        // it from the device, which a job's CUDA graph capture forbids.
        if (answer.ok() && answer->running_job_id().empty() && !slot.memory_refresh_in_flight &&
            !stopping_ && now - slot.last_memory_refresh >= options_.memory_refresh_interval &&
            slot.client) {
          slot.memory_refresh_in_flight = true;
          ++heartbeat_calls_;
          refresh = slot.client;
        }
      }
    }
  }
  if (refresh) {
    refresh->GetInfoAsync(kMemoryInfoTimeout,
                          [this, device, generation](absl::StatusOr<internal::WorkerInfo> info) {
                            OnMemoryInfo(device, generation, std::move(info));
                          });
  }
  // Last: once the count is zero Stop may return and this object go.
  std::lock_guard<std::mutex> lock(mu_);
  if (--heartbeat_calls_ == 0) cv_.notify_all();
}

void Supervisor::OnMemoryInfo(const std::string& device, uint64_t generation,
                              absl::StatusOr<internal::WorkerInfo> info) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = *slots_.at(device);
  if (slot.generation == generation) {
    slot.memory_refresh_in_flight = false;
    slot.last_memory_refresh = Clock::now();
    if (info.ok()) {
      slot.info.mutable_device()->set_free_memory_bytes(info->device().free_memory_bytes());
      slot.info.mutable_device()->set_total_memory_bytes(info->device().total_memory_bytes());
      if (metrics_) {
        metrics_->SetDeviceMemory(device, info->device().total_memory_bytes(),
                                  info->device().free_memory_bytes());
      }
    }
  }
  if (--heartbeat_calls_ == 0) cv_.notify_all();
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int WorkerThreadShare(int cpus, size_t workers) {
  return std::max(1, static_cast<int>(cpus / std::max<size_t>(1, workers)));
}

absl::StatusOr<pid_t> Supervisor::Spawn(const Slot& slot) {
  const std::string socket = SocketPath(slot.device);
  const std::string log = LogPath(slot.device);
  const std::string parent = absl::StrCat(getpid());
  std::vector<std::string> args = {options_.worker_path, "--socket", socket, "--device",
                                   slot.device};
  if (!options_.artifacts_dir.empty()) {
    args.insert(args.end(), {"--artifacts-dir", options_.artifacts_dir});
  }
  // The worker ends itself when the daemon dies (PR_SET_PDEATHSIG), even
  // when the daemon is killed outright; it learns its daemon's pid from here.
  std::vector<std::string> env_storage;
  bool threads_given = false;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    threads_given |= var.rfind("BENCHD_WORKER_THREADS=", 0) == 0;
    if (var.rfind("BENCHD_PARENT_PID=", 0) != 0) env_storage.emplace_back(*e);
  }
  env_storage.push_back("BENCHD_PARENT_PID=" + parent);
  // Each worker's share of this node's CPUs for LibTorch's intra-op threads,
  // unless the environment says otherwise: four GPU workers that each
  // started one thread per core crowded each other's launch threads, and
  // their small steps ran at the host's pace, ranks apart by up to 1.7x
  // (docs/results/ddp-h200x4.md).
  if (!threads_given) {
    env_storage.push_back(absl::StrCat("BENCHD_WORKER_THREADS=",
                                       WorkerThreadShare(UsableCpus(), device_order_.size())));
  }
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  // The worker makes its socket and artifacts under the daemon's umask (077,
  // set in main), in folders that are 0700.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The daemon blocks SIGTERM/SIGINT in all threads to sigwait for them; the
  // worker must not inherit that. Its own process group keeps a terminal's
  // Ctrl-C for the daemon, which then stops workers in order.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, options_.worker_path.c_str(), &files, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start worker '", options_.worker_path, "': ", strerror(rc)));
  }
  return pid;
}

void Supervisor::Supervise(Slot* slot) {
  auto backoff = std::chrono::milliseconds(500);
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
      // Parked: no process until a Hold wants one.
      cv_.wait(lock, [&] { return stopping_ || slot->state != State::kParked || slot->wake; });
      if (stopping_) return;
      slot->woken = slot->state == State::kParked;
      slot->wake = false;
      slot->state = State::kStarting;
      slot->exited = false;
      slot->job_running = false;
    }
    if (slot->woken) backoff = std::chrono::milliseconds(500);
    auto pid = Spawn(*slot);
    if (!pid.ok()) {
      std::unique_lock<std::mutex> lock(mu_);
      slot->last_exit = std::string(pid.status().message());
      slot->state = State::kDown;
      ++slot->failed_starts;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(5), [&] { return stopping_; });
      continue;
    }
    const Clock::time_point started = Clock::now();
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot->pid = *pid;
      generation = ++slot->generation;
    }

    // Wait for the worker to answer on its socket, or to die trying.
    std::shared_ptr<grpc::Channel> channel = WorkerChannel(SocketPath(slot->device));
    int status = 0;
    bool exited = false;
    bool ready = false;
    while (!exited && Clock::now() - started < options_.start_timeout) {
      if (waitpid(*pid, &status, WNOHANG) == *pid) {
        exited = true;
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
      }
      if (channel->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(250))) {
        ready = true;
        break;
      }
    }
    if (ready) {
      auto client =
          std::make_shared<GrpcWorkerClient>(slot->device, generation, *pid, std::move(channel));
      auto info = client->GetInfo(kStartupInfoTimeout);
      std::lock_guard<std::mutex> lock(mu_);
      if (info.ok()) {
        slot->info = *std::move(info);
        if (metrics_) {
          metrics_->SetWorkerInfo(slot->device, slot->info);
          metrics_->SetDeviceMemory(slot->device, slot->info.device().total_memory_bytes(),
                                    slot->info.device().free_memory_bytes());
        }
      }
      slot->client = std::move(client);
      slot->state = State::kUp;
      if (slot->woken) {
        fprintf(stderr, "benchd: the parked worker for %s started again in %.1f s (pid %d)\n",
                slot->device.c_str(), std::chrono::duration<double>(Clock::now() - started).count(),
                *pid);
      }
      slot->woken = false;
      slot->busy_at = Clock::now();
      slot->failed_starts = 0;
      slot->unresponsive = false;
      slot->ping_in_flight = slot->memory_refresh_in_flight = false;
      slot->last_answer = slot->last_memory_refresh = Clock::now();
      slot->last_heartbeat = Now();
      if (metrics_) metrics_->SetWorkerUp(slot->device, true);
      cv_.notify_all();
    } else if (!exited) {
      // Not answering in time (or stopping): it will not serve; end it.
      kill(*pid, SIGKILL);
    }
    if (!exited) waitpid(*pid, &status, 0);

    std::unique_lock<std::mutex> lock(mu_);
    slot->exited = true;
    slot->client.reset();
    slot->unresponsive = false;
    if (slot->parking && ready && !stopping_) {
      // Parked, not failed: no restart, no restart count, no exit listener
      // (nothing held it: no job, no group). A Hold that came while it
      // stopped starts it again at once.
      slot->parking = false;
      slot->kill_reason.clear();
      slot->state = State::kParked;
      slot->woken = false;
      slot->last_exit = absl::StrCat("parked: ", DescribeExit(status));
      fprintf(stderr, "benchd: the worker for %s is parked: pid %d %s; the next job starts it\n",
              slot->device.c_str(), *pid, DescribeExit(status).c_str());
      if (slot->holds->load() > 0) slot->wake = true;
      if (metrics_) {
        metrics_->SetWorkerUp(slot->device, false);
        metrics_->SetWorkerParked(slot->device, true);
        metrics_->SetResidentModels(slot->device, 0, 0);  // they went with it
      }
      backoff = std::chrono::milliseconds(500);
      cv_.notify_all();
      continue;
    }
    slot->parking = false;
    slot->state = State::kDown;
    slot->woken = false;
    if (!ready) ++slot->failed_starts;
    slot->last_exit = (ready || exited || stopping_)
                          ? DescribeExit(status)
                          : absl::StrCat("did not answer within ", options_.start_timeout.count(),
                                         " s and was killed");
    if (!slot->kill_reason.empty()) {
      slot->last_exit += absl::StrCat(", by benchd: ", slot->kill_reason);
      slot->kill_reason.clear();
    }
    if (metrics_) metrics_->SetWorkerUp(slot->device, false);
    cv_.notify_all();
    if (ready && exit_listener_) {
      const std::string how = slot->last_exit;
      lock.unlock();
      exit_listener_(slot->device, generation, *pid, how);
      lock.lock();
    }
    if (stopping_) return;
    ++slot->restarts;
    if (metrics_) metrics_->WorkerRestarted(slot->device);
    // A worker that stayed up a while gets a quick restart; one that keeps
    // dying at start is retried less and less often.
    if (Clock::now() - started > std::chrono::seconds(60)) backoff = std::chrono::milliseconds(500);
    cv_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(30));
  }
}

void Supervisor::Stop(std::chrono::seconds grace) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
    for (auto& [device, slot] : slots_) {
      if (slot->pid > 0 && !slot->exited) kill(slot->pid, SIGTERM);
    }
    auto all_down = [&] {
      return std::all_of(slots_.begin(), slots_.end(),
                         [](auto& kv) { return kv.second->pid == 0 || kv.second->exited; });
    };
    if (!cv_.wait_for(lock, grace, all_down)) {
      for (auto& [device, slot] : slots_) {
        if (slot->pid > 0 && !slot->exited) kill(slot->pid, SIGKILL);
      }
    }
  }
  for (auto& [device, slot] : slots_) {
    if (slot->thread.joinable()) slot->thread.join();
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

absl::StatusOr<std::shared_ptr<WorkerClient>> Supervisor::WaitUntilUp(
    const std::string& device, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) return absl::NotFoundError(absl::StrCat("no worker for device ", device));
  Slot* slot = it->second.get();
  // Not one being parked (told to exit): a call to it would fail; a Hold
  // starts the next one once it has exited.
  auto serving = [&] {
    return slot->state == State::kUp && slot->client && !slot->unresponsive && !slot->parking;
  };
  cv_.wait_for(lock, timeout, [&] { return stopping_ || serving(); });
  if (serving()) return slot->client;
  if (stopping_) return absl::UnavailableError("the daemon is stopping");
  return ServingWorker(HealthLocked(*slot), device, LogPath(device)).status();
}

WorkerHealth Supervisor::HealthLocked(const Slot& slot) const {
  WorkerHealth health;
  health.failing_to_start = slot.failed_starts > 0 && slot.state != State::kUp;
  if (slot.parking) {  // exiting to be parked: no calls to it any more
    health.state = v1::WORKER_STATE_PARKED;
    health.detail = slot.parked_detail;
    return health;
  }
  switch (slot.state) {
    case State::kUp:
      health.client = slot.client;
      if (slot.unresponsive) {
        health.state = v1::WORKER_STATE_UNRESPONSIVE;
        const double silent =
            std::chrono::duration<double>(Clock::now() - slot.last_answer).count();
        health.detail =
            absl::StrCat("has not answered its heartbeat for ", absl::StrFormat("%.1f", silent),
                         " s (bound ", options_.heartbeat_timeout.count() / 1000.0, " s)");
      } else {
        health.state = v1::WORKER_STATE_UP;
      }
      break;
    case State::kStarting:
      health.state = v1::WORKER_STATE_STARTING;
      health.detail = slot.woken ? "starting again for a job (it was parked)" : slot.last_exit;
      break;
    case State::kParked:
      health.state = v1::WORKER_STATE_PARKED;
      health.detail = slot.parked_detail;
      break;
    case State::kDown:
      health.state = v1::WORKER_STATE_DOWN;
      health.detail = slot.last_exit;
      break;
  }
  return health;
}

void Supervisor::Kill(const std::string& device, uint64_t generation, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) return;
  Slot& slot = *it->second;
  if (slot.generation != generation || slot.exited || slot.pid <= 0) return;
  fprintf(stderr, "benchd: killing the worker for %s (pid %d): %s\n", device.c_str(), slot.pid,
          why.c_str());
  slot.kill_reason = why;
  kill(slot.pid, SIGKILL);
}

WorkerHealth Supervisor::Health(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) {
    WorkerHealth none;
    none.detail = "is not a device of this daemon";
    return none;
  }
  return HealthLocked(*it->second);
}

std::string Supervisor::WaitForExit(const std::string& device, uint64_t generation,
                                    std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  if (it == slots_.end()) return "";
  Slot* slot = it->second.get();
  auto gone = [&] { return slot->generation != generation || slot->exited; };
  if (!cv_.wait_for(lock, timeout, gone)) return "";
  return slot->last_exit;
}

std::vector<v1::Device> Supervisor::Devices() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Device> out;
  for (const auto& name : device_order_) {
    const Slot& slot = *slots_.at(name);
    v1::Device d = slot.info.device();
    const WorkerHealth health = HealthLocked(slot);
    d.set_name(name);
    d.set_worker_state(health.state);
    d.set_worker_detail(health.detail);
    if (slot.last_heartbeat.seconds() > 0) *d.mutable_last_heartbeat() = slot.last_heartbeat;
    d.set_worker_pid(slot.state == State::kDown || slot.state == State::kParked ? 0 : slot.pid);
    d.set_worker_restarts(slot.restarts);
    out.push_back(std::move(d));
  }
  return out;
}

std::string Supervisor::GpuUuid(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(device);
  return it == slots_.end() ? std::string() : it->second->info.uuid();
}

std::vector<int64_t> Supervisor::WorkerPids() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> pids;
  for (const auto& [device, slot] : slots_) {
    // An incarnation that has just exited too: the driver may list it while
    // its context is torn down.
    // Not a parked one's: its pid may by now be another process's.
    if (slot->pid > 0 && slot->state != State::kParked) pids.push_back(slot->pid);
  }
  return pids;
}

v1::Versions Supervisor::WorkerVersions() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& name : device_order_) {
    const Slot& slot = *slots_.at(name);
    if (slot.info.has_versions()) return slot.info.versions();
  }
  return v1::Versions();
}

}  // namespace benchd::server
