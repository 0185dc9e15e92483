// One member's part of a data-parallel job (internal::DdpRun): the resident
// model for the step's config (ModelCache), trained on this rank's batch in
// every run of the request, one after another: first compute-only (no
// communication: the baseline for exposed communication), then each variant
// x bucket size x optimizer of DdpRuns(spec). Each run starts from the same
// parameters (rank 0's, broadcast once at the start) and a fresh optimizer,
// runs warm-up then measured steps on the same batch, then (DdpSpec.traces)
// one profiled step whose Kineto trace gives this rank's timeline, and
// reports this rank's figures (DdpRankRun) when it ends; so every variant
// trains the same model on the same data, and their final losses agree to
// rounding. Before the runs, an all-reduce sweep on the group, and in the
// compute-only run when each gradient became final: the daemon's overhead
// model (common/ddp_model.h) fits and predicts from them.
//
// The backward is benchd's explicit one, which says when each layer's
// gradients are final; with step.autograd, the autograd engine's, whose
// AccumulateGrad hooks say it per parameter (grad_ready_hooks.h), and the
// reducer variant is c10d's Reducer on those hooks (reducer_sync.h).
//
// Timing: a step is forward, backward with the gradients' synchronisation,
// and the optimizer step; on CUDA, events on the current stream around it
// (NCCL's stream is made to wait for by the current one, so the end event
// follows the communication), on a CPU the host clock. The device is
// synchronised after every step, within the group's timeout, and every rank
// agrees before each run whether to go on, so a cancel stops every rank at
// the same point.
#ifndef BENCHD_WORKER_DDP_DDP_RUN_H_
#define BENCHD_WORKER_DDP_DDP_RUN_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "worker/model_cache.h"
#include "worker/process_groups.h"

namespace benchd::worker::ddp {

struct DdpHooks {
  // A run's figures as soon as it ends; false when they could not be sent.
  std::function<bool(const internal::DdpRankRun&)> on_run;
  // Every step ends with this: progress for the daemon's deadline.
  std::function<void(const std::string&)> log;
  std::function<bool()> cancelled;
};

// `spec` resolved with step.batch_size per rank. OK; CANCELLED (every rank
// agreed to stop); RESOURCE_EXHAUSTED (out of memory, with the figures);
// DEADLINE_EXCEEDED or ABORTED with *broken set (a collective did not finish
// or failed: the group cannot be used again).
// `job_artifacts_dir` receives the profiled steps' traces (DdpSpec.traces);
// empty: the timelines are still made, the traces not kept.
absl::Status RunDdp(const v1::DdpSpec& spec, GroupMember& member, ModelCache& cache,
                    const WorkerDevice& device, const std::string& job_artifacts_dir,
                    const DdpHooks& hooks, bool* broken);

}  // namespace benchd::worker::ddp

#endif  // BENCHD_WORKER_DDP_DDP_RUN_H_
