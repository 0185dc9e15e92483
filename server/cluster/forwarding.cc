#include "server/cluster/forwarding.h"

#include <chrono>

#include <grpcpp/channel.h>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "server/cluster/cluster_secret.h"

namespace benchd::server {
namespace {

std::string Metadata(const grpc::ServerContextBase& ctx, const char* key) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(key);
  return it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
}

std::string WithPrefix(const std::string& node, const std::string& name) {
  return name.empty() || name.find('/') != std::string::npos ? name : absl::StrCat(node, "/", name);
}

}  // namespace

absl::StatusOr<Principal> EffectiveCaller(const grpc::ServerContextBase& ctx,
                                          const Principal& caller,
                                          const std::string& cluster_secret) {
  const auto& metadata = ctx.client_metadata();
  const bool has_name = metadata.count(kOnBehalfOfKey) > 0;
  const bool has_role = metadata.count(kOnBehalfRoleKey) > 0;
  if (!has_name && !has_role) return caller;
  // The key the refusals name: the one that came (the name when both did).
  const char* key = has_name ? kOnBehalfOfKey : kOnBehalfRoleKey;
  const auto refuse = [&](const std::string& why) {
    return absl::PermissionDeniedError(
        absl::StrCat(key,
                     ": a call may say on whose behalf it comes only when another member of this "
                     "daemon's cluster forwards it; ",
                     why, "; leave the benchd-on-behalf-* metadata out"));
  };
  // Membership first: the cluster's secret (an admin token alone proves no
  // membership; anyone holding one could otherwise act as anyone).
  if (cluster_secret.empty()) return refuse("this daemon is in no cluster");
  if (auto s = CheckClusterSecret(ctx, cluster_secret); !s.ok()) {
    return refuse(absl::StrCat("this caller proved no membership (", s.message(), ")"));
  }
  if (caller.role != v1::ROLE_ADMIN) {
    return refuse(absl::StrCat("members call each other with the admin role; '", caller.name,
                               "' has ", RoleName(caller.role)));
  }
  const std::string role = Metadata(ctx, kOnBehalfRoleKey);
  Principal real{Metadata(ctx, kOnBehalfOfKey), v1::ROLE_UNSPECIFIED};
  for (v1::Role r : {v1::ROLE_READ, v1::ROLE_SUBMIT, v1::ROLE_ADMIN}) {
    if (RoleName(r) == role) real.role = r;
  }
  if (real.role == v1::ROLE_UNSPECIFIED) {
    return absl::PermissionDeniedError(absl::StrCat(kOnBehalfRoleKey, ": ", QuotedForError(role),
                                                    " is no role; expected read, submit or admin"));
  }
  return real;
}

absl::StatusOr<std::shared_ptr<v1::Bench::Stub>> Forwarder::Stub(const std::string& node) {
  auto member = cluster_->ReadyNode(node);
  if (!member.ok()) return member.status();
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<v1::Bench::Stub> stub;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& peer = peers_by_address_[member->address()];
    if (!peer.stub) {
      peer.channel = peers_->Open(member->address());
      peer.stub = v1::Bench::NewStub(peer.channel);
    }
    channel = peer.channel;
    stub = peer.stub;
  }
  // The member is READY (its heartbeats arrive), but a channel that failed
  // to reach it while it was gone is still backing off (1 s, 1.6 s, ... up
  // to minutes), failing every call with "failed to connect" until its timer
  // fires: reconnect now, and give the attempt a moment before the call.
  if (channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    grpc::experimental::ChannelResetConnectionBackoff(channel.get());
    channel->WaitForStateChange(GRPC_CHANNEL_TRANSIENT_FAILURE,
                                std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  return stub;
}

void Forwarder::Prepare(grpc::ClientContext* ctx, const Principal& caller,
                        const grpc::ServerContextBase& from) const {
  peers_->Authorize(ctx);
  ctx->AddMetadata(kOnBehalfOfKey, caller.name);
  ctx->AddMetadata(kOnBehalfRoleKey, std::string(RoleName(caller.role)));
  // The caller's deadline goes on (none for Watch and FetchArtifact streams).
  const auto deadline = from.deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    ctx->set_deadline(deadline);
  }
}

void Forwarder::Qualify(const std::string& node, v1::Job* job) {
  job->set_id(WithPrefix(node, job->id()));
  for (std::string& d : *job->mutable_devices()) d = WithPrefix(node, d);
  if (!job->spec().device().empty()) {
    job->mutable_spec()->set_device(WithPrefix(node, job->spec().device()));
  }
}

void Forwarder::Qualify(const std::string& node, v1::JobEvent* event) {
  event->set_job_id(WithPrefix(node, event->job_id()));
}

}  // namespace benchd::server
