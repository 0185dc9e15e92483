#include "server/jobs/group_registry.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "server/core/devices.h"
#include "server/core/job_state.h"
#include "server/core/metrics.h"
#include "server/core/timestamp.h"

namespace benchd::server {
namespace {

// The worker's status with what was being done in front of its message.
absl::Status Prefixed(const absl::Status& s, const std::string& prefix) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

// Counts calls out until each has called back (async forms started from one
// thread, waited for together).
class CallsOut {
 public:
  explicit CallsOut(int n) : out_(n) {}
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--out_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return out_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int out_;
};

}  // namespace

GroupRegistry::GroupRegistry(Workers* workers, Metrics* metrics, std::vector<std::string> devices)
    : workers_(workers), metrics_(metrics), devices_(std::move(devices)) {}

GroupRegistry::~GroupRegistry() {
  std::vector<std::thread> leavers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leavers.swap(leavers_);
  }
  for (auto& t : leavers) t.join();
}

absl::Status GroupRegistry::CheckMembers(const std::vector<std::string>& devices,
                                         v1::CollectiveBackend* backend,
                                         const std::string& field) const {
  if (devices.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", devices.size(), " device(s); a group needs 2 or more (one rank each)"));
  }
  std::set<std::string> seen;
  bool cuda = false, cpu = false;
  // In a cluster, the other READY members' devices too ("node1/cpu:0").
  std::vector<std::string> served = devices_;
  for (auto& d : workers_->RemoteDevices()) served.push_back(std::move(d));
  for (const auto& d : devices) {
    if (auto s = CheckServedDevice(field, d, served); !s.ok()) return s;
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", d, " appears twice; each rank needs its own device"));
    }
    (d.substr(d.find('/') + 1).rfind("cuda:", 0) == 0 ? cuda : cpu) = true;
  }
  if (cuda && cpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": [", absl::StrJoin(devices, ", "), "] mixes cpu and cuda devices"));
  }
  if (!v1::CollectiveBackend_IsValid(*backend)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend: unknown value ", *backend, "; expected nccl or gloo"));
  }
  if (*backend == v1::COLLECTIVE_BACKEND_UNSPECIFIED)
    *backend = cuda ? v1::COLLECTIVE_BACKEND_NCCL : v1::COLLECTIVE_BACKEND_GLOO;
  if (*backend == v1::COLLECTIVE_BACKEND_NCCL && cpu) {
    return absl::InvalidArgumentError(absl::StrCat("backend: nccl needs CUDA devices, got [",
                                                   absl::StrJoin(devices, ", "),
                                                   "]; use gloo for CPU tensors"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::CreateGroupRequest> GroupRegistry::CheckRequest(
    const v1::CreateGroupRequest& request) const {
  // Sizes first: the checks below quote the devices.
  if (auto s = CheckSizeLimits(request); !s.ok()) return s;
  if (auto s = CheckFiniteNumbers(request); !s.ok()) return s;
  // "node0/cpu:0" on node0 is its "cpu:0": one name per device.
  std::vector<std::string> devices;
  for (const auto& d : request.devices()) devices.push_back(workers_->CanonicalDevice(d));
  v1::CollectiveBackend backend = request.backend();
  if (auto s = CheckMembers(devices, &backend, "devices"); !s.ok()) return s;
  // Out of range is refused, never replaced by the default.
  auto timeout = ResolveTimeoutSeconds("timeout_seconds", request.timeout_seconds());
  if (!timeout.ok()) return timeout.status();
  v1::CreateGroupRequest out = request;
  out.clear_devices();
  for (const auto& d : devices) out.add_devices(d);
  out.set_backend(backend);
  out.set_timeout_seconds(*timeout);
  return out;
}

absl::StatusOr<v1::Group> GroupRegistry::Create(const v1::CreateGroupRequest& in, bool transient) {
  auto request = CheckRequest(in);
  if (!request.ok()) return request.status();
  std::vector<std::string> devices(request->devices().begin(), request->devices().end());
  const v1::CollectiveBackend backend = request->backend();
  const double timeout = request->timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  const int world = static_cast<int>(devices.size());
  std::vector<std::shared_ptr<WorkerClient>> workers;
  // Held from here (a parked member starts again, and WaitUntilUp waits for
  // it) for as long as the group is READY.
  std::vector<std::shared_ptr<void>> holds;
  for (const auto& d : devices) holds.push_back(workers_->Hold(d, "a resident group"));
  for (const auto& d : devices) {
    auto w = workers_->WaitUntilUp(d, std::chrono::seconds(30));
    if (!w.ok()) return w.status();
    workers.push_back(*w);
  }
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = absl::StrCat(transient ? "t" : "g", next_id_++);
  }
  // Rank 0 hosts the store: on loopback, or for a group spanning nodes on
  // its node's address, which every member dials (and Gloo's connections go
  // between the members' node addresses).
  const bool spans_nodes = std::any_of(devices.begin(), devices.end(), [](const std::string& d) {
    return d.find('/') != std::string::npos;
  });
  auto host_of = [&](const std::string& device) {
    return spans_nodes ? workers_->NodeHost(device) : std::string();
  };
  internal::PrepareGroupRequest prepare;
  prepare.set_group(id);
  prepare.set_world_size(world);
  prepare.set_timeout_seconds(timeout);
  prepare.set_listen_host(host_of(devices[0]));
  auto prepared = workers[0]->PrepareGroup(prepare, kPrepareGroupTimeout);
  if (!prepared.ok()) {
    return Prefixed(prepared.status(), absl::StrCat("the worker for ", devices[0], " (rank 0): "));
  }
  // Every member joins at once (async calls, waited for together: Create runs
  // on a thread that may wait, never a gRPC one): the rendezvous waits for
  // all of them. The members' own rendezvous timeout ends a join first.
  const auto join_deadline =
      std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)) + kJoinGroupSlack;
  std::vector<absl::StatusOr<internal::JoinGroupResponse>> joined(world,
                                                                  absl::UnknownError("not joined"));
  {
    CallsOut out(world);
    for (int r = 0; r < world; ++r) {
      internal::JoinGroupRequest req;
      req.set_group(id);
      req.set_backend(backend);
      req.set_rank(r);
      req.set_world_size(world);
      req.set_store_host(prepared->store_host());
      req.set_store_port(prepared->store_port());
      req.set_timeout_seconds(timeout);
      req.set_local_host(host_of(devices[r]));
      workers[r]->JoinGroupAsync(req, join_deadline,
                                 [&joined, &out, r](absl::StatusOr<internal::JoinGroupResponse> j) {
                                   joined[r] = std::move(j);
                                   out.Done();
                                 });
    }
    out.Wait();
  }
  for (int r = 0; r < world; ++r) {
    if (!joined[r].ok()) {
      LeaveAll(id, devices, /*abort=*/true);
      return Prefixed(joined[r].status(), absl::StrCat("creating a ", BackendName(backend),
                                                       " group on [", absl::StrJoin(devices, ", "),
                                                       "]: rank ", r, " (", devices[r], "): "));
    }
  }
  Entry e;
  e.holds = std::move(holds);
  e.group.set_id(id);
  for (const auto& d : devices) e.group.add_devices(d);
  e.group.set_backend(backend);
  for (int r = 0; r < world; ++r) {
    v1::GroupRank* rank = e.group.add_ranks();
    rank->set_rank(r);
    rank->set_device(devices[r]);
    rank->set_worker_pid(joined[r]->pid());
    rank->set_setup_seconds(joined[r]->setup_seconds());
    e.generations.push_back(workers[r]->generation());
  }
  e.group.set_state(v1::GROUP_STATE_READY);
  *e.group.mutable_created() = Now();
  e.group.set_setup_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  e.group.set_timeout_seconds(timeout);
  e.group.set_transient(transient);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A member that ended while the group was being made leaves it broken at
    // once: the exit listener ran before the group was here to be broken.
    // (The supervisor marks a worker down before it calls the listener, so
    // one that ends after this check is broken by OnWorkerExit.)
    for (int r = 0; r < world && e.group.state() == v1::GROUP_STATE_READY; ++r) {
      auto now = workers_->WaitUntilUp(devices[r], std::chrono::milliseconds(0));
      if (now.ok() && (*now)->generation() == e.generations[r]) continue;
      e.group.set_state(v1::GROUP_STATE_BROKEN);
      e.group.set_broken_reason(absl::StrCat("the worker for ", devices[r], " (rank ", r, ", pid ",
                                             joined[r]->pid(),
                                             ") ended while the group was being made"));
    }
    groups_[id] = e;
    UpdateMetrics();
  }
  if (e.group.state() == v1::GROUP_STATE_BROKEN) LeaveAll(id, devices, /*abort=*/true);
  return e.group;
}

