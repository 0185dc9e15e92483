// Starts one benchd-worker process per device, watches it, and restarts it
// when it dies. Workers hold LibTorch, CUDA contexts and resident models; the
// daemon holds none of that, so a crash there costs a restart, not the daemon.
#ifndef BENCHD_SERVER_SUPERVISOR_H_
#define BENCHD_SERVER_SUPERVISOR_H_

#include <sys/types.h>

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
#include "benchd/internal/worker.grpc.pb.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::server {

class Metrics;

// A connection to one incarnation of a worker. `generation` counts starts.
struct WorkerHandle {
  std::string device;
  uint64_t generation = 0;
  pid_t pid = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<internal::Worker::Stub> stub;
};

// "exited with code 1", "killed by signal 9 (SIGKILL: Killed)".
std::string DescribeExit(int wait_status);

class Supervisor {
 public:
  struct Options {
    std::string worker_path;
    std::string run_dir;  // sockets
    std::string log_dir;  // worker-<device>.log
    std::chrono::seconds start_timeout{180};
    std::string artifacts_dir;  // files jobs write (parity bundles); "" = none
  };
  Supervisor(Options options, std::vector<std::string> devices, Metrics* metrics);
  ~Supervisor();

  void Start();
  // SIGTERM to every worker, SIGKILL to those still there after `grace`.
  void Stop(std::chrono::seconds grace = std::chrono::seconds(10));

  // The worker of `device` once it answers, or UNAVAILABLE after `timeout`
  // naming how its last incarnation ended.
  absl::StatusOr<std::shared_ptr<WorkerHandle>> WaitUntilUp(const std::string& device,
                                                            std::chrono::milliseconds timeout);
  // After a failed call to incarnation `generation`: waits up to `timeout` for
  // it to exit and says how it ended, or "" if it is still running.
  std::string WaitForExit(const std::string& device, uint64_t generation,
                          std::chrono::milliseconds timeout);
  // Every device with its worker's state, pid and restarts.
  std::vector<v1::Device> Devices();
  // Handles of the workers that are up now.
  std::vector<std::shared_ptr<WorkerHandle>> UpWorkers();
  // Versions as the first worker that is up reports them (torch, CUDA, ...).
  v1::Versions WorkerVersions();
  std::string LogPath(const std::string& device) const;
  // Called (on the supervisor's thread, no lock held) each time a worker that
  // had come up ends: device, its generation and pid, and how it ended
  // (DescribeExit). Set before Start.
  using ExitListener = std::function<void(const std::string& device, uint64_t generation, pid_t pid,
                                          const std::string& how)>;
  void SetExitListener(ExitListener listener) { exit_listener_ = std::move(listener); }

 private:
  enum class State { kStarting, kUp, kDown };
  struct Slot {
    std::string device;
    State state = State::kDown;
    pid_t pid = 0;
    uint64_t generation = 0;
    int restarts = 0;
    std::string last_exit;  // how the last incarnation ended
    bool exited = false;    // the current generation has exited
    std::shared_ptr<WorkerHandle> handle;
    internal::WorkerInfo info;
    std::thread thread;
  };

  void Supervise(Slot* slot);
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
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_SUPERVISOR_H_
