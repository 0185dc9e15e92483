// Starts one benchd-worker process per device, watches it, and restarts it
// when it dies. Workers hold LibTorch, CUDA contexts and resident models; the
// daemon holds none of that, so a crash there costs a restart, not the daemon.
#ifndef BENCHD_SERVER_WORKERS_SUPERVISOR_H_
#define BENCHD_SERVER_WORKERS_SUPERVISOR_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class Metrics;

// "exited with code 1", "killed by signal 9 (SIGKILL: Killed)".
std::string DescribeExit(int wait_status);

// The CPUs this process may run on (its affinity mask; at least 1).
int UsableCpus();
// A worker's intra-op threads when BENCHD_WORKER_THREADS is not set: an equal
// share of `cpus` among `workers`, at least 1.
int WorkerThreadShare(int cpus, size_t workers);

// The real Workers: processes, and a GrpcWorkerClient for each incarnation
// that answers on its socket.
class Supervisor final : public Workers {
 public:
  struct Options {
    std::string worker_path;
    std::string run_dir;  // sockets
    std::string log_dir;  // worker-<device>.log
    std::chrono::seconds start_timeout{180};
    std::string artifacts_dir;  // files jobs write (parity bundles); "" = none
    // Every worker that is up is pinged this often; one whose pings have gone
    // unanswered for heartbeat_timeout is UNRESPONSIVE until one is answered.
    // So a hung worker shows within heartbeat_timeout + heartbeat_interval.
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds heartbeat_timeout{10000};
    // While idle, a worker's free memory is refreshed this often.
    std::chrono::milliseconds memory_refresh_interval{5000};
    // --worker-idle-exit: a worker idle this long (no hold, no job in its
    // heartbeat) is stopped and PARKED, not restarted, until a Hold starts
    // it again. 0 = never (workers stay resident).
    std::chrono::milliseconds idle_exit{0};
    // How long a worker told to park (SIGTERM) may take before SIGKILL.
    std::chrono::milliseconds park_grace{10000};
  };
  Supervisor(Options options, std::vector<std::string> devices, Metrics* metrics);
  ~Supervisor() override;

  void Start();
  // SIGTERM to every worker, SIGKILL to those still there after `grace`.
  void Stop(std::chrono::seconds grace = std::chrono::seconds(10));

  // Workers (server/workers/worker_client.h).
  absl::StatusOr<std::shared_ptr<WorkerClient>> WaitUntilUp(
      const std::string& device, std::chrono::milliseconds timeout) override;
  std::string WaitForExit(const std::string& device, uint64_t generation,
                          std::chrono::milliseconds timeout) override;
  WorkerHealth Health(const std::string& device) override;
  void Kill(const std::string& device, uint64_t generation, const std::string& why) override;
  std::vector<v1::Device> Devices() override;
  v1::Versions WorkerVersions() override;
  std::string LogPath(const std::string& device) const override;
  // Keeps `device`'s worker from being parked while the handle lives, and
  // starts a parked one again (the caller waits with WaitUntilUp). The
  // handle may outlive the supervisor.
  std::shared_ptr<void> Hold(const std::string& device, const std::string& why) override;

  // The GPU UUID `device`'s worker reported when it came up ("" before that,
  // and on a CPU), and the pids of every device's latest worker process: what
  // --gpu-sharing when-idle tells benchd's own processes on a GPU by.
  std::string GpuUuid(const std::string& device);
  std::vector<int64_t> WorkerPids();

  // Called (on the supervisor's thread, no lock held) each time a worker that
  // had come up ends: device, its generation and pid, and how it ended
  // (DescribeExit). Set before Start.
  using ExitListener = std::function<void(const std::string& device, uint64_t generation, pid_t pid,
                                          const std::string& how)>;
  void SetExitListener(ExitListener listener) { exit_listener_ = std::move(listener); }

  // Called (on the heartbeat thread, no lock held) when a device's worker
  // starts or stops serving (UP, versus anything else), and once per device
  // at Start (not serving). Set before Start.
  using HealthListener = std::function<void(const std::string& device, bool serving)>;
  void SetHealthListener(HealthListener listener) { health_listener_ = std::move(listener); }

 private:
  // kParked: stopped on purpose after idle_exit of idleness; not restarted
  // until a Hold wakes it.
  enum class State { kStarting, kUp, kDown, kParked };
  struct Slot {
    std::string device;
    State state = State::kDown;
    pid_t pid = 0;
    uint64_t generation = 0;
    int restarts = 0;
    std::string last_exit;                 // how the last incarnation ended
    bool exited = false;                   // the current generation has exited
    std::shared_ptr<WorkerClient> client;  // while up
    internal::WorkerInfo info;
    std::thread thread;
    // Heartbeat (see Options): guarded by mu_.
    std::chrono::steady_clock::time_point last_answer;  // ping, or coming up
    google::protobuf::Timestamp last_heartbeat;         // the same, as wall time
    std::chrono::steady_clock::time_point last_memory_refresh;
    bool ping_in_flight = false;
    bool memory_refresh_in_flight = false;
    bool unresponsive = false;
    bool reported_serving = false;  // what the health listener heard last
    int failed_starts = 0;          // starts in a row that never answered
    std::string kill_reason;        // why benchd killed this incarnation, if it did
    // Parking (Options::idle_exit), guarded by mu_ except `holds`, which a
    // handle's deleter decrements without the supervisor.
    std::shared_ptr<std::atomic<int>> holds = std::make_shared<std::atomic<int>>(0);
    bool job_running = false;                       // the last ping named a job
    std::chrono::steady_clock::time_point busy_at;  // last seen held, running or starting
    bool parking = false;                           // told to exit (SIGTERM) to be parked
    std::chrono::steady_clock::time_point parking_since;
    bool wake = false;          // a Hold asked a parked worker to start
    bool woken = false;         // this start wakes a parked worker
    std::string parked_detail;  // why it is parked, while it is
  };

  void Supervise(Slot* slot);
  // The heartbeat thread: pings, marks silent workers UNRESPONSIVE, tells the
  // health listener and the metrics about changes.
  void Heartbeat();
  void OnPing(const std::string& device, uint64_t generation,
              absl::StatusOr<internal::PingResponse> answer);
  void OnMemoryInfo(const std::string& device, uint64_t generation,
                    absl::StatusOr<internal::WorkerInfo> info);
  WorkerHealth HealthLocked(const Slot& slot) const;
  // With mu_ held, from the heartbeat: parks `slot`'s worker (SIGTERM) once it
  // has been idle for Options::idle_exit; SIGKILL past park_grace.
  void ParkIfIdle(Slot& slot, std::chrono::steady_clock::time_point now);
  absl::StatusOr<pid_t> Spawn(const Slot& slot);
  std::string SocketPath(const std::string& device) const;

  const Options options_;
  Metrics* const metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<Slot>> slots_;
  std::vector<std::string> device_order_;
  ExitListener exit_listener_;
  HealthListener health_listener_;
  std::thread heartbeat_;
  int heartbeat_calls_ = 0;  // pings and memory refreshes in flight; Stop waits for none
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_WORKERS_SUPERVISOR_H_
