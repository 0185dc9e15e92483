// What ListJobs answers for a job: everything but the result's arrays. A page
// of 1,000 jobs must fit a default client (4 MB) whatever the jobs ran, so
// the result keeps its scalar fields (headline figures: medians, tokens/s,
// TFLOP/s, peak memory, versions) and drops every repeated field (per-step
// timings, per-kernel rows, memory runs, collective rows and plots). The
// result's resolved spec is kept whole. GetJob has the rest.
#ifndef BENCHD_SERVER_JOBS_JOB_SUMMARY_H_
#define BENCHD_SERVER_JOBS_JOB_SUMMARY_H_

#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// `job` with its result summarized and Job.summary set.
v1::Job SummarizeJob(v1::Job job);

// Clears every repeated field of `result`, in every message below it but the
// specs.
void SummarizeResult(v1::JobResult* result);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_JOB_SUMMARY_H_
