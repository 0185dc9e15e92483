#include "server/api/bench_service.h"

#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "common/job_spec.h"
#include "common/memory_estimate.h"
#include "common/version.h"
#include "server/api/page_token.h"
#include "server/core/devices.h"
#include "server/core/grpc_status.h"
#include "server/jobs/model_calls.h"
#include "server/security/call_policy.h"

namespace benchd::server {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// Streams a job's events: its history from the hub, then live ones, until the
// terminal event. One write in flight at a time, as the callback API requires.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(EventHub* hub, JobManager* jobs, const std::string& job_id)
      : hub_(hub), job_id_(job_id) {
    // Subscribe outside our lock: the hub calls Enqueue under its own lock.
    auto sub = hub_->Subscribe(job_id_, [this](const v1::JobEvent& e) { Enqueue(e); });
    std::lock_guard<std::mutex> lock(mu_);
    sub_id_ = sub.id;
    if (sub.id == 0) {
      // Not in the hub (finished long ago, or before a daemon restart): answer
      // from the store with the job's final event.
      auto job = jobs->Get(job_id_);
      if (!job.ok()) {
        FinishOnce(ToGrpc(job.status()));
        return;
      }
      if (!IsFinal(job->state())) {
        FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                absl::StrCat("job ", job_id_, " is ", JobStateName(job->state()),
                                             " but has no live events here; watch again")));
        return;
      }
      v1::JobEvent e;
      e.set_job_id(job->id());
      *e.mutable_time() = job->finished();
      SetTerminalEvent(*job, &e);
      pending_.push_back(std::move(e));
    } else {
      // Live events that raced in are already in pending_; history goes first.
      pending_.insert(pending_.begin(), sub.history.begin(), sub.history.end());
    }
    ready_ = true;
    NextLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
      return;
    }
    if (IsTerminal(current_)) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    NextLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }

  void OnDone() override {
    if (sub_id_ != 0) hub_->Unsubscribe(job_id_, sub_id_);
    delete this;
  }

 private:
  void Enqueue(const v1::JobEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    pending_.push_back(e);
    if (ready_) NextLocked();
  }

  void NextLocked() {
    if (writing_ || finished_ || pending_.empty()) return;
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishOnce(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  EventHub* const hub_;
  const std::string job_id_;
  uint64_t sub_id_ = 0;
  std::mutex mu_;
  std::deque<v1::JobEvent> pending_;
  v1::JobEvent current_;
  bool ready_ = false;
  bool writing_ = false;
  bool finished_ = false;
};

// A stream that ends at once with `status` (a refused request).
template <typename T>
grpc::ServerWriteReactor<T>* Refused(const absl::Status& status) {
  class Refuse : public grpc::ServerWriteReactor<T> {
   public:
    explicit Refuse(const absl::Status& s) { this->Finish(ToGrpc(s)); }
    void OnDone() override { delete this; }
  };
  return new Refuse(status);
}

// Streams one artifact in chunks of at most kArtifactChunkBytes, reading the
// next chunk only when the previous one is written (memory stays one chunk).
class FetchReactor final : public grpc::ServerWriteReactor<v1::ArtifactChunk> {
 public:
  static constexpr size_t kArtifactChunkBytes = 1 << 20;

  explicit FetchReactor(std::unique_ptr<ArtifactReader> reader) : reader_(std::move(reader)) {
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    // An empty file is still one (empty) chunk, so the reader learns its size.
    if (reader_->done() && sent_any_) {
      Finish(grpc::Status::OK);
      return;
    }
    chunk_.Clear();
    chunk_.set_offset(reader_->offset());
    chunk_.set_total_bytes(reader_->size());
    auto data = reader_->Next(kArtifactChunkBytes);
    if (!data.ok()) {
      Finish(ToGrpc(data.status()));
      return;
    }
    chunk_.set_data(*std::move(data));
    sent_any_ = true;
    StartWrite(&chunk_);
  }

  std::unique_ptr<ArtifactReader> reader_;
  v1::ArtifactChunk chunk_;
  bool sent_any_ = false;
};

// The member's method for each request type a call can be forwarded with
// (those whose CallPolicy names a route field): the one place that binds a
// request to its stub call.
using MemberDone = std::function<void(grpc::Status)>;
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::SubmitRequest* r,
                v1::Job* out, MemberDone done) {
  stub->async()->Submit(c, r, out, std::move(done));
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::GetJobRequest* r,
                v1::Job* out, MemberDone done) {
  stub->async()->GetJob(c, r, out, std::move(done));
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::ListJobsRequest* r,
                v1::ListJobsResponse* out, MemberDone done) {
  stub->async()->ListJobs(c, r, out, std::move(done));
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::CancelJobRequest* r,
                v1::Job* out, MemberDone done) {
  stub->async()->CancelJob(c, r, out, std::move(done));
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::ListArtifactsRequest* r,
                v1::ListArtifactsResponse* out, MemberDone done) {
  stub->async()->ListArtifacts(c, r, out, std::move(done));
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::WatchRequest* r,
                grpc::ClientReadReactor<v1::JobEvent>* reactor) {
  stub->async()->Watch(c, r, reactor);
}
void CallMember(v1::Bench::Stub* stub, grpc::ClientContext* c, const v1::FetchArtifactRequest* r,
                grpc::ClientReadReactor<v1::ArtifactChunk>* reactor) {
  stub->async()->FetchArtifact(c, r, reactor);
}

