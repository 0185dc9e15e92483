// Scoped autocast, like Python's `with torch.autocast(device_type, dtype)`:
// LibTorch's C++ API has the switches but no guard.
#ifndef BENCHD_WORKER_AUTOCAST_GUARD_H_
#define BENCHD_WORKER_AUTOCAST_GUARD_H_

#include <torch/torch.h>

#include <optional>

#include "benchd/v1/bench.pb.h"

namespace benchd::worker {

// The autocast dtype of a precision: bf16 and fp16; none for fp32.
std::optional<at::ScalarType> AutocastDtype(v1::Precision precision);

class AutocastGuard {
 public:
  // Turns autocast to `dtype` on for `device_type` (kCUDA or kCPU) until the
  // guard dies; with no dtype (fp32) it changes nothing. Autocast state is
  // thread-local, so the guard must die on the thread that made it.
  AutocastGuard(c10::DeviceType device_type, std::optional<at::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
  bool prev_cache_enabled_ = true;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_AUTOCAST_GUARD_H_
