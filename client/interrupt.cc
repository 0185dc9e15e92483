#include "client/interrupt.h"

#include <csignal>

namespace benchd::client {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnInterrupt(int) {
  if (g_interrupted.exchange(true)) {
    // The second Ctrl-C: the default action (both calls are async-signal-safe).
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = false;
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_);
}

InterruptScope::~InterruptScope() { sigaction(SIGINT, &previous_, nullptr); }

const std::atomic<bool>& InterruptScope::interrupted() const { return g_interrupted; }

}  // namespace benchd::client