template <typename Req, typename Resp>
concept ForwardsUnary = requires(v1::Bench::Stub* s, grpc::ClientContext* c, const Req* r,
                                 Resp* out, MemberDone done) {
  CallMember(s, c, r, out, done);
};
template <typename Req, typename Resp>
concept ForwardsStream = requires(v1::Bench::Stub* s, grpc::ClientContext* c, const Req* r,
                                  grpc::ClientReadReactor<Resp>* reactor) {
  CallMember(s, c, r, reactor);
};

// A member's answer in this node's names: job ids and devices get the
// member's prefix. Artifacts carry no names to rewrite.
void QualifyAnswer(const std::string& node, v1::Job* job) { Forwarder::Qualify(node, job); }
void QualifyAnswer(const std::string& node, v1::JobEvent* event) {
  Forwarder::Qualify(node, event);
}
void QualifyAnswer(const std::string& node, v1::ListJobsResponse* page) {
  for (v1::Job& job : *page->mutable_jobs()) Forwarder::Qualify(node, &job);
}
template <typename Resp>
void QualifyAnswer(const std::string&, Resp*) {}

// What the gate checks of a request's size: all of it, except a Submit's
// JobSpec, which ResolveJobSpec checks with the field paths users know
// ("model.preset", not "spec.model.preset").
template <typename Req>
absl::Status CheckRequestSize(const Req& req) {
  return CheckSizeLimits(req);
}
// The envelope only, without copying the spec (ResolveJobSpec checks it with
// its own paths). The spec is SubmitRequest's one field (BenchServiceTest
// checks), so the envelope is its unknown fields.
absl::Status CheckRequestSize(const v1::SubmitRequest& req) {
  const auto& unknown = req.GetReflection()->GetUnknownFields(req);
  if (unknown.empty()) return absl::OkStatus();
  v1::SubmitRequest envelope;
  envelope.GetReflection()->MutableUnknownFields(&envelope)->MergeFrom(unknown);
  return CheckSizeLimits(envelope);
}

}  // namespace

template <typename Req>
absl::StatusOr<BenchService::Gated> BenchService::Gate(const grpc::CallbackServerContext& ctx,
                                                       const Req& req) const {
  // Found once per request type: the table does not change while serving.
  static const CallPolicy* const policy = [] {
    const auto* method = BenchMethodFor(Req::descriptor());
    return method == nullptr ? nullptr : FindCallPolicy(method->name());
  }();
  if (policy == nullptr) {
    return absl::InternalError(absl::StrCat(Req::descriptor()->full_name(),
                                            ": no call policy (server/security/call_policy.cc)"));
  }
  auto checked = auth_->Check(ctx, policy->method);
  if (!checked.ok()) return checked.status();
  if (auto s = CheckRequestSize(req); !s.ok()) return s;
  // The on-behalf metadata counts only from a member of this daemon's cluster.
  auto caller = EffectiveCaller(
      ctx, *checked,
      forwarder_ != nullptr && cluster_ != nullptr ? cluster_->options().secret : std::string());
  if (!caller.ok()) {
    // Logged with the peer, as the role refusals are: a claim to act for
    // another from outside the cluster is worth a line.
    return auth_->Deny(ctx, policy->method, *checked, std::string(caller.status().message()));
  }
  Gated gated{*checked, *std::move(caller), policy, std::nullopt};
  if (forwarder_ != nullptr) gated.member = forwarder_->Split(RouteName(req, *policy));
  return gated;
}

