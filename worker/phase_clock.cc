#include "worker/phase_clock.h"

#include <chrono>
#include <vector>

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace benchd::worker {
namespace {

class HostClock : public PhaseClock {
 public:
  explicit HostClock(int max_marks) { marks_.reserve(max_marks); }
  void Reset() override { marks_.clear(); }
  void Mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  double Seconds(int from, int to) override {
    return std::chrono::duration<double>(marks_.at(to) - marks_.at(from)).count();
  }
  const char* name() const override { return "host_steady_clock"; }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

#if BENCHD_WITH_CUDA
class CudaEventClock : public PhaseClock {
 public:
  CudaEventClock(c10::DeviceIndex device, int max_marks) : device_(device) {
    // Created once and re-recorded every step: cudaEventCreate is not free.
    for (int i = 0; i < max_marks; ++i) events_.emplace_back(cudaEventDefault);
  }
  void Reset() override { next_ = 0; }
  void Mark() override { events_.at(next_++).record(at::cuda::getCurrentCUDAStream(device_)); }
  double Seconds(int from, int to) override {
    return static_cast<double>(events_.at(from).elapsed_time(events_.at(to))) / 1e3;
  }
  const char* name() const override { return "cuda_event"; }

 private:
  c10::DeviceIndex device_;
  std::vector<at::cuda::CUDAEvent> events_;
  size_t next_ = 0;
};
#endif

}  // namespace

std::unique_ptr<PhaseClock> MakePhaseClock(const WorkerDevice& device, int max_marks) {
#if BENCHD_WITH_CUDA
  if (device.is_cuda()) return std::make_unique<CudaEventClock>(device.device.index(), max_marks);
#endif
  (void)device;
  return std::make_unique<HostClock>(max_marks);
}

}  // namespace benchd::worker
