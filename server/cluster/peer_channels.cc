#include "server/cluster/peer_channels.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "server/cluster/cluster_secret.h"

namespace benchd::server {

std::shared_ptr<grpc::Channel> PeerChannels::Open(const std::string& address) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  AddChannelArgs(security_, &args);
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(security_), args);
}

void PeerChannels::Authorize(grpc::ClientContext* ctx) const {
  if (!security_.token.empty()) {
    ctx->AddMetadata(kAuthorizationKey, AuthorizationValue(security_.token));
  }
  if (!cluster_secret_.empty()) ctx->AddMetadata(kClusterSecretKey, cluster_secret_);
}

std::string PeerChannels::Describe() const {
  std::string tls = !security_.tls                     ? "plaintext"
                    : security_.pem_root_certs.empty() ? "TLS (system CAs)"
                                                       : "TLS (its CA)";
  if (security_.tls && !security_.pem_cert_chain.empty())
    absl::StrAppend(&tls, " with a client certificate");
  return absl::StrCat(tls, security_.token.empty() ? ", no token" : ", a bearer token",
                      cluster_secret_.empty() ? "" : ", the cluster secret");
}

}  // namespace benchd::server
