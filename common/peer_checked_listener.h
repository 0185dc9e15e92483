// A Unix socket that lets in only this process's own user. The worker's
// socket already sits in the daemon's 0700 run folder; this is the second
// wall: each connection's peer credentials (SO_PEERCRED) are checked before
// gRPC sees it, and a connection from another uid is closed and logged.
// gRPC 1.51 has no such hook on its own listeners, so the accepting is ours
// and each accepted socket is handed over with AddInsecureChannelFromFd.
#ifndef BENCHD_COMMON_PEER_CHECKED_LISTENER_H_
#define BENCHD_COMMON_PEER_CHECKED_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"

namespace benchd {

class PeerCheckedListener {
 public:
  // Binds and listens on `path` (mode 0600). `log` gets one line per refusal.
  static absl::StatusOr<std::unique_ptr<PeerCheckedListener>> Listen(
      const std::string& path, std::function<void(const std::string&)> log);
  ~PeerCheckedListener();  // Stop()s

  // Accepts on a thread of its own, handing every connection from this
  // process's effective uid to `server` (built with no listening port).
  void Serve(grpc::Server* server);
  // Stops accepting; connections already handed over stay with the server.
  void Stop();

  int refused() const { return refused_.load(); }

 private:
  PeerCheckedListener(int fd, std::string path, std::function<void(const std::string&)> log)
      : fd_(fd), path_(std::move(path)), log_(std::move(log)) {}
  void AcceptLoop(grpc::Server* server);

  const int fd_;
  const std::string path_;
  const std::function<void(const std::string&)> log_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> refused_{0};
  std::thread acceptor_;
};

}  // namespace benchd

#endif  // BENCHD_COMMON_PEER_CHECKED_LISTENER_H_
