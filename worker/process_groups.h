// Resident process groups of one worker: this worker's member (rank) of each
// group the daemon made, a c10d backend (ProcessGroupGloo or
// ProcessGroupNCCL) on the group's c10d::TCPStore, kept until the daemon
// drops it (LeaveGroup) or it breaks. Rank 0's worker hosts the store.
//
// The daemon's sequence (server/jobs/group_registry.cc): Prepare on rank 0 (the
// store, on a free port), then Join on every member at the same time (the
// rendezvous blocks until all have joined), each Join ending with one
// all_reduce so that NCCL creates its communicator there and not in the
// first job.
#ifndef BENCHD_WORKER_PROCESS_GROUPS_H_
#define BENCHD_WORKER_PROCESS_GROUPS_H_

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "worker/device.h"

namespace benchd::worker {

struct GroupMember {
  std::string id;
  v1::CollectiveBackend backend = v1::COLLECTIVE_BACKEND_UNSPECIFIED;
  int rank = 0;
  int world_size = 0;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> pg;
  // Tensors of this group live here: the worker's device for nccl and for
  // gloo on cuda:N, the CPU for gloo on cpu:N.
  torch::Device tensor_device{torch::kCPU};
};

// True when this build can make `backend` groups (nccl needs LibTorch with
// CUDA and NCCL's header at build time).
bool BackendAvailable(v1::CollectiveBackend backend);

class ProcessGroups {
 public:
  explicit ProcessGroups(const WorkerDevice& device) : device_(device) {}
  ~ProcessGroups();

  // Rank 0: starts the group's TCPStore on a free port of 127.0.0.1.
  absl::StatusOr<internal::PrepareGroupResponse> Prepare(
      const internal::PrepareGroupRequest& request);
  // Every rank: connects to the store (rank 0 uses its own), builds the c10d
  // backend and runs one all_reduce of one element, checking its sum.
  // DEADLINE_EXCEEDED when the other members do not come within the timeout.
  absl::StatusOr<internal::JoinGroupResponse> Join(const internal::JoinGroupRequest& request);
  // Drops the group; `abort`: a broken group, whose backend is aborted
  // (ProcessGroupNCCL::abort; Gloo's pairs are closed on destruction) rather
  // than shut down cleanly. False when this worker has no such group.
  bool Leave(const std::string& id, bool abort);

  std::shared_ptr<GroupMember> Get(const std::string& id);
  size_t size();

 private:
  const WorkerDevice device_;
  std::mutex mu_;
  std::map<std::string, c10::intrusive_ptr<c10d::Store>> prepared_;  // rank 0's stores before Join
  std::map<std::string, std::shared_ptr<GroupMember>> groups_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_PROCESS_GROUPS_H_
