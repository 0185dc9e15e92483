#include "worker/collective_run.h"

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <thread>
#include <vector>

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/collective_math.h"

namespace benchd::worker {
namespace {

using Clock = std::chrono::steady_clock;

torch::Dtype TorchDtype(v1::CollectiveDtype d) {
  switch (d) {
    case v1::COLLECTIVE_DTYPE_FP16:
      return torch::kFloat16;
    case v1::COLLECTIVE_DTYPE_BF16:
      return torch::kBFloat16;
    case v1::COLLECTIVE_DTYPE_FP64:
      return torch::kFloat64;
    case v1::COLLECTIVE_DTYPE_INT32:
      return torch::kInt32;
    default:
      return torch::kFloat32;
  }
}

torch::Tensor Pattern(int64_t n, int64_t offset, torch::Device device) {
  return torch::arange(offset, offset + n,
                       torch::TensorOptions().dtype(torch::kInt64).device(device))
      .remainder(7);
}

struct Buffers {
  torch::Tensor input, output;
};

// The op's tensors (zeros). In place: all_gather's input is its rank's slice
// of the output, reduce_scatter's output its rank's slice of the input.
Buffers Allocate(v1::CollectiveOp op, bool in_place, const CollectiveShape& shape,
                 const GroupMember& m, torch::Dtype dtype) {
  const auto options = torch::TensorOptions().dtype(dtype).device(m.tensor_device);
  Buffers b;
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_GATHER:
      b.output = torch::zeros({shape.output_count}, options);
      b.input = in_place ? b.output.narrow(0, m.rank * shape.count, shape.count)
                         : torch::zeros({shape.count}, options);
      break;
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      b.input = torch::zeros({shape.count}, options);
      b.output = in_place ? b.input.narrow(0, m.rank * shape.output_count, shape.output_count)
                          : torch::zeros({shape.output_count}, options);
      break;
    case v1::COLLECTIVE_OP_ALL_TO_ALL:
      b.input = torch::zeros({shape.count}, options);
      b.output = torch::zeros({shape.output_count}, options);
      break;
    default:  // all_reduce, broadcast: one buffer
      b.input = b.output = torch::zeros({shape.count}, options);
  }
  return b;
}

c10::intrusive_ptr<c10d::Work> Launch(v1::CollectiveOp op, Buffers& b, GroupMember& m) {
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return m.pg->_allgather_base(b.output, b.input);
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      return m.pg->_reduce_scatter_base(b.output, b.input);
    case v1::COLLECTIVE_OP_ALL_TO_ALL: {
      std::vector<int64_t> equal;  // empty = equal splits
      return m.pg->alltoall_base(b.output, b.input, equal, equal);
    }
    case v1::COLLECTIVE_OP_BROADCAST: {
      std::vector<at::Tensor> t{b.output};
      c10d::BroadcastOptions o;
      o.rootRank = 0;
      return m.pg->broadcast(t, o);
    }
    default: {
      std::vector<at::Tensor> t{b.output};
      return m.pg->allreduce(t);  // sum
    }
  }
}

bool LooksLikeTimeout(const std::string& what) {
  for (const char* s : {"imed out", "imeout", "DEADLINE"}) {
    if (what.find(s) != std::string::npos) return true;
  }
  return false;
}

std::string Trim(const std::string& what) {
  return what.substr(0, what.find("\nException raised from"));
}

// Warm-up and measured iterations; returns the measured ones' seconds.
std::vector<double> TimeIterations(v1::CollectiveOp op, Buffers& b, GroupMember& m, int64_t warmup,
                                   int64_t iters, std::string* timer) {
  std::vector<double> seconds;
  seconds.reserve(iters);
  auto deadline = [&] { return Clock::now() + m.timeout; };
#if BENCHD_WITH_CUDA
  if (m.tensor_device.is_cuda()) {
    *timer = "cuda_event";
    auto stream = at::cuda::getCurrentCUDAStream(m.tensor_device.index());
    c10::intrusive_ptr<c10d::Work> last;
    for (int64_t i = 0; i < warmup; ++i) {
      last = Launch(op, b, m);
      last->wait();
    }
    if (last) CompleteWork(last, m, deadline());
    std::vector<at::cuda::CUDAEvent> start, end;
    start.reserve(iters);
    end.reserve(iters);
    for (int64_t i = 0; i < iters; ++i) {
      start.emplace_back(cudaEventDefault);
      end.emplace_back(cudaEventDefault);
    }
    for (int64_t i = 0; i < iters; ++i) {
      start[i].record(stream);
      last = Launch(op, b, m);
      last->wait();
      end[i].record(stream);
    }
    CompleteWork(last, m, deadline());
    for (int64_t i = 0; i < iters; ++i) seconds.push_back(start[i].elapsed_time(end[i]) / 1e3);
    return seconds;
  }
#endif
  *timer = "host_steady_clock";
  for (int64_t i = 0; i < warmup + iters; ++i) {
    const auto t0 = Clock::now();
    auto work = Launch(op, b, m);
    CompleteWork(work, m, deadline());
    const auto t1 = Clock::now();
    if (i >= warmup) seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  return seconds;
}

}  // namespace

// Waits for `work`: on a CPU through Work::wait (Gloo's own timeout throws);
// on CUDA the current stream waits for it, then WaitForDevice.
void CompleteWork(const c10::intrusive_ptr<c10d::Work>& work, GroupMember& m,
                  std::chrono::steady_clock::time_point deadline) {
  work->wait(m.timeout);
  WaitForDevice(m, deadline);
}