template <typename Req, typename Resp, typename Serve>
grpc::ServerUnaryReactor* BenchService::Unary(grpc::CallbackServerContext* ctx, const Req* req,
                                              Resp* resp, Serve serve) {
  auto gated = Gate(*ctx, *req);
  if (!gated.ok()) return Done(ctx, ToGrpc(gated.status()));
  if (!gated->member) return serve(*gated);
  if constexpr (ForwardsUnary<Req, Resp>) {
    auto stub = forwarder_->Stub(gated->member->node);
    if (!stub.ok()) return Done(ctx, ToGrpc(stub.status()));
    struct State {
      grpc::ClientContext client;
      Req request;
      std::shared_ptr<v1::Bench::Stub> stub;
    };
    auto state = std::make_shared<State>();
    state->request = *req;
    SetRouteName(&state->request, *gated->policy, gated->member->name);
    state->stub = *std::move(stub);
    forwarder_->Prepare(&state->client, gated->caller, *ctx);
    auto* reactor = ctx->DefaultReactor();
    CallMember(state->stub.get(), &state->client, &state->request, resp,
               [state, reactor, resp, node = gated->member->node](grpc::Status s) {
                 if (s.ok()) QualifyAnswer(node, resp);
                 reactor->Finish(s);
               });
    return reactor;
  } else {
    return Done(ctx, ToGrpc(absl::InternalError(absl::StrCat(
                         gated->policy->method, " routes by ", gated->policy->route_field,
                         " but has no CallMember (server/api/bench_service.cc)"))));
  }
}

template <typename Resp, typename Req, typename Serve>
grpc::ServerWriteReactor<Resp>* BenchService::ServerStream(grpc::CallbackServerContext* ctx,
                                                           const Req* req, Serve serve) {
  auto gated = Gate(*ctx, *req);
  if (!gated.ok()) return Refused<Resp>(gated.status());
  if (!gated->member) return serve(*gated);
  if constexpr (ForwardsStream<Req, Resp>) {
    auto stub = forwarder_->Stub(gated->member->node);
    if (!stub.ok()) return Refused<Resp>(stub.status());
    auto client = std::make_unique<grpc::ClientContext>();
    forwarder_->Prepare(client.get(), gated->caller, *ctx);
    auto request = std::make_shared<Req>(*req);
    SetRouteName(request.get(), *gated->policy, gated->member->name);
    return new ForwardedStream<Resp>(
        [stub = *stub, request](grpc::ClientContext* c, grpc::ClientReadReactor<Resp>* r) {
          CallMember(stub.get(), c, request.get(), r);
        },
        [node = gated->member->node](Resp* message) { QualifyAnswer(node, message); },
        std::move(client));
  } else {
    return Refused<Resp>(absl::InternalError(
        absl::StrCat(gated->policy->method, " routes by ", gated->policy->route_field,
                     " but has no CallMember (server/api/bench_service.cc)")));
  }
}

grpc::ServerUnaryReactor* BenchService::Submit(grpc::CallbackServerContext* ctx,
                                               const v1::SubmitRequest* req, v1::Job* resp) {
  return Unary(ctx, req, resp, [&](const Gated& gated) {
    auto job = jobs_->Submit(req->spec(), gated.caller.name);
    if (job.ok()) *resp = *job;
    return Done(ctx, ToGrpc(job.status()));
  });
}

grpc::ServerWriteReactor<v1::JobEvent>* BenchService::Watch(grpc::CallbackServerContext* ctx,
                                                            const v1::WatchRequest* req) {
  return ServerStream<v1::JobEvent>(ctx, req,
                                    [&](const Gated&) -> grpc::ServerWriteReactor<v1::JobEvent>* {
                                      if (auto s = CheckJobId(req->job_id()); !s.ok())
                                        return Refused<v1::JobEvent>(s);
                                      return new WatchReactor(hub_, jobs_, req->job_id());
                                    });
}

