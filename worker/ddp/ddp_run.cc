#include "worker/ddp/ddp_run.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/ddp_spec.h"
#include "common/ddp_timeline.h"
#include "common/stats.h"
#include "worker/adamw.h"
#include "worker/autocast_guard.h"
#include "worker/collective_run.h"
#include "worker/ddp/grad_ready_hooks.h"
#include "worker/ddp/gradient_sync.h"
#include "worker/ddp/reducer_sync.h"
#include "worker/ddp/sharded_adamw.h"
#include "worker/explicit_step.h"
#include "worker/job_options.h"
#include "worker/kineto_session.h"
#include "worker/out_of_memory.h"
#include "worker/phase_clock.h"
#include "worker/transformer.h"

namespace benchd::worker::ddp {
namespace {

using Clock = std::chrono::steady_clock;

SyncVariant SyncOf(v1::DdpVariant v) {
  switch (v) {
    case v1::DDP_VARIANT_FLAT:
      return SyncVariant::kFlat;
    case v1::DDP_VARIANT_OVERLAP:
      return SyncVariant::kOverlap;
    case v1::DDP_VARIANT_BUCKETED:
      return SyncVariant::kBucketed;
    default:
      return SyncVariant::kNaive;
  }
}

// Times one step: CUDA events on the current stream, or the host clock.
class StepTimer {
 public:
  explicit StepTimer(const WorkerDevice& device) : cuda_(device.is_cuda()) {}
  const char* name() const { return cuda_ ? "cuda_event" : "host_steady_clock"; }
  void Start() {
    host_start_ = Clock::now();
#if BENCHD_WITH_CUDA
    if (cuda_) start_.record(at::cuda::getCurrentCUDAStream());
#endif
  }
  void Stop() {
#if BENCHD_WITH_CUDA
    if (cuda_) end_.record(at::cuda::getCurrentCUDAStream());
#endif
  }
  // After the device has reached Stop.
  double Seconds() {
#if BENCHD_WITH_CUDA
    if (cuda_) return start_.elapsed_time(end_) / 1e3;
#endif
    return std::chrono::duration<double>(Clock::now() - host_start_).count();
  }

