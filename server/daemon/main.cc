// benchd: the daemon. Its settings (server/daemon/daemon_config.h) and its
// parts, wired and stopped in order (server/daemon/daemon.h).
#include <sys/stat.h>

#include <cstdio>

#include "absl/synchronization/mutex.h"
#include "server/daemon/daemon.h"
#include "server/daemon/daemon_config.h"

int main(int argc, char** argv) {
  // Whatever the caller's umask: what the daemon and its workers (who inherit
  // it) create is for this user only: folders 0700, files 0600, sockets in a
  // 0700 folder.
  umask(077);
  // Debian's Abseil is built without NDEBUG, which leaves absl::Mutex's
  // deadlock detection on: 3-4% of the daemon's CPU under load for a check
  // meant for debug builds (docs/results/load.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchd::server::DaemonConfig config;
  if (auto exit_code = benchd::server::ParseDaemonFlags(argc, argv, &config)) return *exit_code;
  auto daemon = benchd::server::Daemon::Start(std::move(config));
  if (!daemon.ok()) {
    fprintf(stderr, "benchd: %s\n", std::string(daemon.status().message()).c_str());
    return 1;
  }
  return (*daemon)->ServeUntilStopped();
}
