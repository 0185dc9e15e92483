#include "worker/cuda_graph_step.h"

#include <stdexcept>

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#include <optional>
#endif

namespace benchd::worker {

#if BENCHD_WITH_CUDA
namespace {

c10::cuda::CUDAStream SideStream(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(device);
  if (it == streams.end()) {
    it = streams.emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device))
             .first;
  }
  return it->second;
}

}  // namespace

struct CaptureStreamScope::Impl {
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

CaptureStreamScope::CaptureStreamScope(const WorkerDevice& device, bool active)
    : impl_(std::make_unique<Impl>()) {
  if (!active || !device.is_cuda()) return;
  Synchronize(device);
  impl_->guard.emplace(SideStream(device.device.index()));
}

CaptureStreamScope::~CaptureStreamScope() = default;

struct CudaGraphStep::Impl {
  at::cuda::CUDAGraph graph;
};

CudaGraphStep::CudaGraphStep(const WorkerDevice& device, const std::function<torch::Tensor()>& step)
    : impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(device.is_cuda(), "CUDA graphs need a CUDA device, not ", device.name);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.device.index());
  TORCH_CHECK(stream != c10::cuda::getDefaultCUDAStream(device.device.index()),
              "a CUDA graph must be captured on a side stream, not the default one");
  // Like torch.cuda.graph: no work of ours in flight when the capture starts.
  Synchronize(device);
  impl_->graph.capture_begin();
  try {
    output_ = step();
  } catch (...) {
    // End the capture so the stream is usable again; the partial graph is dropped.
    try {
      impl_->graph.capture_end();
    } catch (...) {
    }
    throw;
  }
  impl_->graph.capture_end();  // also instantiates the graph
}

void CudaGraphStep::Replay() { impl_->graph.replay(); }

#else
struct CaptureStreamScope::Impl {};
CaptureStreamScope::CaptureStreamScope(const WorkerDevice&, bool) {}
CaptureStreamScope::~CaptureStreamScope() = default;

struct CudaGraphStep::Impl {};

CudaGraphStep::CudaGraphStep(const WorkerDevice& device, const std::function<torch::Tensor()>&) {
  throw std::runtime_error("CUDA graphs need a LibTorch with CUDA; " + device.name +
                           " cannot capture one");
}

void CudaGraphStep::Replay() {}
#endif

CudaGraphStep::~CudaGraphStep() = default;

}  // namespace benchd::worker
