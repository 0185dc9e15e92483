#include "server/cluster/node_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_id.h"
#include "common/limits.h"
#include "common/node_name.h"
#include "server/core/devices.h"
#include "server/core/grpc_status.h"

namespace benchd::server {
namespace {

using std::chrono::milliseconds;

// How long a call waits for a worker that is restarting, at most.
constexpr std::chrono::seconds kWorkerUpWait{30};
// A group's own rendezvous timeout, as a member may ask it, at most.
constexpr std::chrono::seconds kMaxGroupTimeout{3600};

// The deadline the calling node set, at most `bound`.
milliseconds Remaining(const grpc::ServerContext& ctx, milliseconds bound) {
  const auto left = ctx.deadline() - std::chrono::system_clock::now();
  if (left <= milliseconds(0) || left > bound) return bound;
  return std::chrono::duration_cast<milliseconds>(left);
}

}  // namespace

absl::StatusOr<std::string> NodeService::MemberGroup(const std::string& from,
                                                     const std::string& group,
                                                     absl::string_view field) {
  const bool ok =
      !group.empty() && group.size() <= kMaxGroupIdBytes &&
      std::all_of(group.begin(), group.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      });
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected a group id of 1..", kMaxGroupIdBytes,
                     " letters, digits, '-' or '_' as the calling member made it (g1, t3), got ",
                     QuotedForError(group)));
  }
  return absl::StrCat(from, "/", group);
}

std::string NodeService::OwnHost() const { return HostOfAddress(cluster_->options().advertise); }

absl::Status NodeService::CheckMemberHost(absl::string_view field, const std::string& host) {
  std::vector<std::string> hosts;
  const v1::ListNodesResponse table = cluster_->List();
  for (const v1::ClusterNode& node : table.nodes()) {
    if (node.state() != v1::NODE_STATE_READY) continue;
    if (HostOfAddress(node.address()) == host) return absl::OkStatus();
    hosts.push_back(HostOfAddress(node.address()));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(field, ": ", QuotedForError(host),
                   " is not the host of a READY member; a group's store is on one of ",
                   absl::StrJoin(hosts, ", ")));
}

absl::Status NodeService::CheckMember(const grpc::ServerContext& ctx, const std::string& method,
                                      const std::string& from, const std::string& device) {
  const std::string qualified = absl::StrCat("Node.", method);
  if (auto caller = auth_->CheckUnlogged(ctx, qualified); !caller.ok()) return caller.status();
  if (auto s = CheckClusterSecret(ctx, cluster_->options().secret); !s.ok()) return s;
  if (auto s = CheckNodeName("from_node", from); !s.ok()) return s;
  if (from == cluster_->options().name) {
    return absl::PermissionDeniedError(
        absl::StrCat("from_node ", from, " is this node: a node calls its own workers directly"));
  }
  if (auto member = cluster_->ReadyNode(from); !member.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "from_node ", from, " is not a READY member of this cluster: ", member.status().message()));
  }
  return CheckDeviceName(device);
}

absl::StatusOr<NodeService::Admitted> NodeService::AdmitUnlogged(const grpc::ServerContext& ctx,
                                                                 const std::string& method,
                                                                 const std::string& from,
                                                                 const std::string& device) {
  if (auto s = CheckMember(ctx, method, from, device); !s.ok()) return s;
  Admitted admitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int& calls = in_flight_[from];
    if (calls >= kMaxCallsInFlightPerMember) {
      return absl::ResourceExhaustedError(absl::StrCat(
          from, " already has ", kMaxCallsInFlightPerMember,
          " calls in flight to this node's workers; this one is refused rather than queued"));
    }
    ++calls;
  }
  admitted.slot = std::shared_ptr<void>(nullptr, [this, from](void*) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_[from] == 0) in_flight_.erase(from);
  });
  // Held for the call (a parked worker starts again for it: WaitUntilUp
  // then waits for that start).
  admitted.hold = workers_->Hold(device, absl::StrCat(from, "'s Node.", method));
  auto worker = workers_->WaitUntilUp(device, Remaining(ctx, kWorkerUpWait));
  if (!worker.ok()) return worker.status();
  admitted.worker = *std::move(worker);
  return admitted;
}