 private:
  const bool cuda_;
  Clock::time_point host_start_;
#if BENCHD_WITH_CUDA
  at::cuda::CUDAEvent start_{cudaEventDefault}, end_{cudaEventDefault};
#endif
};

struct Batch {
  torch::Tensor ids, targets;
};

// This rank's batch: random tokens from (seed, rank), the same in every run
// and step (the figures are of the step, not the data).
Batch RankBatch(const v1::BenchmarkSpec& step, int rank, torch::Device device) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(step.seed() * 1000003ULL + rank);
  const auto tokens =
      torch::randint(step.model().vocab_size(), {step.batch_size(), step.context_length() + 1}, gen,
                     torch::TensorOptions().dtype(torch::kLong));
  return {tokens.narrow(1, 0, step.context_length()).contiguous().to(device),
          tokens.narrow(1, 1, step.context_length()).contiguous().to(device)};
}

// The float64 sum and sum of squares of every parameter: equal on every rank
// exactly when (almost surely) the parameters are.
std::pair<double, double> Checksum(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum, sq;
  for (const auto& p : params) {
    const auto d = p.detach().to(torch::kFloat64);
    const auto s = d.sum(), q = d.square().sum();
    sum = sum.defined() ? sum + s : s;
    sq = sq.defined() ? sq + q : q;
  }
  return {sum.item<double>(), sq.item<double>()};
}

// The group's all-reduce at sizes from 4 KiB by 4x up to the gradients'
// bytes (at least 4 MiB, so a small model's CPU group still shows its
// bandwidth; at most 256 MiB), for DdpOverheadModel: per size 3 calls to warm up
// then 5 timed back to back (no host wait between, as the backward issues
// them), the median. Every rank runs it; the daemon fits rank 0's.
void AllReduceSweep(GroupMember& m, const WorkerDevice& device, int64_t gradient_bytes,
                    internal::DdpRankRun* out) {
  constexpr int kWarmup = 3, kTimed = 5;
  const int64_t largest = std::clamp<int64_t>(gradient_bytes, 4 << 20, int64_t{256} << 20);
  const auto buffer = torch::zeros({largest / 4}, torch::TensorOptions().device(device.device));
  auto clock = MakePhaseClock(device, kTimed + 1);
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  for (int64_t bytes = 4 << 10; bytes <= largest; bytes *= 4) {
    std::vector<torch::Tensor> tensors{buffer.narrow(0, 0, bytes / 4)};
    // wait() without a timeout: NCCL's wait(timeout) polls the host every
    // millisecond (each call would read ~1.1 ms); this one makes the stream
    // wait, and WaitForDevice keeps the deadline. Gloo's waits within the
    // group's own timeout.
    for (int i = 0; i < kWarmup; ++i) m.pg->allreduce(tensors, sum)->wait();
    clock->Reset();
    clock->Mark();
    for (int i = 0; i < kTimed; ++i) {
      m.pg->allreduce(tensors, sum)->wait();
      clock->Mark();
    }
    WaitForDevice(m, Clock::now() + m.timeout);
    std::vector<double> seconds;
    for (int i = 0; i < kTimed; ++i) seconds.push_back(clock->Seconds(i, i + 1));
    out->add_sweep_bytes(bytes);
    out->add_sweep_seconds(ComputeStats(seconds).median());
  }
}

// When each parameter's gradient became final in one step's backward: marks
// on the step's clock, read once the device has finished.
class ReadyTimes {
 public:
  ReadyTimes(const std::vector<torch::Tensor>& params, const WorkerDevice& device)
      : clock_(MakePhaseClock(device, static_cast<int>(params.size()) + 2)),
        mark_of_(params.size(), -1),
        seconds_(params.size()) {
    for (size_t i = 0; i < params.size(); ++i) index_of_[params[i].unsafeGetTensorImpl()] = i;
  }
  void BeginBackward() {
    clock_->Reset();
    clock_->Mark();
    marks_ = 1;
    std::fill(mark_of_.begin(), mark_of_.end(), -1);
  }
  void Ready(const std::vector<torch::Tensor>& ready) {
    clock_->Mark();
    for (const auto& p : ready) {
      auto it = index_of_.find(p.unsafeGetTensorImpl());
      if (it != index_of_.end()) mark_of_[it->second] = marks_;
    }
    ++marks_;
  }
  void EndBackward() {
    clock_->Mark();
    end_mark_ = marks_++;
  }
  // After the device finished the step.
  void Record() {
    backward_.push_back(clock_->Seconds(0, end_mark_));
    for (size_t i = 0; i < mark_of_.size(); ++i) {
      seconds_[i].push_back(clock_->Seconds(0, mark_of_[i] < 0 ? end_mark_ : mark_of_[i]));
    }
  }
  void Report(const std::vector<torch::Tensor>& params, internal::DdpRankRun* out) const {
    if (backward_.empty()) return;
    for (size_t i = 0; i < params.size(); ++i) {
      out->add_param_bytes(params[i].numel() * static_cast<int64_t>(params[i].element_size()));
      out->add_param_ready_seconds(ComputeStats(seconds_[i]).median());
    }
    out->set_backward_seconds(ComputeStats(backward_).median());
  }

 private:
  std::unique_ptr<PhaseClock> clock_;
  std::unordered_map<const void*, size_t> index_of_;
  std::vector<int> mark_of_;
  int marks_ = 0, end_mark_ = 0;
  std::vector<std::vector<double>> seconds_;
  std::vector<double> backward_;
};

}  // namespace

