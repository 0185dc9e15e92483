#include "server/cluster/cluster.h"

#include <cstdio>
#include <random>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/limits.h"
#include "common/node_name.h"
#include "grpcpp/client_context.h"
#include "server/core/devices.h"
#include "server/core/grpc_status.h"
#include "server/core/job_state.h"
#include "server/core/timestamp.h"
#include "server/workers/worker_client.h"

namespace benchd::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string NewIncarnation() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

void Log(const std::string& line) { fprintf(stderr, "benchd: cluster: %s\n", line.c_str()); }

}  // namespace

Cluster::Cluster(ClusterOptions options, DescribeSelf describe, const PeerChannels& peers)
    : options_(std::move(options)),
      describe_(std::move(describe)),
      incarnation_(NewIncarnation()),
      peers_(peers) {
  members_.resize(options_.enabled ? options_.nodes : 1);
  for (int rank = 0; rank < static_cast<int>(members_.size()); ++rank) {
    v1::ClusterNode& node = members_[rank].node;
    node.set_rank(rank);
    node.set_state(v1::NODE_STATE_WAITING);
    node.set_detail("not heard from yet");
  }
  if (options_.enabled) {
    members_[0].node.set_address(options_.coordinator);
    if (options_.rank != 0) {
      coordinator_stub_ = internal::Cluster::NewStub(peers_.Open(options_.coordinator));
    }
  }
}

Cluster::~Cluster() { Stop(); }

void Cluster::SetNodeLostListener(NodeLostListener listener) { on_lost_ = std::move(listener); }

void Cluster::Start() {
  if (!options_.enabled) return;
  coordinator_answered_ = Clock::now();  // the bound starts now, not at the epoch
  thread_ = std::thread([this] { coordinator() ? WatchLoop() : HeartbeatLoop(); });
}

void Cluster::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

v1::ClusterNode Cluster::Self() {
  v1::ClusterNode self = describe_();
  self.set_name(options_.enabled ? options_.name : "node0");
  self.set_rank(options_.rank);
  self.set_address(options_.advertise);
  self.set_state(v1::NODE_STATE_READY);
  self.clear_detail();
  *self.mutable_last_heartbeat() = Now();
  return self;
}

std::function<void()> Cluster::MarkLost(int rank, const std::string& why) {
  v1::ClusterNode& node = members_[rank].node;
  if (node.state() == v1::NODE_STATE_LOST) return nullptr;
  node.set_state(v1::NODE_STATE_LOST);
  node.set_detail(why);
  Log(absl::StrCat(node.name().empty() ? "the coordinator" : node.name(), " (rank ", rank, ", ",
                   node.address(), ") is LOST: ", why));
  // A node never heard from has no name yet, hence no groups.
  if (!on_lost_ || node.name().empty()) return nullptr;
  return [listener = on_lost_, name = node.name(), why] { listener(name, why); };
}