grpc::Status NodeService::Refuse(const grpc::ServerContext& ctx, const std::string& method,
                                 const std::string& from, const absl::Status& status) {
  const std::string why =
      absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  if (refusals_.First(absl::StrCat(method, " ", why))) {
    fprintf(stderr,
            "benchd: cluster: refused Node.%s from %s (from_node %s): %s (logged once per "
            "cause)\n",
            method.c_str(), ctx.peer().c_str(), QuotedForError(from).c_str(), why.c_str());
  }
  return ToGrpc(status);
}

absl::StatusOr<NodeService::Admitted> NodeService::Admit(const grpc::ServerContext& ctx,
                                                         const std::string& method,
                                                         const std::string& from,
                                                         const std::string& device) {
  auto admitted = AdmitUnlogged(ctx, method, from, device);
  // A worker that is not up is the call's answer, not a refusal.
  if (!admitted.ok() && admitted.status().code() != absl::StatusCode::kUnavailable) {
    Refuse(ctx, method, from, admitted.status());
  }
  return admitted;
}

grpc::Status NodeService::Run(grpc::ServerContext* ctx, const internal::NodeRunRequest* request,
                              grpc::ServerWriter<internal::WorkerEvent>* writer) {
  const std::string& from = request->from_node();
  auto admitted = Admit(*ctx, "Run", from, request->device());
  if (!admitted.ok()) return ToGrpc(admitted.status());
  // One rank of a group the member set up, under the member's names.
  internal::RunRequest run = request->run();
  absl::StatusOr<std::string> group =
      run.has_collective() ? MemberGroup(from, run.collective().group(), "run.collective.group")
      : run.has_ddp()
          ? MemberGroup(from, run.ddp().group(), "run.ddp.group")
          : absl::PermissionDeniedError(
                "Node.Run runs one rank of a group the calling member set up (a collective or "
                "ddp part); this request has neither: submit other jobs to this node instead");
  if (!group.ok()) return Refuse(*ctx, "Run", from, group.status());
  if (run.has_collective()) run.mutable_collective()->set_group(*group);
  if (run.has_ddp()) run.mutable_ddp()->set_group(*group);
  if (!run.job_id().empty()) {
    if (auto s = CheckJobId(run.job_id(), "run.job_id"); !s.ok()) {
      return Refuse(*ctx, "Run", from, s);
    }
    run.set_job_id(absl::StrCat(from, "/", run.job_id()));
  }
  // Known to Kill while it runs.
  uint64_t run_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_id = next_run_id_++;
    runs_.push_back(
        {run_id, request->device(), from, admitted->worker->generation(), admitted->worker->pid()});
  }
  struct Forget {
    NodeService* self;
    uint64_t id;
    ~Forget() {
      std::lock_guard<std::mutex> lock(self->mu_);
      std::erase_if(self->runs_, [this](const RunInFlight& r) { return r.id == id; });
    }
  } forget{this, run_id};
  // The calling node cancels (a cancelled job, a failed member) or goes away:
  // the worker's call is cancelled with it.
  CancelHandle cancel;
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    while (!finished.load()) {
      if (ctx->IsCancelled()) {
        cancel.Cancel();
        return;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  RunEnd end = admitted->worker->Run(
      run, cancel, [writer](const internal::WorkerEvent& e) { writer->Write(e); });
  finished = true;
  watcher.join();
  if (end.last) {
    writer->Write(*end.last);
    return grpc::Status::OK;
  }
  return ToGrpc(end.status);
}

grpc::Status NodeService::PrepareGroup(grpc::ServerContext* ctx,
                                       const internal::NodePrepareGroupRequest* request,
                                       internal::PrepareGroupResponse* response) {
  const std::string& from = request->from_node();
  auto admitted = Admit(*ctx, "PrepareGroup", from, request->device());
  if (!admitted.ok()) return ToGrpc(admitted.status());
  internal::PrepareGroupRequest prepare = request->request();
  auto group = MemberGroup(from, prepare.group(), "request.group");
  if (!group.ok()) return Refuse(*ctx, "PrepareGroup", from, group.status());
  prepare.set_group(*group);
  // The store listens where the cluster reaches this node, nowhere else.
  if (prepare.listen_host() != OwnHost()) {
    return Refuse(
        *ctx, "PrepareGroup", from,
        absl::PermissionDeniedError(absl::StrCat(
            "request.listen_host: ", QuotedForError(prepare.listen_host()),
            " is not this node's address in the cluster; a group's store listens on ", OwnHost())));
  }
  auto answer = admitted->worker->PrepareGroup(prepare, Remaining(*ctx, kPrepareGroupTimeout));
  if (answer.ok()) *response = *std::move(answer);
  return ToGrpc(answer.status());
}

grpc::Status NodeService::JoinGroup(grpc::ServerContext* ctx,
                                    const internal::NodeJoinGroupRequest* request,
                                    internal::JoinGroupResponse* response) {
  const std::string& from = request->from_node();
  auto admitted = Admit(*ctx, "JoinGroup", from, request->device());
  if (!admitted.ok()) return ToGrpc(admitted.status());
  internal::JoinGroupRequest join = request->request();
  auto group = MemberGroup(from, join.group(), "request.group");
  if (!group.ok()) return Refuse(*ctx, "JoinGroup", from, group.status());
  join.set_group(*group);
  if (join.local_host() != OwnHost()) {
    return Refuse(*ctx, "JoinGroup", from,
                  absl::PermissionDeniedError(absl::StrCat(
                      "request.local_host: ", QuotedForError(join.local_host()),
                      " is not this node's address in the cluster; Gloo binds to ", OwnHost())));
  }
  if (auto s = CheckMemberHost("request.store_host", join.store_host()); !s.ok()) {
    return Refuse(*ctx, "JoinGroup", from, s);
  }
  const double seconds =
      std::clamp(join.timeout_seconds(), 0.0, static_cast<double>(kMaxGroupTimeout.count()));
  const milliseconds bound = milliseconds(static_cast<int64_t>(seconds * 1000)) + kJoinGroupSlack;
  auto answer = admitted->worker->JoinGroup(join, Remaining(*ctx, bound));
  if (answer.ok()) {
    *response = *std::move(answer);
    // A member of a resident group is never parked: held until it leaves.
    std::lock_guard<std::mutex> lock(mu_);
    group_holds_[absl::StrCat(*group, " ", request->device())] = admitted->hold;
  }
  return ToGrpc(answer.status());
}

grpc::Status NodeService::LeaveGroup(grpc::ServerContext* ctx,
                                     const internal::NodeLeaveGroupRequest* request,
                                     internal::LeaveGroupResponse* response) {
  const std::string& from = request->from_node();
  auto admitted = Admit(*ctx, "LeaveGroup", from, request->device());
  if (!admitted.ok()) return ToGrpc(admitted.status());
  internal::LeaveGroupRequest leave = request->request();
  auto group = MemberGroup(from, leave.group(), "request.group");
  if (!group.ok()) return Refuse(*ctx, "LeaveGroup", from, group.status());
  leave.set_group(*group);
  auto answer = admitted->worker->LeaveGroup(leave, Remaining(*ctx, kLeaveGroupTimeout));
  if (answer.ok()) *response = *std::move(answer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    group_holds_.erase(absl::StrCat(*group, " ", request->device()));
  }
  return ToGrpc(answer.status());
}

grpc::Status NodeService::Kill(grpc::ServerContext* ctx, const internal::NodeKillRequest* request,
                               internal::NodeKillResponse* response) {
  // Not within the member's calls in flight: it ends one of them.
  const std::string& from = request->from_node();
  if (auto s = CheckMember(*ctx, "Kill", from, request->device()); !s.ok()) {
    return Refuse(*ctx, "Kill", from, s);
  }
  std::optional<RunInFlight> run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RunInFlight& r : runs_) {
      if (r.device == request->device() && r.from == from) run = r;
    }
  }
  if (!run) {
    return Refuse(*ctx, "Kill", from,
                  absl::FailedPreconditionError(
                      absl::StrCat("no Run of ", from, "'s is in flight on ", request->device(),
                                   ": a member kills only the worker that runs its group's rank")));
  }
  const std::string why =
      absl::StrCat("for ", from, "'s job: ", absl::CHexEscape(request->why().substr(0, 512)));
  fprintf(stderr, "benchd: cluster: killed the worker for %s (pid %d) %s\n",
          request->device().c_str(), static_cast<int>(run->pid), why.c_str());
  workers_->Kill(request->device(), run->generation, why);
  response->set_pid(run->pid);
  return grpc::Status::OK;
}

}  // namespace benchd::server
