#include "worker/device_peaks.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/autocast_guard.h"
#include "worker/job_options.h"
#include "worker/phase_clock.h"

namespace benchd::worker {

PeakSizes DefaultPeakSizes(const WorkerDevice& device) {
  PeakSizes s;
  if (device.is_cuda()) {
    // 8192^3 runs ~1 ms in bf16 on an H100, long enough to reach full clocks;
    // 512 MiB is ten times the largest L2 (50 MB), so the copy streams from HBM.
    s.matmul_n = 8192;
    s.copy_bytes = int64_t{512} << 20;
  } else {
    // A CPU is slow and CI runs this: small, still past the caches.
    s.matmul_n = 512;
    s.copy_bytes = int64_t{64} << 20;
  }
  return s;
}

DevicePeaks::DevicePeaks(const WorkerDevice& device)
    : DevicePeaks(device, DefaultPeakSizes(device)) {}

DevicePeaks::DevicePeaks(const WorkerDevice& device, PeakSizes sizes)
    : device_(device), sizes_(sizes) {
  TORCH_CHECK(sizes_.matmul_n > 0 && sizes_.copy_bytes > 0 && sizes_.repeats > 0,
              "DevicePeaks: probe sizes must be positive, got n=", sizes_.matmul_n,
              " copy_bytes=", sizes_.copy_bytes, " repeats=", sizes_.repeats);
}

template <typename Op>
double DevicePeaks::MedianSeconds(Op op) {
  torch::NoGradGuard no_grad;
  std::unique_ptr<PhaseClock> clock = MakePhaseClock(device_, 2);
  for (int i = 0; i < sizes_.warmup; ++i) op();
  Synchronize(device_);
  std::vector<double> seconds;
  for (int i = 0; i < sizes_.repeats; ++i) {
    clock->Reset();
    clock->Mark();
    op();
    clock->Mark();
    Synchronize(device_);
    seconds.push_back(clock->Seconds(0, 1));
  }
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  return n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
}

namespace {

std::string DtypeName(at::ScalarType dtype, bool tf32) {
  switch (dtype) {
    case at::kFloat:
      return tf32 ? "tf32" : "fp32";
    case at::kBFloat16:
      return "bf16";
    case at::kHalf:
      return "fp16";
    default:
      return c10::toString(dtype);
  }
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MatmulPeak DevicePeaks::Matmul(at::ScalarType dtype, bool tf32, double* measure_seconds) {
  if (dtype != at::kFloat) tf32 = false;  // TF32 only changes fp32 matmuls
  std::lock_guard<std::mutex> lock(mu_);
  const auto key = std::make_pair(static_cast<int>(dtype), tf32);
  if (auto it = matmul_.find(key); it != matmul_.end()) return it->second;

  const auto t0 = std::chrono::steady_clock::now();
  MatmulPeak peak;
  {
    const Tf32Guard tf32_guard(tf32);
    const int64_t n = sizes_.matmul_n;
    // Random inputs: zeros would let the tensor cores idle at lower power
    // and report a rate no real model reaches.
    const auto opts = torch::TensorOptions().dtype(dtype).device(device_.device);
    const torch::Tensor a = torch::randn({n, n}, opts);
    const torch::Tensor b = torch::randn({n, n}, opts);
    torch::Tensor c = torch::empty({n, n}, opts);
    const double s = MedianSeconds([&] { at::mm_out(c, a, b); });
    peak = {2.0 * n * n * n / s, n, DtypeName(dtype, tf32)};
  }
  ReleaseCachedMemory(device_);
  if (measure_seconds) *measure_seconds += SecondsSince(t0);
  matmul_[key] = peak;
  return peak;
}

BandwidthPeak DevicePeaks::Bandwidth(double* measure_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bandwidth_.bytes_per_second > 0) return bandwidth_;
  const auto t0 = std::chrono::steady_clock::now();
  {
    const int64_t elements = sizes_.copy_bytes / 4;
    const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device_.device);
    const torch::Tensor src = torch::randn({elements}, opts);
    torch::Tensor dst = torch::empty({elements}, opts);
    // Each timed sample is kCopiesPerSample copies back to back: one 512 MiB
    // copy (~0.2 ms) timed alone read 2.5-2.9 TB/s from one worker to the next
    // on the same H100, ten in a row 2.96 TB/s every time.
    constexpr int kCopiesPerSample = 10;
    const double s = MedianSeconds([&] {
      for (int i = 0; i < kCopiesPerSample; ++i) dst.copy_(src);
    });
    bandwidth_ = {2.0 * kCopiesPerSample * static_cast<double>(elements * 4) / s, elements * 4};
  }
  ReleaseCachedMemory(device_);
  if (measure_seconds) *measure_seconds += SecondsSince(t0);
  return bandwidth_;
}

void FillRoofline(const v1::BenchmarkSpec& spec, DevicePeaks& peaks, v1::BenchmarkResult* result) {
  v1::Roofline* r = result->mutable_roofline();
  const at::ScalarType dtype = AutocastDtype(spec.precision()).value_or(at::kFloat);
  double measure = 0;
  MatmulPeak mm;
  BandwidthPeak bw;
  try {
    mm = peaks.Matmul(dtype, spec.allow_tf32(), &measure);
    bw = peaks.Bandwidth(&measure);
  } catch (const c10::Error& e) {
    // The probe is an extra the job does not need: report why it is missing.
    ReleaseCachedMemory(peaks.device());
    const std::string what = e.what_without_backtrace();
    r->set_unavailable(absl::StrCat("could not measure the device's peaks on ", peaks.device().name,
                                    ": ", what.substr(0, what.find('\n'))));
    return;
  }
  r->set_measured_now(measure > 0);
  r->set_measure_seconds(measure);
  r->set_peak_matmul_flops_per_second(mm.flops_per_second);
  r->set_matmul_dtype(mm.dtype);
  r->set_matmul_size(mm.n);
  r->set_bandwidth_bytes_per_second(bw.bytes_per_second);
  r->set_copy_bytes(bw.copy_bytes);

  const double matmul_seconds = result->flops_per_step() / mm.flops_per_second;
  int64_t optimizer_bytes = 0;
  if (spec.mode() == v1::BENCHMARK_MODE_TRAIN_STEP) {
    optimizer_bytes = kAdamWBytesPerParameter * result->parameter_count();
  }
  const double optimizer_seconds = static_cast<double>(optimizer_bytes) / bw.bytes_per_second;
  r->set_matmul_seconds(matmul_seconds);
  r->set_optimizer_bytes(optimizer_bytes);
  r->set_optimizer_seconds(optimizer_seconds);
  r->set_floor_seconds(matmul_seconds + optimizer_seconds);
  if (result->step().median() > 0) {
    r->set_fraction_of_floor((matmul_seconds + optimizer_seconds) / result->step().median());
  }
}

}  // namespace benchd::worker
