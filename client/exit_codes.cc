#include "client/exit_codes.h"

namespace benchd::client {

ExitCode ExitCodeForRpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnreachable;
    default:
      return kExitRpcError;
  }
}

ExitCode ExitCodeForStatus(const absl::Status& status) {
  return ExitCodeForRpc(static_cast<grpc::StatusCode>(status.code()));
}

ExitCode ExitCodeForJobState(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_SUCCEEDED:
      return kExitOk;
    case v1::JOB_STATE_FAILED:
    case v1::JOB_STATE_CANCELLED:
    case v1::JOB_STATE_INTERRUPTED:
      return kExitJobFailed;
    default:
      return kExitRpcError;
  }
}

}  // namespace benchd::client