absl::Status RunDdp(const v1::DdpSpec& spec, GroupMember& m, ModelCache& cache,
                    const WorkerDevice& device, const std::string& job_artifacts_dir,
                    const DdpHooks& hooks, bool* broken) {
  const v1::BenchmarkSpec& step = spec.step();
  std::string stage = "building the model";
  std::string run_label;
  try {
    bool was_resident = false;
    auto resident = cache.Acquire(step.model(), step.precision(), step.seed(), &was_resident);
    TransformerLM model = resident->model;
    const std::vector<torch::Tensor> params = model->parameters();
    const Batch batch = RankBatch(step, m.rank, device.device);
    // Every run starts from the same parameters, rank 0's: broadcast once,
    // kept on the host (so the runs' peaks are their own) and copied back
    // before each run. Runs then train the same model on the same data, and
    // their losses compare.
    stage = "the set-up (rank 0's parameters broadcast)";
    BroadcastFromRankZero(params, *m.pg);
    WaitForDevice(m, Clock::now() + m.timeout);
    std::vector<torch::Tensor> start;
    for (const auto& p : params) {
      auto host = p.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
      // Pinned, so that restoring xl's 6.4 GB takes a fraction of a second.
      start.push_back(device.is_cuda() ? host.pin_memory() : host);
    }
    const Tf32Guard tf32(step.allow_tf32());
    StepTimer timer(device);
    int64_t gradient_bytes = 0;
    for (const auto& p : params) gradient_bytes += p.numel() * p.element_size();
    stage = "the all-reduce sweep for the overhead model";
    internal::DdpRankRun sweep;
    AllReduceSweep(m, device, gradient_bytes, &sweep);
    // One profiled step per run (DdpSpec.traces), each in its own session
    // (worker/kineto_session.h: a session prepared early traces the runs'
    // measured steps too).
    std::set<prof::ActivityType> activities = {prof::ActivityType::CPU};
    if (device.is_cuda()) activities.insert(prof::ActivityType::CUDA);
    const prof::ProfilerConfig profiler_config(prof::ProfilerState::KINETO,
                                               /*report_input_shapes=*/false,
                                               /*profile_memory=*/false);

    std::vector<DdpRunSpec> runs = {DdpRunSpec{}};  // the compute-only run first
    for (const DdpRunSpec& r : DdpRuns(spec)) runs.push_back(r);
    for (size_t run = 0; run < runs.size(); ++run) {
      const DdpRunSpec& r = runs[run];
      run_label = DdpRunLabel(r);
      stage = "the agreement to go on";
      if (AgreeToStop(m, hooks.cancelled && hooks.cancelled())) {
        return absl::CancelledError("cancelled");
      }
      if (hooks.log) hooks.log(absl::StrCat("run ", run, " of ", runs.size() - 1, ": ", run_label));

      stage = "the set-up";
      // The previous run's optimizer state goes first, so the peak is this run's.
      resident->optimizer.reset();
      {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(start[i]);
      }
      ResetPeakAllocated(device);
      const bool compute_only = r.variant == v1::DDP_VARIANT_UNSPECIFIED;
      // A fresh AdamW on the model (stateless until it steps: a sharded run
      // never steps it, and leaves it empty).
      resident->optimizer = std::make_unique<AdamW>(params);
      std::unique_ptr<ShardedAdamW> sharded_opt;
      if (r.optimizer == v1::DDP_OPTIMIZER_SHARDED_ADAMW) {
        sharded_opt = std::make_unique<ShardedAdamW>(params, m.pg);
      }
      // adamw_overlapped: one AdamW per parameter (its state and t are per
      // parameter anyway, so the update is adamw's), each stepped as soon as
      // GradientSync::Finish has its parameter's mean.
      std::vector<std::unique_ptr<AdamW>> per_param_opt;
      if (r.optimizer == v1::DDP_OPTIMIZER_ADAMW_OVERLAPPED) {
        for (const auto& p : params)
          per_param_opt.push_back(std::make_unique<AdamW>(std::vector<torch::Tensor>{p}));
      }
      const int64_t bucket_bytes = static_cast<int64_t>(r.bucket_mb * 1e6);
      std::optional<GradientSync> sync;
      std::unique_ptr<ReducerSync> reducer;
      if (r.variant == v1::DDP_VARIANT_REDUCER) {
        reducer = std::make_unique<ReducerSync>(params, m, bucket_bytes);
      } else if (!compute_only) {
        sync.emplace(SyncOf(r.variant), params, m.pg, bucket_bytes,
                     r.compression == v1::DDP_GRADIENT_COMPRESSION_BF16);
      }
      std::optional<ReadyTimes> ready;
      if (compute_only) ready.emplace(params, device);
      // Who says a gradient is final: the explicit backward, layer by layer;
      // or with autograd, hooks on the engine's AccumulateGrad nodes,
      // parameter by parameter (the reducer has its own).
      std::optional<ExplicitStep> explicit_step;
      std::unique_ptr<GradReadyHooks> autograd_hooks;
      if (!step.autograd()) {
        explicit_step.emplace(*model);
      } else if (!reducer) {
        autograd_hooks = std::make_unique<GradReadyHooks>(params, [&](const torch::Tensor& p) {
          if (sync) sync->GradsReady({p});
          if (ready) ready->Ready({p});
        });
      }

      internal::DdpRankRun out;
      if (compute_only) out = sweep;
      out.set_run(static_cast<int>(run));
      out.set_timer(timer.name());
      int64_t calls = 0, bytes = 0;
      double loss = 0;
      int64_t step_bytes = 0, step_calls = 0, backward_peak = 0, optimizer_peak = 0;
      // One step: forward, backward with the synchronisation, optimizer.
      auto run_step = [&]() -> torch::Tensor {
        model->zero_grad();
        if (sync) sync->BeginStep();
        if (reducer) reducer->BeforeForward();
        torch::Tensor l;
        {
          const AutocastGuard autocast(device.device.type(), AutocastDtype(step.precision()));
          l = explicit_step
                  ? explicit_step->Forward(batch.ids, batch.targets, /*keep_for_backward=*/true)
                  : CrossEntropy(model->forward(batch.ids), batch.targets);
        }
        if (ready) ready->BeginBackward();
        if (!explicit_step) {
          if (reducer) reducer->BeforeBackward();
          l.backward();
        } else if (sync) {
          explicit_step->Backward(
              [&](const std::vector<torch::Tensor>& grads) { sync->GradsReady(grads); });
        } else if (ready) {
          explicit_step->Backward(
              [&](const std::vector<torch::Tensor>& grads) { ready->Ready(grads); });
        } else {
          explicit_step->Backward();
        }
        if (sync) {
          if (per_param_opt.empty()) {
            sync->Finish();
          } else {
            sync->Finish([&](const std::vector<size_t>& averaged) {
              for (size_t i : averaged) RunOptimizerStep(*per_param_opt[i], step);
            });
          }
        }
        if (ready) ready->EndBackward();
        step_bytes = sync ? sync->stats().bytes : reducer ? reducer->Bytes() : 0;
        step_calls = sync ? sync->stats().calls : reducer ? reducer->Buckets() : 0;
        // The allocator's peaks apart: to the end of the synchronisation
        // (activations and gradients), and in the optimizer step (the
        // figure ZeRO-1's formula predicts). Host-side accounting, in issue
        // order: no synchronisation needed.
        backward_peak = std::max(backward_peak, PeakAllocatedBytes(device));
        ResetPeakAllocated(device);
        if (!per_param_opt.empty()) {
          // Stepped in Finish, overlapping the communication still running.
        } else if (sharded_opt) {
          const ShardedAdamW::Moved moved =
              sharded_opt->Step([&](AdamW& shard) { RunOptimizerStep(shard, step); });
          step_bytes += moved.bytes;
          step_calls += moved.calls;
        } else {
          RunOptimizerStep(*resident->optimizer, step);
        }
        optimizer_peak = std::max(optimizer_peak, PeakAllocatedBytes(device));
        ResetPeakAllocated(device);
        return l;
      };
      const int64_t total = step.warmup_steps() + step.measure_steps();
      for (int64_t s = 0; s < total; ++s) {
        stage = absl::StrCat(run_label, ", step ", s + 1, " of ", total);
        const bool measured = s >= step.warmup_steps();
        timer.Start();
        const torch::Tensor l = run_step();
        timer.Stop();
        WaitForDevice(m, Clock::now() + m.timeout);
        const double seconds = timer.Seconds();
        if (ready && measured) ready->Record();
        if (measured) {
          out.add_step_seconds(seconds);
          out.add_comm_host_seconds(sync ? sync->stats().host_seconds : 0);
          calls = step_calls;
          bytes = step_bytes;
          if (s + 1 == total) loss = l.item<double>();
        }
        if (hooks.log) hooks.log(absl::StrCat(run_label, ": step ", s + 1, " of ", total));
      }
      if (ready) ready->Report(params, &out);
      // Of the run's steps (the profiled one comes after).
      const int64_t peak = std::max(backward_peak, optimizer_peak);
      out.mutable_rank()->set_backward_peak_memory_bytes(backward_peak);
      out.mutable_rank()->set_optimizer_peak_memory_bytes(optimizer_peak);
      if (spec.traces()) {
        // Not a measured step: the profiler's own cost stays out of the figures.
        stage = absl::StrCat(run_label, ", the profiled step");
        auto kineto = std::make_unique<KinetoSession>(profiler_config, activities);
        kineto->Start();
        run_step();
        WaitForDevice(m, Clock::now() + m.timeout);
        kineto->Stop();
        v1::DdpTimeline* timeline = out.mutable_rank()->mutable_timeline();
        *timeline =
            DdpTimelineFromEvents(FlattenProfile(kineto->result()->event_tree()), device.is_cuda());
        if (!job_artifacts_dir.empty() && MakeDirs(job_artifacts_dir).ok()) {
          const std::string name = absl::StrCat("ddp-run", run, "-rank", m.rank, ".trace.json");
          kineto->result()->save(absl::StrCat(job_artifacts_dir, "/", name));
          timeline->set_trace_artifact(name);
        }
      }
      stage = "the check that the ranks agree";
      const auto [sum, sum_sq] = Checksum(params);
      out.set_calls_per_step(calls);
      out.set_bytes_per_step(bytes);
      if (sync) out.set_buckets(static_cast<int>(sync->buckets().size()));
      if (reducer) out.set_buckets(static_cast<int>(reducer->Buckets()));
      out.set_parameter_sum(sum);
      out.set_parameter_sum_sq(sum_sq);
      out.set_loss(loss);
      out.set_parameter_count(resident->parameter_count);
      out.set_device_name(device.description);
      v1::DdpRank* rank = out.mutable_rank();
      rank->set_rank(m.rank);
      rank->set_device(device.name);
      rank->set_step_median_seconds(
          ComputeStats({out.step_seconds().begin(), out.step_seconds().end()}).median());
      rank->set_comm_host_median_seconds(
          ComputeStats({out.comm_host_seconds().begin(), out.comm_host_seconds().end()}).median());
      rank->set_peak_memory_bytes(peak);
      int64_t state_bytes = 0;
      if (sharded_opt) {
        state_bytes = sharded_opt->StateBytes();
      } else if (!per_param_opt.empty()) {
        for (const auto& o : per_param_opt) state_bytes += o->StateBytes();
      } else {
        state_bytes = resident->optimizer->StateBytes();
      }
      rank->set_optimizer_state_bytes(state_bytes);
      if (hooks.on_run && !hooks.on_run(out)) return absl::CancelledError("the stream is gone");
    }
    // The model stays resident with the last run's AdamW state (empty after
    // a sharded run, whose state was its shard's).
    cache.UpdateBytes(*resident);
  } catch (const CollectiveTimeout& t) {
    *broken = true;
    return absl::DeadlineExceededError(
        absl::StrCat("data-parallel training on group ", m.id, " (rank ", m.rank,
                     ") did not finish within ", m.timeout.count() / 1000.0, " s during ", stage,
                     ": ", t.what, "; the group was aborted and is broken"));
  } catch (const c10::OutOfMemoryError& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory on ", device.name, " (rank ", m.rank, ") during ", stage, ": ",
                     FirstLine(e.what_without_backtrace()), "; ", MemoryFigures(device)));
  } catch (const c10::Error& e) {
    if (IsHostOutOfMemory(e)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory on ", device.name, " (rank ", m.rank, ") during ", stage,
                       ": ", FirstLine(e.what_without_backtrace()), "; ", MemoryFigures(device)));
    }
    *broken = true;
    return absl::AbortedError(absl::StrCat(
        "data-parallel training on group ", m.id, " (rank ", m.rank, ") failed during ", stage,
        ": ", FirstLine(e.what_without_backtrace()), "; the group is broken"));
  } catch (const std::exception& e) {
    *broken = true;
    return absl::AbortedError(absl::StrCat("data-parallel training on group ", m.id, " (rank ",
                                           m.rank, ") failed during ", stage, ": ",
                                           FirstLine(e.what()), "; the group is broken"));
  }
  return absl::OkStatus();
}

}  // namespace benchd::worker::ddp