absl::StatusOr<internal::HeartbeatResponse> Cluster::OnHeartbeat(
    const internal::HeartbeatRequest& request, const std::string& subject) {
  if (!coordinator()) {
    return absl::FailedPreconditionError(
        options_.enabled
            ? absl::StrCat("this daemon is ", options_.name, " (rank ", options_.rank,
                           "), not the coordinator: heartbeat to ", options_.coordinator)
            : "this daemon is not in a cluster");
  }
  const v1::ClusterNode& node = request.node();
  // The name and address first: the messages below quote them, and the
  // logs quote the messages.
  if (auto s = CheckNodeName("node.name", node.name()); !s.ok()) return s;
  const auto address_char = [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' ||
           c == '_';
  };
  if (node.address().empty() || node.address().size() > kMaxNodeAddressBytes ||
      !absl::c_all_of(node.address(), address_char) ||
      node.hostname().size() > kMaxNodeAddressBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        node.name(), ": node.address ", QuotedForError(node.address()), " is not HOST:PORT of 1..",
        kMaxNodeAddressBytes, " bytes, or its host name is longer than that"));
  }
  if (request.nodes() != options_.nodes) {
    return absl::FailedPreconditionError(absl::StrCat(node.name(), " at ", node.address(),
                                                      " was launched for ", request.nodes(),
                                                      " nodes; this cluster has ", options_.nodes));
  }
  if (node.rank() < 1 || node.rank() >= options_.nodes) {
    return absl::FailedPreconditionError(
        absl::StrCat(node.name(), " at ", node.address(), " claims rank ", node.rank(),
                     "; members are ranks 1..", options_.nodes - 1,
                     " (rank 0 is this coordinator, ", options_.advertise, ")"));
  }
  // What every member then serves in ListNodes: bounded, and device names
  // that name devices (they become "node/device" names everywhere).
  if (node.devices_size() > kMaxNodeDevices) {
    return absl::FailedPreconditionError(
        absl::StrCat(node.name(), " at ", node.address(), " announces ", node.devices_size(),
                     " devices; a member has at most ", kMaxNodeDevices));
  }
  for (const v1::Device& d : node.devices()) {
    if (auto s = CheckDeviceName(d.name()); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(node.name(), " announces a device that is none: ", s.message()));
    }
  }
  if (node.name() == options_.name) {
    return absl::FailedPreconditionError(
        absl::StrCat("node name ", node.name(), " is the coordinator's (rank 0, ",
                     options_.advertise, "); give each member its own --node-name"));
  }
  if (request.incarnation().empty() || request.incarnation().size() > 64) {
    return absl::FailedPreconditionError(absl::StrCat(
        node.name(), ": incarnation is 1..64 bytes, got ", request.incarnation().size()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto live = [&](const Member& m) {
    return m.node.state() == v1::NODE_STATE_READY &&
           SecondsSince(m.last_heard) * 1000 < options_.lost_after.count();
  };
  // A name stays with the rank that had it, live or not: jobs and groups
  // name devices by it.
  for (int rank = 1; rank < options_.nodes; ++rank) {
    const Member& other = members_[rank];
    if (rank != node.rank() && other.node.name() == node.name()) {
      return absl::FailedPreconditionError(
          absl::StrCat("node name ", node.name(), " is taken by rank ", rank, " at ",
                       other.node.address(), "; give each member its own --node-name"));
    }
  }
  Member& member = members_[node.rank()];
  if (!member.subject.empty() && subject != member.subject) {
    return absl::PermissionDeniedError(
        absl::StrCat("rank ", node.rank(), " belongs to the certificate subject '", member.subject,
                     "', which joined it first; this caller's is '", subject, "'"));
  }
  // No address or name makes a second daemon the live one: only the same
  // daemon (its incarnation) heartbeats for a live rank.
  if (live(member) && member.incarnation != request.incarnation()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d is held by %s at %s, which is live; %s at %s claims it too: give each member "
        "its own --node-rank (a restarted member joins once the coordinator has found the old "
        "one LOST, after --cluster-lost-after)",
        node.rank(), member.node.name(), member.node.address(), node.name(), node.address()));
  }
  if (member.subject.empty()) member.subject = subject;
  const bool was_waiting = member.node.state() == v1::NODE_STATE_WAITING;
  const bool restarted = !was_waiting && member.incarnation != request.incarnation();
  std::function<void()> notify;
  // Silent past the bound, and heard again before the watch loop found it
  // LOST: a coordinator that was paused (SIGSTOP, a stalled VM) serves the
  // member's queued heartbeat and its watch loop in either order. LOST all
  // the same, as the member has found the coordinator, so its groups break
  // whichever runs first (docs/architecture.md "Cluster").
  if (member.node.state() == v1::NODE_STATE_READY && !live(member)) {
    notify = MarkLost(node.rank(),
                      absl::StrFormat("no heartbeat for %.1f s", SecondsSince(member.last_heard)));
  }
  // A new daemon on a rank not yet found LOST: the old one's workers and
  // groups are gone with it, so its groups break now, as for a loss.
  const bool was_lost = member.node.state() == v1::NODE_STATE_LOST;
  if (restarted && !was_lost) {
    notify = MarkLost(node.rank(), "it restarted (a new daemon heartbeats for its rank)");
  }
  member.node = node;
  member.node.set_state(v1::NODE_STATE_READY);
  member.node.clear_detail();
  member.node.clear_self();
  *member.node.mutable_last_heartbeat() = Now();
  member.incarnation = request.incarnation();
  member.last_heard = Clock::now();
  if (was_waiting || was_lost || restarted) {
    Log(absl::StrCat(node.name(), " (rank ", node.rank(), ", ", node.address(), ") ",
                     was_waiting ? "joined"
                     : was_lost  ? "is back"
                                 : "restarted and rejoined"));
  }
  internal::HeartbeatResponse response;
  members_[0].node = Self();
  for (const Member& m : members_) *response.add_nodes() = m.node;
  lock.unlock();
  if (notify) notify();
  return response;
}

v1::ListNodesResponse Cluster::List() {
  v1::ListNodesResponse response;
  response.set_expected_nodes(options_.enabled ? options_.nodes : 1);
  response.set_coordinator(options_.enabled ? options_.coordinator : "");
  std::lock_guard<std::mutex> lock(mu_);
  const int self_rank = options_.enabled ? options_.rank : 0;
  members_[self_rank].node = Self();
  for (const Member& m : members_) {
    v1::ClusterNode* node = response.add_nodes();
    *node = m.node;
    node->set_self(m.node.rank() == self_rank);
  }
  return response;
}

