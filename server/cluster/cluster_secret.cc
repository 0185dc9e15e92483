#include "server/cluster/cluster_secret.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/token_hash.h"

namespace benchd::server {

absl::Status CheckClusterSecret(const grpc::ServerContextBase& ctx, const std::string& secret) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kClusterSecretKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "calls between a cluster's members carry the cluster's secret, and this one came "
        "without it: is the caller a member (--cluster-secret-file or BENCHD_CLUSTER_SECRET)?");
  }
  if (secret.empty() ||
      !ConstantTimeEquals(std::string(it->second.data(), it->second.size()), secret)) {
    return absl::UnauthenticatedError(
        "the cluster secret that came with the call is not this cluster's: give every member "
        "the same --cluster-secret-file or BENCHD_CLUSTER_SECRET");
  }
  return absl::OkStatus();
}

bool RefusalLog::First(const std::string& cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.count(cause)) return false;
  if (seen_.size() >= kMaxCauses) {
    if (unlogged_++ == 0) {
      fprintf(stderr,
              "benchd: cluster: more than %zu causes of refused node-to-node calls; the "
              "others are not logged\n",
              kMaxCauses);
    }
    return false;
  }
  seen_.insert(cause);
  return true;
}

size_t RefusalLog::unlogged() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unlogged_;
}

}  // namespace benchd::server
