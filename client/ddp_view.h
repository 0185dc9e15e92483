// benchctl's view of a data-parallel job (v1::DdpSpec, v1::DdpResult): the
// spec on one line, the result as a header (ranks, group, batch, model,
// timer), a table with a line per run, each rank's own figures and the check
// that the ranks ended with the same parameters; a live line per run as it
// ends, and the runs as CSV.
#ifndef BENCHD_CLIENT_DDP_VIEW_H_
#define BENCHD_CLIENT_DDP_VIEW_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// Every set field on one line: "tiny (...), bf16, cpu:0,cpu:1 (gloo), global
// batch 8, context 128, steps 10, seed 0, variants naive, bucketed, buckets
// 1, 10 MB, optimizers adamw, sharded_adamw".
std::string DdpSpecSummary(const v1::DdpSpec& spec);

// "compute only", "bucketed 25 MB + sharded_adamw" (common's DdpRunLabel).
std::string DdpRowLabel(const v1::DdpRow& row);

// One line per run, compute only first: step median, p95 and cv, the
// exposed communication (ms and share of the step) and the overhead model's
// prediction of it, the share of the profiled step's communication hidden
// under computation, collectives and MB per
// step, buckets, peak memory and optimizer state per rank (a sharded run
// with the unsharded state beside it), whether the ranks agree (DIVERGED when
// not) and the loss.
std::string DdpTable(const v1::DdpResult& result);

// One line per rank of each run: device, step median, host time in the
// group's calls, peak memory, optimizer state.
std::string DdpRanksTable(const v1::DdpResult& result);

// The overhead model (DdpOverheadModel): the fitted o and w, the backward
// and gradients, the predicted best bucket beside the measured one; or why
// it was not made. Empty when the result has none.
std::string DdpModelView(const v1::DdpResult& result);

// The header, the runs, the ranks, the overhead model, rank 0's timelines as
// character lanes, and the verdict on the ranks' parameters.
std::string DdpResultView(const v1::DdpResult& result);

// One live line for a run as it ends.
std::string DdpRowLine(const v1::DdpRow& row);

// What `watch` says when the job succeeded: "compute only 12.345 ms; fastest
// bucketed 25 MB + adamw 14.100 ms (exposed 1.755 ms, 12.45%)", and how many
// runs DIVERGED if any did.
std::string DdpFinalSummary(const v1::DdpResult& result);

// `get --csv`: one row per run, compute only first (its variant empty).
// Durations in seconds, sizes in bytes, numbers in shortest round-trip form.
inline constexpr const char* kDdpCsvHeader =
    "job_id,run,variant,bucket_mb,optimizer,step_median_s,step_p95_s,step_cv,exposed_comm_s,"
    "exposed_comm_fraction,calls_per_step,bytes_per_step,buckets,peak_memory_bytes,"
    "optimizer_state_bytes,unsharded_optimizer_state_bytes,ranks_agree,loss,"
    "predicted_exposed_comm_s,comm_hidden_fraction";
std::string DdpCsv(const v1::Job& job);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_DDP_VIEW_H_