grpc::ServerUnaryReactor* BenchService::GetJob(grpc::CallbackServerContext* ctx,
                                               const v1::GetJobRequest* req, v1::Job* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (auto s = CheckJobId(req->job_id()); !s.ok()) return Done(ctx, ToGrpc(s));
    auto job = jobs_->Get(req->job_id());
    if (job.ok()) *resp = *job;
    return Done(ctx, ToGrpc(job.status()));
  });
}

grpc::ServerUnaryReactor* BenchService::ListJobs(grpc::CallbackServerContext* ctx,
                                                 const v1::ListJobsRequest* req,
                                                 v1::ListJobsResponse* resp) {
  // Another member's device ("node1/cuda:0") goes to that member, which
  // lists its jobs on it; its page tokens pass through untouched.
  return Unary(ctx, req, resp,
               [&](const Gated&) { return Done(ctx, ToGrpc(ListJobsHere(*req, resp))); });
}

absl::Status BenchService::ListJobsHere(const v1::ListJobsRequest& req,
                                        v1::ListJobsResponse* resp) {
  if (!v1::JobState_IsValid(req.state())) {
    return absl::InvalidArgumentError(absl::StrCat("state: unknown job state ", req.state(),
                                                   "; expected one of ",
                                                   "JOB_STATE_QUEUED .. JOB_STATE_INTERRUPTED, "
                                                   "or unspecified"));
  }
  if (!v1::JobKind_IsValid(req.kind())) {
    return absl::InvalidArgumentError(absl::StrCat("kind: unknown job kind ", req.kind(),
                                                   "; expected ", JobKindChoices(),
                                                   ", or unspecified"));
  }
  if (req.page_size() < 0 || req.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: expected 0..", kMaxPageSize,
                                                   " (0 = ", kDefaultPageSize, "), got ",
                                                   req.page_size()));
  }
  const std::string device = jobs_->CanonicalDevice(req.device());  // "node0/cpu:0" on node0
  if (!device.empty()) {
    if (auto s = CheckServedDevice("device", device, jobs_->devices()); !s.ok()) return s;
  }
  JobFilter filter;
  filter.state = req.state();
  filter.kind = req.kind();
  filter.device = device;
  auto before_id = DecodePageToken(req.page_token(), filter);
  if (!before_id.ok()) return before_id.status();
  auto page = jobs_->List(filter, req.page_size(), *before_id);
  if (!page.ok()) return page.status();
  for (auto& j : page->jobs) *resp->add_jobs() = std::move(j);
  if (page->next_before_id > 0) {
    resp->set_next_page_token(EncodePageToken(filter, page->next_before_id));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* BenchService::CancelJob(grpc::CallbackServerContext* ctx,
                                                  const v1::CancelJobRequest* req, v1::Job* resp) {
  // Forwarded, the member applies the cancel rule to the caller named in the call.
  return Unary(ctx, req, resp, [&](const Gated& gated) {
    if (auto s = CheckJobId(req->job_id()); !s.ok()) return Done(ctx, ToGrpc(s));
    // A submitter cancels its own jobs; cancelling another's is admin's.
    const Principal& caller = gated.caller;
    if (caller.role < v1::ROLE_ADMIN) {
      auto existing = jobs_->Get(req->job_id());
      if (!existing.ok()) return Done(ctx, ToGrpc(existing.status()));
      if (existing->submitter() != caller.name) {
        return Done(ctx, ToGrpc(auth_->Deny(
                             *ctx, "CancelJob", caller,
                             absl::StrCat("job ", req->job_id(), " was submitted by '",
                                          existing->submitter(),
                                          "'; cancelling another's job needs the admin role, "
                                          "and '",
                                          caller.name, "' has ", RoleName(caller.role)))));
      }
    }
    auto job = jobs_->Cancel(req->job_id());
    if (job.ok()) *resp = *job;
    return Done(ctx, ToGrpc(job.status()));
  });
}

grpc::ServerUnaryReactor* BenchService::ListModels(grpc::CallbackServerContext* ctx,
                                                   const v1::ListModelsRequest* req,
                                                   v1::ListModelsResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (!req->device().empty()) {
      if (auto s = CheckServedDevice("device", req->device(), DeviceNames()); !s.ok()) {
        return Done(ctx, ToGrpc(s));
      }
    }
    auto* reactor = ctx->DefaultReactor();
    ListModelsOnWorkers(workers_, DeviceNames(), req->device(),
                        [reactor, resp](absl::StatusOr<v1::ListModelsResponse> models) {
                          if (models.ok()) *resp = *std::move(models);
                          reactor->Finish(ToGrpc(models.status()));
                        });
    return reactor;
  });
}

