// The device's peak rates, the denominators of a benchmark's roofline floor:
// the matmul rate of each dtype (and TF32 setting) and the copy bandwidth.
// Each is measured the first time a job needs it, then cached for the
// worker's life, so only that job pays the ~second it takes.
#ifndef BENCHD_WORKER_DEVICE_PEAKS_H_
#define BENCHD_WORKER_DEVICE_PEAKS_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "benchd/v1/bench.pb.h"
#include "worker/device.h"

namespace benchd::worker {

struct MatmulPeak {
  double flops_per_second = 0;
  int64_t n = 0;      // n x n x n
  std::string dtype;  // "fp32", "tf32", "bf16", "fp16"
};

struct BandwidthPeak {
  double bytes_per_second = 0;  // (read + written) / time
  int64_t copy_bytes = 0;       // size of the copied buffer
};

// Probe sizes: big enough to saturate the device, small enough to fit next to
// resident models. The defaults depend on the device (see DefaultPeakSizes).
struct PeakSizes {
  int64_t matmul_n = 0;
  int64_t copy_bytes = 0;
  int warmup = 3;
  int repeats = 10;
};
PeakSizes DefaultPeakSizes(const WorkerDevice& device);

class DevicePeaks {
 public:
  explicit DevicePeaks(const WorkerDevice& device);
  DevicePeaks(const WorkerDevice& device, PeakSizes sizes);

  // The peak matmul rate for `dtype` (kFloat, kBFloat16, kHalf); for kFloat,
  // `tf32` picks TF32 or full-fp32 matmuls. Adds to *measure_seconds the time
  // spent measuring (0 when cached). Throws c10::Error (OutOfMemoryError when
  // the probe does not fit).
  MatmulPeak Matmul(at::ScalarType dtype, bool tf32, double* measure_seconds);
  BandwidthPeak Bandwidth(double* measure_seconds);

  const WorkerDevice& device() const { return device_; }

 private:
  // Median seconds of `op` over sizes_.repeats timed runs after sizes_.warmup.
  template <typename Op>
  double MedianSeconds(Op op);

  const WorkerDevice device_;
  const PeakSizes sizes_;
  std::mutex mu_;
  std::map<std::pair<int, bool>, MatmulPeak> matmul_;  // (dtype, tf32)
  BandwidthPeak bandwidth_;
};

// AdamW's minimum memory traffic per step: it reads the parameter, its
// gradient and both moments and writes the parameter and both moments, all fp32.
constexpr int64_t kAdamWBytesPerParameter = 7 * 4;

// Sets result->roofline from the result's flops_per_step and median step and
// the device's peaks for the spec's precision (and allow_tf32). A probe that
// cannot run (out of memory) leaves roofline.unavailable saying why instead.
void FillRoofline(const v1::BenchmarkSpec& spec, DevicePeaks& peaks, v1::BenchmarkResult* result);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_DEVICE_PEAKS_H_
