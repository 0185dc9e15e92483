// A whole benchmark step (forward, loss, backward, optimizer) captured once as
// a CUDA graph and replayed (BenchmarkSpec.cuda_graph).
#ifndef BENCHD_WORKER_CUDA_GRAPH_STEP_H_
#define BENCHD_WORKER_CUDA_GRAPH_STEP_H_

#include <torch/torch.h>

#include <functional>
#include <memory>

#include "worker/device.h"

namespace benchd::worker {

// For the length of a cuda_graph job: makes a side stream of the device its
// current stream (one stream per device, reused by every such job, so the
// caching allocator keeps one cache for it), after synchronizing the device so
// the side stream sees all earlier work; restores the previous stream when it
// dies. Does nothing when `active` is false or the device is a CPU.
class CaptureStreamScope {
 public:
  CaptureStreamScope(const WorkerDevice& device, bool active);
  ~CaptureStreamScope();
  CaptureStreamScope(const CaptureStreamScope&) = delete;
  CaptureStreamScope& operator=(const CaptureStreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class CudaGraphStep {
 public:
  // Synchronizes `device`, then captures `step` on the current CUDA stream of
  // the device, which must not be the default stream (capture needs a side
  // stream: the benchmark runs the whole job on one). Nothing runs during the
  // capture: kernels are recorded, and the tensors `step` allocates come from
  // the graph's private memory pool and stay at fixed addresses. So `step`
  // must only read tensors that exist before the capture (static inputs,
  // parameters, optimizer state) and must not synchronize with the host
  // (no .item()). Its result (the loss) is the graph's output, refreshed by
  // every replay. Throws what LibTorch throws when capture fails; on a build
  // without CUDA, always throws.
  CudaGraphStep(const WorkerDevice& device, const std::function<torch::Tensor()>& step);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // Launches the graph on the current stream (asynchronous).
  void Replay();
  // The captured step's result: valid after a replay once the device synchronized.
  const torch::Tensor& output() const { return output_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  torch::Tensor output_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_CUDA_GRAPH_STEP_H_