std::vector<v1::Group> GroupRegistry::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Group> out;
  for (const auto& [id, e] : groups_) out.push_back(e.group);
  return out;
}

absl::StatusOr<v1::Group> GroupRegistry::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no group '", id, "'; `benchctl groups list` shows the groups"));
  }
  return it->second.group;
}

absl::StatusOr<v1::Group> GroupRegistry::Destroy(const std::string& id) {
  v1::Group group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = groups_.find(id);
    if (it == groups_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no group '", id, "'; `benchctl groups list` shows the groups"));
    }
    if (it->second.in_use > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("group ", id, " is in use by a running job; destroy it after the job ends"));
    }
    group = it->second.group;
    groups_.erase(it);
    UpdateMetrics();
  }
  LeaveAll(id, {group.devices().begin(), group.devices().end()},
           group.state() == v1::GROUP_STATE_BROKEN);
  return group;
}

std::optional<v1::Group> GroupRegistry::FindReady(const std::vector<std::string>& devices,
                                                  v1::CollectiveBackend backend) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : groups_) {
    if (e.group.state() != v1::GROUP_STATE_READY || e.group.transient() ||
        e.group.backend() != backend)
      continue;
    if (std::vector<std::string>(e.group.devices().begin(), e.group.devices().end()) == devices)
      return e.group;
  }
  return std::nullopt;
}

