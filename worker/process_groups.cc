#include "worker/process_groups.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if BENCHD_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/collective_math.h"

namespace benchd::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Loopback: every member is a worker of this node. A cluster group names
// its nodes' addresses instead (PrepareGroupRequest.listen_host,
// JoinGroupRequest.local_host).
constexpr const char* kStoreHost = "127.0.0.1";

std::string HostOr(const std::string& host) { return host.empty() ? kStoreHost : host; }

std::chrono::milliseconds TimeoutOf(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>((seconds > 0 ? seconds : 300) * 1000));
}

// A TCP socket listening on `host` (an IPv4 address or a name that resolves
// to one) at a free port, for the TCPStore server to take over
// (TCPStoreOptions::masterListenFd): left to itself the store listens on
// every interface, and a group needs only the address its members dial. The
// store owns the fd from then on.
absl::StatusOr<std::pair<int, uint16_t>> ListenOn(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the group's store cannot listen on '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = 0;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("listening on ", host, ": ", strerror(err)));
  }
  return std::make_pair(fd, ntohs(addr.sin_port));
}

bool LooksLikeTimeout(const std::string& what) {
  for (const char* s : {"imed out", "imeout", "timed out", "DEADLINE"}) {
    if (what.find(s) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool BackendAvailable(v1::CollectiveBackend backend) {
  if (backend == v1::COLLECTIVE_BACKEND_GLOO) return true;
#if BENCHD_WITH_NCCL
  return backend == v1::COLLECTIVE_BACKEND_NCCL;
#else
  return false;
#endif
}

ProcessGroups::~ProcessGroups() {
  std::lock_guard<std::mutex> lock(mu_);
  groups_.clear();
  prepared_.clear();
}

absl::StatusOr<internal::PrepareGroupResponse> ProcessGroups::Prepare(
    const internal::PrepareGroupRequest& request) {
  if (request.group().empty() || request.world_size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("PrepareGroup: expected a group id and 2 or more ranks, got '",
                     request.group(), "' with ", request.world_size()));
  }
  const std::string host = HostOr(request.listen_host());
  auto listening = ListenOn(host);
  if (!listening.ok()) return listening.status();
  c10d::TCPStoreOptions options;
  options.masterListenFd = listening->first;
  options.port = listening->second;
  options.isServer = true;
  options.numWorkers = static_cast<size_t>(request.world_size());
  options.waitWorkers = false;  // the members connect during JoinGroup
  options.timeout = TimeoutOf(request.timeout_seconds());
  auto store = c10::make_intrusive<c10d::TCPStore>(host, options);
  internal::PrepareGroupResponse response;
  response.set_store_host(host);
  response.set_store_port(store->getPort());
  std::lock_guard<std::mutex> lock(mu_);
  if (groups_.count(request.group())) {
    return absl::AlreadyExistsError(
        absl::StrCat("group ", request.group(), " already exists on ", device_.name));
  }
  prepared_[request.group()] = store;
  return response;
}

absl::StatusOr<internal::JoinGroupResponse> ProcessGroups::Join(
    const internal::JoinGroupRequest& request) {
  const auto start = Clock::now();
  if (request.world_size() < 2 || request.rank() < 0 || request.rank() >= request.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("JoinGroup: rank ", request.rank(), " of ",
                                                   request.world_size(), " is not a rank"));
  }
  if (!BackendAvailable(request.backend())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend ", BackendName(request.backend()), " is not available in this benchd-worker build",
        request.backend() == v1::COLLECTIVE_BACKEND_NCCL
            ? " (it needs LibTorch with CUDA and NCCL's header)"
            : ""));
  }
  if (request.backend() == v1::COLLECTIVE_BACKEND_NCCL && !device_.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl needs a CUDA device; this worker serves ", device_.name));
  }
  auto member = std::make_shared<GroupMember>();
  member->id = request.group();
  member->backend = request.backend();
  member->rank = request.rank();
  member->world_size = request.world_size();
  member->timeout = TimeoutOf(request.timeout_seconds());
  member->tensor_device = device_.is_cuda() ? device_.device : torch::Device(torch::kCPU);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (groups_.count(request.group())) {
      return absl::AlreadyExistsError(
          absl::StrCat("group ", request.group(), " already exists on ", device_.name));
    }
    if (request.rank() == 0) {
      auto it = prepared_.find(request.group());
      if (it == prepared_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("group ", request.group(),
                         ": rank 0 joins after PrepareGroup, which did not run here"));
      }
      member->store = it->second;
      prepared_.erase(it);
    }
  }
  try {
    if (!member->store) {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(request.store_port());
      options.isServer = false;
      options.numWorkers = static_cast<size_t>(request.world_size());
      options.timeout = member->timeout;
      member->store = c10::make_intrusive<c10d::TCPStore>(request.store_host(), options);
    }
    if (request.backend() == v1::COLLECTIVE_BACKEND_GLOO) {
      auto options = c10d::ProcessGroupGloo::Options::create(member->timeout);
      options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(HostOr(request.local_host())));
      member->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(member->store, member->rank,
                                                               member->world_size, options);
    } else {
#if BENCHD_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = member->timeout;
      member->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(member->store, member->rank,
                                                               member->world_size, options);
#endif
    }
    // One all_reduce of rank+1: NCCL creates its communicator here (lazily,
    // at the first collective), and the sum proves every rank is there.
    std::vector<at::Tensor> one{
        torch::full({1}, member->rank + 1,
                    torch::TensorOptions().dtype(torch::kFloat32).device(member->tensor_device))};
    member->pg->allreduce(one)->wait(member->timeout);
    const double got = one[0].item<double>();
    const double want = member->world_size * (member->world_size + 1) / 2.0;
    if (got != want) {
      return absl::InternalError(absl::StrCat(
          "group ", request.group(), ": the first all_reduce gave ", got, ", expected ", want));
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string message =
        absl::StrCat("group ", request.group(), " rank ", request.rank(), " on ", device_.name,
                     ": ", what.substr(0, what.find("\nException raised from")));
    return LooksLikeTimeout(what) ? absl::DeadlineExceededError(message)
                                  : absl::UnavailableError(message);
  }
  internal::JoinGroupResponse response;
  response.set_setup_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  response.set_pid(getpid());
  std::lock_guard<std::mutex> lock(mu_);
  groups_[member->id] = member;
  return response;
}

bool ProcessGroups::Leave(const std::string& id, bool abort) {
  std::shared_ptr<GroupMember> member;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prepared_.erase(id);
    auto it = groups_.find(id);
    if (it == groups_.end()) return false;
    member = it->second;
    groups_.erase(it);
  }
  try {
    if (abort) {
      member->pg->abort();
    } else {
      member->pg->shutdown();
    }
  } catch (const std::exception& e) {
    // Best effort: the member is gone from the map either way.
  }
  return true;
}

std::shared_ptr<GroupMember> ProcessGroups::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second;
}

size_t ProcessGroups::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_.size();
}

}  // namespace benchd::worker
