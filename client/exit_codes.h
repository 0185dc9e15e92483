// benchctl's exit codes: the contract scripts rely on, printed in --help.
#ifndef BENCHD_CLIENT_EXIT_CODES_H_
#define BENCHD_CLIENT_EXIT_CODES_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

enum ExitCode : int {
  kExitOk = 0,           // the command (and the job, where one is watched) succeeded
  kExitJobFailed = 1,    // the job failed, was cancelled or interrupted
  kExitUsage = 2,        // bad flags, or the daemon answered INVALID_ARGUMENT
  kExitUnreachable = 3,  // no connection to the daemon (UNAVAILABLE, or none within --timeout)
  kExitRpcError = 4,     // any other RPC error: NOT_FOUND, UNIMPLEMENTED, DEADLINE_EXCEEDED, ...
  // Ctrl-C stopped the watch; the job runs on (128 + SIGINT, as shells say).
  kExitWatchInterrupted = 130,
};

// The --help footer.
inline constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  success\n"
    "  1  the job failed, was cancelled or was interrupted (watch, get, submit --watch)\n"
    "  2  usage error: bad flags, or the daemon refused the request (INVALID_ARGUMENT)\n"
    "  3  daemon unreachable: no connection within --timeout, or UNAVAILABLE\n"
    "  4  any other RPC error (NOT_FOUND, UNAUTHENTICATED, PERMISSION_DENIED,\n"
    "     DEADLINE_EXCEEDED, ...)\n"
    "  130  Ctrl-C stopped watching; the job is still running (benchctl watch ID, cancel ID)\n"
    "\n"
    "Environment:\n"
    "  BENCHD_ADDRESS  default for --address (else the client config's, else 127.0.0.1:7531)\n";

ExitCode ExitCodeForRpc(grpc::StatusCode code);
// absl and gRPC share the canonical code numbers; benchctl carries absl::Status.
ExitCode ExitCodeForStatus(const absl::Status& status);
// SUCCEEDED is 0; FAILED, CANCELLED, INTERRUPTED are 1; anything not terminal
// is 4 (a watch that ended early is an RPC problem, not a job verdict).
ExitCode ExitCodeForJobState(v1::JobState state);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_EXIT_CODES_H_
