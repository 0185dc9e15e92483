#include "common/peer_checked_listener.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server_posix.h"

namespace benchd {

absl::StatusOr<std::unique_ptr<PeerCheckedListener>> PeerCheckedListener::Listen(
    const std::string& path, std::function<void(const std::string&)> log) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 64) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", std::strerror(e)));
  }
  return std::unique_ptr<PeerCheckedListener>(new PeerCheckedListener(fd, path, std::move(log)));
}

PeerCheckedListener::~PeerCheckedListener() {
  Stop();
  close(fd_);
}

void PeerCheckedListener::Serve(grpc::Server* server) {
  acceptor_ = std::thread([this, server] { AcceptLoop(server); });
}

void PeerCheckedListener::Stop() {
  if (stopping_.exchange(true)) return;
  shutdown(fd_, SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
}

void PeerCheckedListener::AcceptLoop(grpc::Server* server) {
  const uid_t self = geteuid();
  while (!stopping_.load()) {
    // Non-blocking: gRPC's endpoint expects it.
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (stopping_.load() || errno == EINVAL || errno == EBADF) return;
      if (log_) log_(absl::StrCat("accept on ", path_, ": ", std::strerror(errno)));
      usleep(10000);  // e.g. EMFILE: do not spin
      continue;
    }
    ucred peer{};
    socklen_t size = sizeof(peer);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != self) {
      ++refused_;
      if (log_) {
        log_(absl::StrCat("refused a connection on ", path_, " from uid ", peer.uid, " (pid ",
                          peer.pid, "): only uid ", self, " may connect"));
      }
      close(conn);
      continue;
    }
    grpc::AddInsecureChannelFromFd(server, conn);  // the server owns conn now
  }
}

}  // namespace benchd
