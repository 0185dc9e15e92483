#include "server/core/job_state.h"

#include <chrono>

namespace benchd::server {

bool IsFinal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED || s == v1::JOB_STATE_INTERRUPTED;
}

std::string JobStateName(v1::JobState s) {
  switch (s) {
    case v1::JOB_STATE_QUEUED:
      return "queued";
    case v1::JOB_STATE_RUNNING:
      return "running";
    case v1::JOB_STATE_SUCCEEDED:
      return "succeeded";
    case v1::JOB_STATE_FAILED:
      return "failed";
    case v1::JOB_STATE_CANCELLED:
      return "cancelled";
    case v1::JOB_STATE_INTERRUPTED:
      return "interrupted";
    default:
      return "unspecified";
  }
}

void SetTerminalEvent(const v1::Job& job, v1::JobEvent* e) {
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      *e->mutable_result() = job;
      break;
    case v1::JOB_STATE_CANCELLED:
      *e->mutable_cancelled() = job;
      break;
    case v1::JOB_STATE_INTERRUPTED:
      *e->mutable_interrupted() = job;
      break;
    default:
      *e->mutable_failed() = job;
      break;
  }
}

}  // namespace benchd::server
