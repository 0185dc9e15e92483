// Small facts about a job's state, shared by the job manager, the
// group registry, the service and the store (no dependency on any of them).
#ifndef BENCHD_SERVER_CORE_JOB_STATE_H_
#define BENCHD_SERVER_CORE_JOB_STATE_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// Succeeded, failed, cancelled or interrupted: nothing more will happen to it.
bool IsFinal(v1::JobState state);
// "succeeded", "queued", ... (the metrics' and the logs' spelling).
std::string JobStateName(v1::JobState state);
// The event that ends a job's stream, for a job in a final state: result
// (succeeded), cancelled, interrupted, or failed.
void SetTerminalEvent(const v1::Job& job, v1::JobEvent* event);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_JOB_STATE_H_
