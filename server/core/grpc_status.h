// absl::Status <-> grpc::Status at the daemon's gRPC boundaries: the code and
// message carried over unchanged (both use google.rpc.Code's values).
#ifndef BENCHD_SERVER_CORE_GRPC_STATUS_H_
#define BENCHD_SERVER_CORE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace benchd::server {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_GRPC_STATUS_H_
