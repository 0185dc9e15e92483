// Resident process groups of this node: which devices (ranks), which
// backend, READY or BROKEN (and why). The groups themselves (c10d backends,
// the TCPStore) live in the member workers (worker/process_groups.h); the
// registry makes them (PrepareGroup on rank 0, then JoinGroup on every member
// at once), drops them (LeaveGroup), and breaks them when a member's worker
// ends (Supervisor's exit listener) or a collective on them fails.
#ifndef BENCHD_SERVER_JOBS_GROUP_REGISTRY_H_
#define BENCHD_SERVER_JOBS_GROUP_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class Metrics;

class GroupRegistry {
 public:
  // `workers` is the Supervisor in the daemon, FakeWorkers in tests;
  // `metrics` may be null.
  GroupRegistry(Workers* workers, Metrics* metrics, std::vector<std::string> devices);
  ~GroupRegistry();

  // Checks the request (devices served here, 2 or more, no repeats, one kind,
  // a backend that runs there), gives the group an id and builds it on the
  // member workers. INVALID_ARGUMENT, UNAVAILABLE (a worker not up),
  // DEADLINE_EXCEEDED (the rendezvous timed out) or the worker's error; on
  // failure every member drops what it made.
  absl::StatusOr<v1::Group> Create(const v1::CreateGroupRequest& request, bool transient = false);
  // Create's checks alone, made before anything starts (no worker is asked):
  // the sizes (CheckSizeLimits: at most kMaxGroupDevices devices, each name
  // at most kMaxDeviceNameBytes, no unknown field), every number finite, the
  // devices and backend (CheckMembers), the timeout
  // (0 = 300, else 1..86400). Returns the request resolved (backend and
  // timeout written out) or INVALID_ARGUMENT naming the field.
  absl::StatusOr<v1::CreateGroupRequest> CheckRequest(const v1::CreateGroupRequest& request) const;
  std::vector<v1::Group> List();
  absl::StatusOr<v1::Group> Get(const std::string& id);
  // NOT_FOUND; FAILED_PRECONDITION while a job holds it.
  absl::StatusOr<v1::Group> Destroy(const std::string& id);

  // The READY, non-transient group with exactly these devices (rank order) and backend.
  std::optional<v1::Group> FindReady(const std::vector<std::string>& devices,
                                     v1::CollectiveBackend backend);
  // A job takes a group for a while: NOT_FOUND, or FAILED_PRECONDITION when
  // it is broken (naming why). Release counts the job.
  absl::StatusOr<v1::Group> Acquire(const std::string& id);
  void Release(const std::string& id);
  // Marks it BROKEN (first reason wins) and has the surviving members drop it.
  void MarkBroken(const std::string& id, const std::string& reason);
  // The worker generation each rank had when it joined.
  std::vector<uint64_t> Generations(const std::string& id);

  // Supervisor::ExitListener: breaks every group the worker was a member of.
  void OnWorkerExit(const std::string& device, uint64_t generation, pid_t pid,
                    const std::string& how);

  // Cluster::NodeLostListener: breaks every group with a rank on `node`
  // ("node1/cpu:0"), naming it and why; the members elsewhere drop it.
  void OnNodeLost(const std::string& node, const std::string& why);

  // Errors of a group's devices/backend, INVALID_ARGUMENT naming `field`.
  absl::Status CheckMembers(const std::vector<std::string>& devices, v1::CollectiveBackend* backend,
                            const std::string& field) const;

 private:
  struct Entry {
    v1::Group group;
    std::vector<uint64_t> generations;
    int in_use = 0;
    // Its members' workers are never parked (--worker-idle-exit) while it is
    // READY: a parked worker would take its communicator with it.
    std::vector<std::shared_ptr<void>> holds;
  };
  // LeaveGroup on each member that is up (all at once, short deadlines),
  // best effort; returns when every call has ended.
  void LeaveAll(const std::string& id, const std::vector<std::string>& devices, bool abort);
  // With mu_ held, after any change: the groups' gauges, and a broken
  // group's holds dropped (its workers may be parked).
  void UpdateMetrics();

  Workers* const workers_;
  Metrics* const metrics_;
  const std::vector<std::string> devices_;
  std::mutex mu_;
  std::map<std::string, Entry> groups_;
  int64_t next_id_ = 1;
  std::vector<std::thread> leavers_;  // LeaveAll threads started from the exit listener
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_GROUP_REGISTRY_H_
