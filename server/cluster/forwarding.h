// Any member of a cluster accepts any request (docs/architecture.md
// "Cluster"): a job for another member's device ("node1/cuda:0") is
// submitted there, a job id "node1/7" is that member's job 7 for GetJob,
// Watch, CancelJob and the artifacts, and ListJobs for "node1/cuda:0" lists
// that member's jobs on it. The caller's role is checked here
// first; the call goes on with this node's own credentials (admin on the
// member) and says on whose behalf, so the member records the real
// submitter and applies the same cancel rule.
#ifndef BENCHD_SERVER_CLUSTER_FORWARDING_H_
#define BENCHD_SERVER_CLUSTER_FORWARDING_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/peer_channels.h"
#include "server/security/auth.h"

namespace benchd::server {

// Metadata a forwarding node adds: the caller it checked. Honoured only on a
// call from another member of this daemon's cluster: one that carries the
// cluster's secret (cluster_secret.h) and, where callers are checked, comes
// with the admin role (docs/security.md "Cluster").
inline constexpr const char* kOnBehalfOfKey = "benchd-on-behalf-of";
inline constexpr const char* kOnBehalfRoleKey = "benchd-on-behalf-role";

// Who the call is really from: `caller` when the call carries no on-behalf
// metadata, else the forwarding member's caller. `cluster_secret` is this
// daemon's cluster's ("" outside a cluster: no caller is a member). A call
// with the metadata from a caller that is not a member (no secret, another
// one, or a role below admin), or naming no role, is refused:
// PERMISSION_DENIED naming the key, never run as the caller itself.
absl::StatusOr<Principal> EffectiveCaller(const grpc::ServerContextBase& ctx,
                                          const Principal& caller,
                                          const std::string& cluster_secret);

class Forwarder {
 public:
  Forwarder(Cluster* cluster, const PeerChannels* peers) : cluster_(cluster), peers_(peers) {}

  // Another member's node and the name it gives the thing ("node1/7" ->
  // {"node1", "7"}); nullopt for this node's own (Cluster::OtherMember).
  std::optional<Cluster::Qualified> Split(const std::string& qualified) const {
    return cluster_->OtherMember(qualified);
  }

  // A stub to `node` when it is READY; NOT_FOUND / UNAVAILABLE naming why.
  absl::StatusOr<std::shared_ptr<v1::Bench::Stub>> Stub(const std::string& node);
  // A context for a forwarded call: credentials, the caller, the deadline.
  void Prepare(grpc::ClientContext* ctx, const Principal& caller,
               const grpc::ServerContextBase& from) const;

  // What the member answered, in this node's names: the job id and devices
  // get the member's prefix.
  static void Qualify(const std::string& node, v1::Job* job);
  static void Qualify(const std::string& node, v1::JobEvent* event);

 private:
  Cluster* const cluster_;
  const PeerChannels* const peers_;
  std::mutex mu_;
  struct Peer {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<v1::Bench::Stub> stub;
  };
  std::map<std::string, Peer> peers_by_address_;
};

// A server stream that passes on a member's stream, one message at a time
// (one write in flight, one read in flight), each through `transform`.
template <typename Resp>
class ForwardedStream final : public grpc::ServerWriteReactor<Resp>,
                              public grpc::ClientReadReactor<Resp> {
 public:
  using Transform = std::function<void(Resp*)>;
  // `start` starts the client call on this reactor (stub->async()->Watch(...)).
  template <typename Start>
  ForwardedStream(Start start, Transform transform, std::unique_ptr<grpc::ClientContext> ctx)
      : ctx_(std::move(ctx)), transform_(std::move(transform)) {
    start(ctx_.get(), static_cast<grpc::ClientReadReactor<Resp>*>(this));
    grpc::ClientReadReactor<Resp>::StartRead(&message_);
    grpc::ClientReadReactor<Resp>::StartCall();
  }
  // The member's side.
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone(status) follows
    if (transform_) transform_(&message_);
    grpc::ServerWriteReactor<Resp>::StartWrite(&message_);
  }
  void OnDone(const grpc::Status& status) override {
    grpc::ServerWriteReactor<Resp>::Finish(status);
  }
  // The caller's side.
  void OnWriteDone(bool ok) override {
    if (!ok) {
      ctx_->TryCancel();
      return;
    }
    grpc::ClientReadReactor<Resp>::StartRead(&message_);
  }
  void OnCancel() override { ctx_->TryCancel(); }
  void OnDone() override { delete this; }  // after Finish, so after the client's OnDone

 private:
  std::unique_ptr<grpc::ClientContext> ctx_;
  Transform transform_;
  Resp message_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CLUSTER_FORWARDING_H_