absl::StatusOr<v1::Group> GroupRegistry::Acquire(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no group '", id, "'; `benchctl groups list` shows the groups"));
  }
  const v1::Group& g = it->second.group;
  if (g.state() == v1::GROUP_STATE_BROKEN) {
    return absl::FailedPreconditionError(absl::StrCat(
        "group ", id, " is broken: ", g.broken_reason(),
        "; re-create it (benchctl groups create --device ", absl::StrJoin(g.devices(), ","),
        " --backend ", BackendName(g.backend()), ")"));
  }
  ++it->second.in_use;
  return g;
}

void GroupRegistry::Release(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  --it->second.in_use;
  it->second.group.set_jobs_run(it->second.group.jobs_run() + 1);
}

std::vector<uint64_t> GroupRegistry::Generations(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(id);
  return it == groups_.end() ? std::vector<uint64_t>() : it->second.generations;
}

void GroupRegistry::MarkBroken(const std::string& id, const std::string& reason) {
  std::vector<std::string> devices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = groups_.find(id);
    if (it == groups_.end()) return;
    v1::Group& g = it->second.group;
    if (g.state() == v1::GROUP_STATE_BROKEN) return;
    g.set_state(v1::GROUP_STATE_BROKEN);
    g.set_broken_reason(reason);
    devices.assign(g.devices().begin(), g.devices().end());
    UpdateMetrics();
  }
  LeaveAll(id, devices, /*abort=*/true);
}

