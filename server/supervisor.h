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
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "server/worker_client.h"

namespace benchd::server {

class Metrics;

// "exited with code 1", "killed by signal 9 (SIGKILL: Killed)".
std::string DescribeExit(int wait_status);

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
  };
  Supervisor(Options options, std::vector<std::string> devices, Metrics* metrics);
  ~Supervisor() override;

  void Start();
  // SIGTERM to every worker, SIGKILL to those still there after `grace`.
  void Stop(std::chrono::seconds grace = std::chrono::seconds(10));

  // Workers (server/worker_client.h).
  absl::StatusOr<std::shared_ptr<WorkerClient>> WaitUntilUp(
      const std::string& device, std::chrono::milliseconds timeout) override;
  std::string WaitForExit(const std::string& device, uint64_t generation,
                          std::chrono::milliseconds timeout) override;
  std::vector<std::shared_ptr<WorkerClient>> UpWorkers() override;
  std::vector<v1::Device> Devices() override;
  v1::Versions WorkerVersions() override;
  std::string LogPath(const std::string& device) const override;

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
    std::string last_exit;                 // how the last incarnation ended
    bool exited = false;                   // the current generation has exited
    std::shared_ptr<WorkerClient> client;  // while up
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