std::optional<Cluster::Qualified> Cluster::OtherMember(const std::string& qualified) const {
  const size_t slash = qualified.find('/');
  if (slash == std::string::npos || !options_.enabled) return std::nullopt;
  Qualified member{qualified.substr(0, slash), qualified.substr(slash + 1)};
  if (member.node == options_.name) return std::nullopt;
  return member;
}

absl::StatusOr<v1::ClusterNode> Cluster::ReadyNode(const std::string& name) {
  v1::ListNodesResponse nodes = List();
  std::vector<std::string> names;
  for (const v1::ClusterNode& node : nodes.nodes()) {
    if (node.name() == name) {
      if (node.state() == v1::NODE_STATE_READY) return node;
      return absl::UnavailableError(
          absl::StrCat("node ", name, " (", node.address(), ") is ",
                       node.state() == v1::NODE_STATE_LOST ? "LOST" : "not in the cluster yet",
                       ": ", node.detail()));
    }
    if (!node.name().empty()) names.push_back(node.name());
  }
  return absl::NotFoundError(absl::StrCat("no node ", name, " in this cluster; its nodes are ",
                                          absl::StrJoin(names, ", ")));
}

void Cluster::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    internal::HeartbeatRequest request;
    request.set_nodes(options_.nodes);
    request.set_incarnation(incarnation_);
    lock.unlock();
    *request.mutable_node() = Self();
    request.mutable_node()->clear_self();
    grpc::ClientContext ctx;
    peers_.Authorize(&ctx);
    // Bounded well inside lost_after, so a hung coordinator is seen in time.
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::max(options_.heartbeat_interval * 2, std::chrono::milliseconds(1000)));
    internal::HeartbeatResponse response;
    const absl::Status status = FromGrpc(coordinator_stub_->Heartbeat(&ctx, request, &response));
    std::function<void()> notify;
    lock.lock();
    if (status.ok() && response.nodes_size() == options_.nodes) {
      const bool was_lost = members_[0].node.state() == v1::NODE_STATE_LOST;
      for (int rank = 0; rank < options_.nodes; ++rank) {
        if (rank != options_.rank) members_[rank].node = response.nodes(rank);
      }
      coordinator_answered_ = Clock::now();
      if (!last_problem_.empty() || was_lost) {
        Log(absl::StrCat("joined the coordinator at ", options_.coordinator, " as ", options_.name,
                         " (rank ", options_.rank, ")"));
      }
      last_problem_.clear();
    } else {
      const std::string problem =
          status.ok() ? absl::StrCat("the coordinator answered with ", response.nodes_size(),
                                     " nodes, not ", options_.nodes)
                      : std::string(status.message());
      if (problem != last_problem_) {
        Log(absl::StrCat("heartbeat to the coordinator at ", options_.coordinator,
                         " failed: ", problem));
        last_problem_ = problem;
      }
      const double silent = SecondsSince(coordinator_answered_);
      // An answer that refuses this member (it does not fit, or its
      // credentials are not enough) is an answer: the coordinator is there.
      if (status.code() == absl::StatusCode::kFailedPrecondition ||
          status.code() == absl::StatusCode::kPermissionDenied ||
          status.code() == absl::StatusCode::kUnauthenticated) {
        members_[0].node.set_detail(absl::StrCat(
            "refused this member: ", absl::StatusCodeToString(status.code()), ": ", problem));
      } else if (silent * 1000 >= options_.lost_after.count()) {
        notify =
            MarkLost(0, absl::StrFormat("the coordinator at %s has not answered for %.1f s: %s",
                                        options_.coordinator, silent, problem));
      } else if (members_[0].node.state() == v1::NODE_STATE_WAITING) {
        members_[0].node.set_detail(absl::StrCat("not reached yet: ", problem));
      }
    }
    if (notify) {
      lock.unlock();
      notify();
      lock.lock();
    }
    stop_cv_.wait_for(lock, options_.heartbeat_interval, [this] { return stopping_; });
  }
}

void Cluster::WatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    std::vector<std::function<void()>> notify;
    for (int rank = 1; rank < options_.nodes; ++rank) {
      Member& m = members_[rank];
      if (m.node.state() != v1::NODE_STATE_READY) continue;
      const double silent = SecondsSince(m.last_heard);
      if (silent * 1000 >= options_.lost_after.count()) {
        if (auto call = MarkLost(rank, absl::StrFormat("no heartbeat for %.1f s", silent))) {
          notify.push_back(std::move(call));
        }
      }
    }
    if (!notify.empty()) {
      lock.unlock();
      for (auto& call : notify) call();
      lock.lock();
    }
    stop_cv_.wait_for(lock, options_.heartbeat_interval / 2, [this] { return stopping_; });
  }
}

}  // namespace benchd::server