grpc::ServerUnaryReactor* BenchService::EvictModel(grpc::CallbackServerContext* ctx,
                                                   const v1::EvictModelRequest* req,
                                                   v1::EvictModelResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (!req->device().empty()) {
      if (auto s = CheckServedDevice("device", req->device(), DeviceNames()); !s.ok()) {
        return Done(ctx, ToGrpc(s));
      }
    }
    auto* reactor = ctx->DefaultReactor();
    EvictModelOnWorkers(workers_, DeviceNames(), *req,
                        [this, reactor, resp](absl::StatusOr<v1::EvictModelResponse> evicted) {
                          if (evicted.ok()) *resp = *std::move(evicted);
                          if (on_evicted_) on_evicted_();
                          reactor->Finish(ToGrpc(evicted.status()));
                        });
    return reactor;
  });
}

std::vector<std::string> BenchService::DeviceNames() const {
  std::vector<std::string> names;
  for (const v1::Device& d : workers_->Devices()) names.push_back(d.name());
  return names;
}

absl::Status BenchService::CheckMembersServing(
    const google::protobuf::RepeatedPtrField<std::string>& devices) {
  for (const std::string& d : devices) {
    if (auto s = AcceptingJobs(workers_->Health(d), d, workers_->LogPath(d)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool BenchService::StartGroupOperation(grpc::ServerUnaryReactor* reactor,
                                       std::function<grpc::Status()> operation) {
  {
    std::lock_guard<std::mutex> lock(setups_mu_);
    if (setups_ >= kMaxGroupOperations) return false;
    ++setups_;
  }
  std::thread([this, reactor, operation = std::move(operation)] {
    reactor->Finish(operation());
    // Last: after this the service may be gone.
    std::lock_guard<std::mutex> lock(setups_mu_);
    if (--setups_ == 0) setups_done_.notify_all();
  }).detach();
  return true;
}

grpc::Status BenchService::TooManyGroupOperations() {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat(kMaxGroupOperations,
                                   " group operations (create, destroy) are under way; "
                                   "try again when one has ended"));
}

BenchService::~BenchService() {
  std::unique_lock<std::mutex> lock(setups_mu_);
  setups_done_.wait(lock, [this] { return setups_ == 0; });
}

grpc::ServerUnaryReactor* BenchService::CreateGroup(grpc::CallbackServerContext* ctx,
                                                    const v1::CreateGroupRequest* req,
                                                    v1::Group* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (groups_ == nullptr)
      return Done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no process groups here"));
    // Bad input, and members that could not take part, are refused here,
    // before any thread starts.
    auto checked = groups_->CheckRequest(*req);
    if (!checked.ok()) return Done(ctx, ToGrpc(checked.status()));
    if (auto s = CheckMembersServing(checked->devices()); !s.ok()) return Done(ctx, ToGrpc(s));
    auto* reactor = ctx->DefaultReactor();
    if (!StartGroupOperation(reactor, [this, request = *std::move(checked), resp] {
          auto group = groups_->Create(request);
          if (group.ok()) *resp = *group;
          return ToGrpc(group.status());
        })) {
      reactor->Finish(TooManyGroupOperations());
    }
    return reactor;
  });
}

grpc::ServerUnaryReactor* BenchService::ListGroups(grpc::CallbackServerContext* ctx,
                                                   const v1::ListGroupsRequest* req,
                                                   v1::ListGroupsResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (groups_ != nullptr) {
      for (auto& g : groups_->List()) *resp->add_groups() = std::move(g);
    }
    return Done(ctx, grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* BenchService::DestroyGroup(grpc::CallbackServerContext* ctx,
                                                     const v1::DestroyGroupRequest* req,
                                                     v1::DestroyGroupResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (groups_ == nullptr)
      return Done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no process groups here"));
    if (req->group().empty()) {
      return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "group: expected a group id (benchctl groups list)"));
    }
    // Leaving waits for each member's worker (up to kLeaveGroupTimeout).
    auto* reactor = ctx->DefaultReactor();
    if (!StartGroupOperation(reactor, [this, id = req->group(), resp] {
          auto group = groups_->Destroy(id);
          if (group.ok()) *resp->mutable_group() = *group;
          return ToGrpc(group.status());
        })) {
      reactor->Finish(TooManyGroupOperations());
    }
    return reactor;
  });
}