void WaitForDevice(GroupMember& m, std::chrono::steady_clock::time_point deadline) {
#if BENCHD_WITH_CUDA
  if (m.tensor_device.is_cuda()) {
    at::cuda::CUDAEvent done;
    done.record(at::cuda::getCurrentCUDAStream(m.tensor_device.index()));
    while (!done.query()) {
      if (Clock::now() > deadline) {
        m.pg->abort();
        throw CollectiveTimeout{"the device did not finish it"};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
#else
  (void)m;
  (void)deadline;
#endif
}

bool AgreeToStop(GroupMember& m, bool stop) {
  std::vector<at::Tensor> flag{torch::full(
      {1}, stop ? 1 : 0, torch::TensorOptions().dtype(torch::kInt32).device(m.tensor_device))};
  c10d::AllreduceOptions max;
  max.reduceOp = c10d::ReduceOp::MAX;
  CompleteWork(m.pg->allreduce(flag, max), m, Clock::now() + m.timeout);
  return flag[0].item<int>() != 0;
}

torch::Tensor CheckInput(v1::CollectiveOp op, int rank, int world, int64_t count,
                         torch::Device device) {
  switch (op) {
    case v1::COLLECTIVE_OP_BROADCAST:
      return rank == 0 ? Pattern(count, 0, device) + 1
                       : torch::full({count}, -1,
                                     torch::TensorOptions().dtype(torch::kInt64).device(device));
    default:  // every other op: r+1+m(j) over the rank's input
      return Pattern(count, 0, device) + (rank + 1);
  }
}

torch::Tensor CheckExpected(v1::CollectiveOp op, int rank, int world, int64_t count,
                            torch::Device device) {
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const int64_t n = world;
  const int64_t tri = n * (n + 1) / 2;
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return Pattern(count, 0, device) * n + tri;
    case v1::COLLECTIVE_OP_BROADCAST:
      return Pattern(count, 0, device) + 1;
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return torch::arange(1, n + 1, i64).repeat_interleave(count) +
             Pattern(count, 0, device).repeat({n});
    case v1::COLLECTIVE_OP_REDUCE_SCATTER: {
      const int64_t k = count / n;
      return Pattern(k, rank * k, device) * n + tri;
    }
    case v1::COLLECTIVE_OP_ALL_TO_ALL: {
      const int64_t k = count / n;
      return torch::arange(1, n + 1, i64).repeat_interleave(k) +
             Pattern(k, rank * k, device).repeat({n});
    }
    default:
      return torch::Tensor();
  }
}

absl::Status RunCollective(const internal::CollectiveRun& run, GroupMember& m,
                           const CollectiveHooks& hooks, bool* broken) {
  const v1::CollectiveOp op = run.op();
  const torch::Dtype dtype = TorchDtype(run.dtype());
  const int64_t element_bytes = DtypeBytes(run.dtype());
  const bool in_place = run.in_place() && op != v1::COLLECTIVE_OP_ALL_TO_ALL;
  std::string stage;
  int64_t size_now = 0;
  try {
    for (int64_t requested : run.sizes_bytes()) {
      size_now = requested;
      // Every rank agrees whether to go on.
      stage = "the agreement to go on";
      if (AgreeToStop(m, hooks.cancelled && hooks.cancelled())) {
        return absl::CancelledError("cancelled");
      }

      const CollectiveShape shape = ShapeFor(op, requested, element_bytes, m.world_size);
      Buffers b = Allocate(op, in_place, shape, m, dtype);
      internal::CollectiveRankSize out;
      out.set_rank(m.rank);
      out.set_size_bytes(shape.size_bytes);
      out.set_count(shape.count);
      std::string timer;
      stage = "the timed iterations";
      for (double s : TimeIterations(op, b, m, run.warmup_iters(), run.iters(), &timer)) {
        out.add_iteration_seconds(s);
      }
      out.set_timer(timer);

      // The check: known inputs, one run, every output element compared.
      stage = "the checked run";
      b.output.fill_(-1);
      // Made on the device itself (a 1 GiB check would be seconds of host work).
      b.input.copy_(CheckInput(op, m.rank, m.world_size, shape.count, b.input.device()));
      CompleteWork(Launch(op, b, m), m, Clock::now() + m.timeout);
      const torch::Tensor expected =
          CheckExpected(op, m.rank, m.world_size, shape.count, b.output.device())
              .to(torch::kFloat64);
      out.set_wrong_elements(b.output.to(torch::kFloat64).ne(expected).sum().item<int64_t>());
      out.set_checked_elements(b.output.numel());
      if (hooks.on_size) hooks.on_size(out);
    }
  } catch (const CollectiveTimeout& t) {
    *broken = true;
    return absl::DeadlineExceededError(
        absl::StrCat(CollectiveOpName(op), " of ", FormatBytes(size_now), " on group ", m.id,
                     " (rank ", m.rank, ") did not finish within ", m.timeout.count() / 1000.0,
                     " s during ", stage, ": ", t.what, "; the group was aborted and is broken"));
  } catch (const std::exception& e) {
    *broken = true;
    const std::string what = Trim(e.what());
    if (LooksLikeTimeout(what)) {
      return absl::DeadlineExceededError(
          absl::StrCat(CollectiveOpName(op), " of ", FormatBytes(size_now), " on group ", m.id,
                       " (rank ", m.rank, ") did not finish within ", m.timeout.count() / 1000.0,
                       " s during ", stage, " (", what, "); the group is broken"));
    }
    return absl::AbortedError(absl::StrCat(
        CollectiveOpName(op), " of ", FormatBytes(size_now), " on group ", m.id, " (rank ", m.rank,
        ") failed during ", stage, ": ", what, "; the group is broken"));
  }
  return absl::OkStatus();
}

}  // namespace benchd::worker
