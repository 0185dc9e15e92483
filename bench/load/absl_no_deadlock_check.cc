// An LD_PRELOAD shim for one experiment of bench/load (not part of benchd):
// Debian's Abseil is built without NDEBUG, so every absl::Mutex (gRPC's locks)
// runs its deadlock detection (a global graph of lock order, GraphCycles) on
// each Lock. This turns it off when the library loads, which is what one call
// in benchd's main() would do. Build and use:
//   g++ -O2 -shared -fPIC -o /tmp/absl_no_deadlock_check.so \
//       bench/load/absl_no_deadlock_check.cc -labsl_synchronization
//   python3 bench/load/load.py --daemon-env LD_PRELOAD=/tmp/absl_no_deadlock_check.so
#include "absl/synchronization/mutex.h"

__attribute__((constructor)) static void NoDeadlockCheck() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
