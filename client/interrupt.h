// Ctrl-C while benchctl follows a job. The job is the daemon's and runs on
// whatever the watcher does, so the first SIGINT only stops the watch (the
// caller then says how to follow or cancel the job); a second one ends
// benchctl at once, as Ctrl-C does anywhere else.
#ifndef BENCHD_CLIENT_INTERRUPT_H_
#define BENCHD_CLIENT_INTERRUPT_H_

#include <signal.h>

#include <atomic>

namespace benchd::client {

class InterruptScope {
 public:
  // Installs the handler (one scope at a time); the destructor puts the
  // previous one back.
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Set by the first SIGINT inside the scope.
  const std::atomic<bool>& interrupted() const;

 private:
  struct sigaction previous_ {};
};

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_INTERRUPT_H_