grpc::ServerUnaryReactor* BenchService::GetNodeInfo(grpc::CallbackServerContext* ctx,
                                                    const v1::GetNodeInfoRequest* req,
                                                    v1::NodeInfo* resp) {
  // All from what the daemon holds (the supervisor's heartbeat keeps each
  // worker's state and free memory): no worker is asked, so a hung one
  // cannot hold this call.
  return Unary(ctx, req, resp, [&](const Gated& gated) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    resp->set_hostname(host);
    for (v1::Device& d : workers_->Devices()) *resp->add_devices() = std::move(d);
    *resp->mutable_versions() = workers_->WorkerVersions();
    resp->mutable_versions()->set_benchd(kVersion);
    resp->set_data_dir(node_.data_dir);
    resp->set_metrics_address(node_.metrics_address);
    *resp->mutable_security() = auth_->Describe(gated.checked);
    return Done(ctx, grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* BenchService::Estimate(grpc::CallbackServerContext* ctx,
                                                 const v1::EstimateRequest* req,
                                                 v1::MemoryEstimate* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    auto estimate = benchd::Estimate(*req);
    if (estimate.ok()) *resp = *std::move(estimate);
    return Done(ctx, ToGrpc(estimate.status()));
  });
}

grpc::ServerUnaryReactor* BenchService::ListNodes(grpc::CallbackServerContext* ctx,
                                                  const v1::ListNodesRequest* req,
                                                  v1::ListNodesResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (cluster_ == nullptr) {
      return Done(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no cluster in this build"));
    }
    *resp = cluster_->List();
    return Done(ctx, grpc::Status::OK);
  });
}

grpc::ServerUnaryReactor* BenchService::ListArtifacts(grpc::CallbackServerContext* ctx,
                                                      const v1::ListArtifactsRequest* req,
                                                      v1::ListArtifactsResponse* resp) {
  return Unary(ctx, req, resp, [&](const Gated&) {
    if (auto s = CheckJobId(req->job_id()); !s.ok()) return Done(ctx, ToGrpc(s));
    if (auto job = jobs_->Get(req->job_id()); !job.ok()) return Done(ctx, ToGrpc(job.status()));
    auto listed = artifacts_.List(req->job_id());
    if (!listed.ok()) return Done(ctx, ToGrpc(listed.status()));
    for (v1::Artifact& a : *listed) *resp->add_artifacts() = std::move(a);
    resp->set_artifacts_dir(*artifacts_.JobDir(req->job_id()));
    return Done(ctx, grpc::Status::OK);
  });
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* BenchService::FetchArtifact(
    grpc::CallbackServerContext* ctx, const v1::FetchArtifactRequest* req) {
  return ServerStream<v1::ArtifactChunk>(
      ctx, req, [&](const Gated&) -> grpc::ServerWriteReactor<v1::ArtifactChunk>* {
        if (auto s = CheckJobId(req->job_id()); !s.ok()) return Refused<v1::ArtifactChunk>(s);
        if (auto job = jobs_->Get(req->job_id()); !job.ok()) {
          return Refused<v1::ArtifactChunk>(job.status());
        }
        auto reader = artifacts_.Open(req->job_id(), req->name());
        if (!reader.ok()) return Refused<v1::ArtifactChunk>(reader.status());
        return new FetchReactor(*std::move(reader));
      });
}

}  // namespace benchd::server
