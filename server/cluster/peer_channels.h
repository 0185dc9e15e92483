// Channels from this daemon to the other members of its cluster. Node-to-node
// calls take the same credentials as benchctl (common/credentials.h: the
// BENCHD_TOKEN_FILE / BENCHD_TLS_* variables or the client config file), so a
// cluster is secured exactly as its clients are; and every call carries the
// cluster's secret (cluster_secret.h), which makes the caller a member.
#ifndef BENCHD_SERVER_CLUSTER_PEER_CHANNELS_H_
#define BENCHD_SERVER_CLUSTER_PEER_CHANNELS_H_

#include <memory>
#include <string>

#include "common/credentials.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace benchd::server {

class PeerChannels {
 public:
  explicit PeerChannels(ChannelSecurity security = {}, std::string cluster_secret = "")
      : security_(std::move(security)), cluster_secret_(std::move(cluster_secret)) {}

  // A channel to the daemon at `address` (host:port), taking answers as large
  // as a long run's result.
  std::shared_ptr<grpc::Channel> Open(const std::string& address) const;
  // Adds the bearer token, when there is one, and the cluster's secret to a
  // call's metadata.
  void Authorize(grpc::ClientContext* ctx) const;
  // "TLS (CA file), token" / "plaintext, no token": for the start-up log.
  std::string Describe() const;

 private:
  ChannelSecurity security_;
  std::string cluster_secret_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_PEER_CHANNELS_H_
