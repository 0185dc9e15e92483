// ListModels and EvictModel across a node's workers, without waiting: each
// worker that is UP is asked at once (WorkerClient's async forms) and `done`
// runs when the last one has answered, on that answer's thread. A worker
// that is DOWN or STARTING holds no models and is skipped; one that is
// UNRESPONSIVE fails the call at once (UNAVAILABLE naming it) rather than
// hold it until a deadline.
#ifndef BENCHD_SERVER_JOBS_MODEL_CALLS_H_
#define BENCHD_SERVER_JOBS_MODEL_CALLS_H_

#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

// Resident models of `device`'s worker, or ("" ) of every device in `devices`.
// `device`, when given, must be one of `devices` (checked by the caller).
void ListModelsOnWorkers(Workers* workers, const std::vector<std::string>& devices,
                         const std::string& device,
                         WorkerClient::Done<v1::ListModelsResponse> done);

// Evicts on the workers `request` names (a device, a key "cuda:0/small/fp32",
// or all). NOT_FOUND when a key was given and no worker held it;
// INVALID_ARGUMENT, asking no worker, for a key over kMaxModelKeyBytes.
void EvictModelOnWorkers(Workers* workers, const std::vector<std::string>& devices,
                         const v1::EvictModelRequest& request,
                         WorkerClient::Done<v1::EvictModelResponse> done);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_MODEL_CALLS_H_