void GroupRegistry::OnWorkerExit(const std::string& device, uint64_t generation, pid_t pid,
                                 const std::string& how) {
  std::vector<std::pair<std::string, std::vector<std::string>>> broken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : groups_) {
      v1::Group& g = e.group;
      for (int r = 0; r < g.devices_size(); ++r) {
        if (g.devices(r) != device || e.generations[r] != generation) continue;
        if (g.state() != v1::GROUP_STATE_BROKEN) {
          g.set_state(v1::GROUP_STATE_BROKEN);
          g.set_broken_reason(
              absl::StrCat("the worker for ", device, " (rank ", r, ", pid ", pid, ") ", how));
          std::vector<std::string> others;
          for (const auto& d : g.devices()) {
            if (d != device) others.push_back(d);
          }
          broken.emplace_back(id, others);
        }
      }
    }
    UpdateMetrics();
    // The survivors drop their members off this (the supervisor's) thread.
    for (auto& [id, others] : broken) {
      leavers_.emplace_back([this, id = id, others = others] { LeaveAll(id, others, true); });
    }
  }
}

void GroupRegistry::OnNodeLost(const std::string& node, const std::string& why) {
  const std::string prefix = node + "/";
  std::vector<std::pair<std::string, std::vector<std::string>>> broken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : groups_) {
      v1::Group& g = e.group;
      if (g.state() == v1::GROUP_STATE_BROKEN) continue;
      std::vector<std::string> others;
      std::string lost_rank;
      for (int r = 0; r < g.devices_size(); ++r) {
        if (g.devices(r).rfind(prefix, 0) == 0) {
          if (lost_rank.empty()) lost_rank = absl::StrCat(g.devices(r), " (rank ", r, ")");
        } else {
          others.push_back(g.devices(r));
        }
      }
      if (lost_rank.empty()) continue;
      g.set_state(v1::GROUP_STATE_BROKEN);
      g.set_broken_reason(absl::StrCat("node ", node, " of ", lost_rank, " is lost: ", why));
      broken.emplace_back(id, std::move(others));
    }
    UpdateMetrics();
    for (auto& [id, others] : broken) {
      leavers_.emplace_back([this, id = id, others = others] { LeaveAll(id, others, true); });
    }
  }
}

void GroupRegistry::LeaveAll(const std::string& id, const std::vector<std::string>& devices,
                             bool abort) {
  // A thread each with the blocking form: Destroy calls this on a gRPC
  // server thread, which must not wait for async callbacks.
  internal::LeaveGroupRequest req;
  req.set_group(id);
  req.set_abort(abort);
  std::vector<std::thread> threads;
  for (const auto& d : devices) {
    auto w = workers_->WaitUntilUp(d, std::chrono::milliseconds(0));
    if (!w.ok()) continue;  // a worker that is not up has no member any more
    threads.emplace_back(
        [w = *std::move(w), &req] { (void)w->LeaveGroup(req, kLeaveGroupTimeout); });
  }
  for (auto& t : threads) t.join();
}

void GroupRegistry::UpdateMetrics() {
  for (auto& [id, e] : groups_) {
    if (e.group.state() == v1::GROUP_STATE_BROKEN) e.holds.clear();
  }
  if (!metrics_) return;
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (auto b : {v1::COLLECTIVE_BACKEND_NCCL, v1::COLLECTIVE_BACKEND_GLOO}) {
    counts[{BackendName(b), "ready"}] = 0;
    counts[{BackendName(b), "broken"}] = 0;
  }
  for (const auto& [id, e] : groups_) {
    ++counts[{BackendName(e.group.backend()),
              e.group.state() == v1::GROUP_STATE_READY ? "ready" : "broken"}];
  }
  for (const auto& [k, n] : counts) metrics_->SetGroups(k.first, k.second, n);
}

}  // namespace benchd::server
