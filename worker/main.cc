// benchd-worker: serves benchd.internal.Worker for one device on a Unix
// socket. Started and restarted by the daemon's supervisor; see worker.proto.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/torch.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/peer_checked_listener.h"
#include "worker/device.h"
#include "worker/device_info.h"
#include "worker/worker_service.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {

// Removes a socket file left by a worker that died; refuses to delete anything else.
bool RemoveStaleSocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return true;  // nothing there
  if (!S_ISSOCK(st.st_mode)) {
    std::cerr << "benchd-worker: --socket " << path << " exists and is not a socket\n";
    return false;
  }
  return unlink(path.c_str()) == 0;
}

// The socket file this worker made, to remove at exit only if it is still
// that file: a daemon killed and restarted at once starts a new worker on the
// same path while this one is still on its way out (seen in a cluster whose
// member came back within a second), and removing the new worker's socket
// would leave it unreachable.
struct SocketFile {
  dev_t dev = 0;
  ino_t ino = 0;
  bool known = false;
};
SocketFile IdentifySocket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, true};
}
void RemoveOwnSocket(const std::string& path, const SocketFile& ours) {
  const SocketFile now = IdentifySocket(path);
  if (ours.known && now.known && now.dev == ours.dev && now.ino == ours.ino) unlink(path.c_str());
}

// BENCHD_WORKER_THREADS=N sets LibTorch's intra-op threads (CPU work);
// unset keeps LibTorch's default (one per physical core).
bool ApplyThreadsFromEnv() {
  const char* env = std::getenv("BENCHD_WORKER_THREADS");
  if (env == nullptr || *env == '\0') return true;
  int n = 0;
  const std::string_view s(env);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1) {
    std::cerr << "benchd-worker: BENCHD_WORKER_THREADS: expected a positive integer, got '" << env
              << "'\n";
    return false;
  }
  torch::set_num_threads(n);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"benchd-worker: runs benchd jobs on one device (started by benchd)"};
  std::string socket_path, device_text;
  app.add_option("--socket", socket_path, "Unix socket path to listen on")->required();
  app.add_option("--device", device_text, "cpu:0 or cuda:N")->required();
  std::string artifacts_dir;
  app.add_option("--artifacts-dir", artifacts_dir,
                 "where jobs write files (parity bundles: DIR/<job id>/parity.pt); unset = none");
  CLI11_PARSE(app, argc, argv);

  // SIGTERM/SIGINT are taken by a thread of their own (sigwait): gRPC's
  // Shutdown is not async-signal-safe. Blocked before any thread starts, so
  // every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Started by benchd: end with it, even when it is killed outright (SIGTERM
  // then takes the orderly path below). The check after prctl closes the race
  // of a daemon that died before the call.
  if (const char* parent = std::getenv("BENCHD_PARENT_PID"); parent != nullptr && *parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (std::to_string(getppid()) != parent) {
      std::cerr << "benchd-worker: the daemon (pid " << parent << ") is gone; exiting\n";
      return 1;
    }
  }

  if (!ApplyThreadsFromEnv()) return 2;
  // The memory request's C++ stacks are symbolized by LibTorch when the
  // snapshot is taken. Its default mode may run addr2line over every library
  // (slow on libtorch_cuda) or use dladdr (exported symbols only: none of our
  // own functions); "fast" is its in-process ELF/DWARF reader. Set before any
  // thread starts (LibTorch reads it once); a value from the environment wins.
  setenv("TORCH_SYMBOLIZE_MODE", "fast", /*overwrite=*/0);
  // Kineto leaves CUPTI attached after a profile unless told to finalize it,
  // and every later kernel launch in this process then costs more: the
  // benchmarks a resident worker runs after a profile request would be slowed
  // (bench/profile_aftereffect.py measures it). Kineto reads this when each
  // trace ends; a value from the environment wins.
  setenv("TEARDOWN_CUPTI", "1", /*overwrite=*/0);
  auto device = benchd::worker::ParseWorkerDevice(device_text, "--device");
  if (!device.ok()) {
    std::cerr << "benchd-worker: " << device.status().message() << "\n";
    return 2;
  }
#if BENCHD_WITH_CUDA
  if (device->is_cuda()) c10::cuda::set_device(device->device.index());
#endif
  if (!RemoveStaleSocket(socket_path)) return 1;

  // Only the daemon's own user gets in (SO_PEERCRED), on top of the run
  // folder's 0700: the listener accepts, checks and hands the connection to
  // gRPC.
  auto listener = benchd::PeerCheckedListener::Listen(
      socket_path, [](const std::string& line) { std::cerr << "benchd-worker: " << line << "\n"; });
  if (!listener.ok()) {
    std::cerr << "benchd-worker: " << listener.status().message() << "\n";
    return 1;
  }
  const SocketFile own_socket = IdentifySocket(socket_path);
  benchd::worker::WorkerService service(*device, artifacts_dir);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "benchd-worker: cannot start its gRPC server\n";
    return 1;
  }
  (*listener)->Serve(server.get());

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    // A running job stops at its next step and ends its stream; the deadline
    // only matters if a step outlasts it.
    service.Stop();
    (*listener)->Stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });

  const auto& versions = benchd::worker::WorkerVersions();
  std::cerr << "benchd-worker: serving " << device->name << " (" << device->description
            << ") on unix:" << socket_path << ", pid " << getpid() << ", torch " << versions.torch()
            << ", " << torch::get_num_threads() << " threads" << std::endl;
  server->Wait();
  // Wait returned after Shutdown, so the stopper has finished or is finishing.
  stopper.join();
  RemoveOwnSocket(socket_path, own_socket);
  std::cerr << "benchd-worker: stopped" << std::endl;
  return 0;
}
