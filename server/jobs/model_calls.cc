#include "server/jobs/model_calls.h"

#include <functional>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace benchd::server {
namespace {

// The workers to ask: UP ones among `devices` that `wanted` accepts, each
// held (Workers::Hold, into `holds`) so that none is parked while the call is
// in flight. An UNRESPONSIVE one is an error (it may hold models we cannot
// see); a PARKED, DOWN or STARTING one holds no models and is not asked (nor
// started).
absl::StatusOr<std::vector<std::shared_ptr<WorkerClient>>> Targets(
    Workers* workers, const std::vector<std::string>& devices,
    const std::function<bool(const std::string&)>& wanted,
    std::vector<std::shared_ptr<void>>* holds) {
  std::vector<std::shared_ptr<WorkerClient>> out;
  for (const std::string& d : devices) {
    if (!wanted(d)) continue;
    const WorkerHealth health = workers->Health(d);
    if (health.state == v1::WORKER_STATE_UNRESPONSIVE) {
      return ServingWorker(health, d, workers->LogPath(d)).status();
    }
    if (health.state == v1::WORKER_STATE_UP && health.client) {
      holds->push_back(workers->Hold(d, "a resident-model call"));
      out.push_back(health.client);
    }
  }
  return out;
}

// Calls `call` on every client at once; `finish` gets the answers in the
// clients' order once the last has come.
template <typename Resp>
void CallEach(const std::vector<std::shared_ptr<WorkerClient>>& clients,
              const std::function<void(WorkerClient&, WorkerClient::Done<Resp>)>& call,
              std::function<void(std::vector<absl::StatusOr<Resp>>)> finish) {
  if (clients.empty()) {
    finish({});
    return;
  }
  struct Pending {
    std::mutex mu;
    size_t out;
    std::vector<absl::StatusOr<Resp>> answers;
    std::function<void(std::vector<absl::StatusOr<Resp>>)> finish;
  };
  auto pending = std::make_shared<Pending>();
  pending->out = clients.size();
  pending->answers.assign(clients.size(), absl::UnknownError("no answer"));
  pending->finish = std::move(finish);
  for (size_t i = 0; i < clients.size(); ++i) {
    call(*clients[i], [pending, i](absl::StatusOr<Resp> answer) {
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        pending->answers[i] = std::move(answer);
        if (--pending->out > 0) return;
      }
      pending->finish(std::move(pending->answers));
    });
  }
}

absl::Status DidNotAnswer(const WorkerClient& w, const absl::Status& s) {
  if (s.code() == absl::StatusCode::kResourceExhausted) return s;
  return absl::UnavailableError(
      absl::StrCat("the worker for ", w.device(), " did not answer: ", s.message()));
}

}  // namespace

void ListModelsOnWorkers(Workers* workers, const std::vector<std::string>& devices,
                         const std::string& device,
                         WorkerClient::Done<v1::ListModelsResponse> done) {
  std::vector<std::shared_ptr<void>> holds;  // released with the last answer
  auto targets = Targets(
      workers, devices, [&](const std::string& d) { return device.empty() || d == device; },
      &holds);
  if (!targets.ok()) return done(targets.status());
  CallEach<v1::ListModelsResponse>(
      *targets,
      [](WorkerClient& w, WorkerClient::Done<v1::ListModelsResponse> answered) {
        w.ListModelsAsync(v1::ListModelsRequest(), kListModelsTimeout, std::move(answered));
      },
      [clients = *targets, holds = std::move(holds), done = std::move(done)](
          std::vector<absl::StatusOr<v1::ListModelsResponse>> answers) mutable {
        holds.clear();  // every worker has answered
        v1::ListModelsResponse all;
        for (size_t i = 0; i < answers.size(); ++i) {
          if (!answers[i].ok()) return done(DidNotAnswer(*clients[i], answers[i].status()));
          for (auto& m : *answers[i]->mutable_models()) *all.add_models() = std::move(m);
        }
        done(std::move(all));
      });
}

void EvictModelOnWorkers(Workers* workers, const std::vector<std::string>& devices,
                         const v1::EvictModelRequest& request,
                         WorkerClient::Done<v1::EvictModelResponse> done) {
  // The service checks the whole request first (CheckSizeLimits); this keeps
  // the promise for any other caller, since the key is quoted back below.
  if (request.key().size() > kMaxModelKeyBytes) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("key: expected a key as ListModels gives it of at most ", kMaxModelKeyBytes,
                     " bytes, got ", QuotedForError(request.key()))));
  }
  std::vector<std::shared_ptr<void>> holds;  // released with the last answer
  auto targets = Targets(
      workers, devices,
      [&](const std::string& d) {
        if (!request.device().empty() && d != request.device()) return false;
        // A key names its device first ("cuda:0/small/fp32").
        return request.key().empty() || request.key().rfind(d + "/", 0) == 0;
      },
      &holds);
  if (!targets.ok()) return done(targets.status());
  CallEach<v1::EvictModelResponse>(
      *targets,
      [request](WorkerClient& w, WorkerClient::Done<v1::EvictModelResponse> answered) {
        w.EvictModelAsync(request, kEvictModelTimeout, std::move(answered));
      },
      [clients = *targets, holds = std::move(holds), key = request.key(), done = std::move(done)](
          std::vector<absl::StatusOr<v1::EvictModelResponse>> answers) mutable {
        holds.clear();  // every worker has answered
        v1::EvictModelResponse total;
        for (size_t i = 0; i < answers.size(); ++i) {
          if (!answers[i].ok()) return done(DidNotAnswer(*clients[i], answers[i].status()));
          total.set_evicted(total.evicted() + answers[i]->evicted());
        }
        if (!key.empty() && total.evicted() == 0) {
          return done(
              absl::NotFoundError(absl::StrCat("no resident model with key ", QuotedForError(key),
                                               "; `benchctl models` lists the keys")));
        }
        done(std::move(total));
      });
}

}  // namespace benchd::server
