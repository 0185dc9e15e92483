#include "server/cluster/cluster_service.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "server/core/grpc_status.h"

namespace benchd::server {

grpc::ServerUnaryReactor* ClusterService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                    const internal::HeartbeatRequest* request,
                                                    internal::HeartbeatResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  absl::Status status = auth_->CheckUnlogged(*ctx, "Cluster.Heartbeat").status();
  if (status.ok()) status = CheckClusterSecret(*ctx, cluster_->options().secret);
  absl::StatusOr<internal::HeartbeatResponse> answer =
      status.ok() ? cluster_->OnHeartbeat(*request, PeerCertificateSubject(*ctx))
                  : absl::StatusOr<internal::HeartbeatResponse>(status);
  if (answer.ok()) {
    *response = *std::move(answer);
  } else {
    // A refused member retries every second: one line per cause, with the
    // caller's address and what it claimed to be.
    const std::string why = absl::StrCat(absl::StatusCodeToString(answer.status().code()), ": ",
                                         answer.status().message());
    if (refusals_.First(why)) {
      // What the caller claimed, escaped and cut short: it is not checked yet.
      const std::string claimed =
          absl::StrCat(QuotedForError(request->node().name()), ", rank ", request->node().rank(),
                       ", at ", QuotedForError(request->node().address()));
      fprintf(stderr,
              "benchd: cluster: refused Cluster.Heartbeat from %s (%s): %s (logged once per "
              "cause)\n",
              ctx->peer().c_str(), claimed.c_str(), why.c_str());
    }
  }
  reactor->Finish(ToGrpc(answer.status()));
  return reactor;
}

}  // namespace benchd::server
