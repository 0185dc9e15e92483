// How a member of a cluster proves it is one: every call from one daemon to
// another (heartbeats, the Node service, forwarded calls) carries the
// cluster's secret (ClusterOptions::secret, LoadClusterSecret) as metadata,
// and the internal services (Cluster, Node) take no call without it. The
// secret travels as a bearer token does: inside TLS, or on a loopback or
// --insecure plaintext port (docs/security.md "Cluster").
#ifndef BENCHD_SERVER_CLUSTER_CLUSTER_SECRET_H_
#define BENCHD_SERVER_CLUSTER_CLUSTER_SECRET_H_

#include <mutex>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"

namespace benchd::server {

inline constexpr const char* kClusterSecretKey = "benchd-cluster-secret";

// OK when the call carries `secret`; UNAUTHENTICATED saying what is missing
// otherwise (compared in time that does not depend on where they differ).
absl::Status CheckClusterSecret(const grpc::ServerContextBase& ctx, const std::string& secret);

// A refusal logged once per cause, not once per call: a member refused every
// second (or a caller retrying) leaves one line per distinct reason. At most
// kMaxCauses causes are remembered; past them one line says so and the rest
// are counted only.
class RefusalLog {
 public:
  static constexpr size_t kMaxCauses = 64;
  // True the first time `cause` is seen (the caller logs it then).
  bool First(const std::string& cause);
  size_t unlogged() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> seen_;
  size_t unlogged_ = 0;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_CLUSTER_SECRET_H_
