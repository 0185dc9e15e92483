#include "worker/autocast_guard.h"

#include <ATen/autocast_mode.h>

namespace benchd::worker {

std::optional<at::ScalarType> AutocastDtype(v1::Precision precision) {
  switch (precision) {
    case v1::PRECISION_BF16:
      return at::kBFloat16;
    case v1::PRECISION_FP16:
      return at::kHalf;
    default:
      return std::nullopt;
  }
}

// Mirrors torch.autocast.__enter__/__exit__ (torch/amp/autocast_mode.py).
AutocastGuard::AutocastGuard(c10::DeviceType device_type, std::optional<at::ScalarType> dtype)
    : device_type_(device_type) {
  if (!dtype) return;
  active_ = true;
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  prev_enabled_ = at::autocast::is_autocast_enabled(device_type);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_type);
  at::autocast::set_autocast_enabled(device_type, true);
  at::autocast::set_autocast_dtype(device_type, *dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(true);
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Leaving the outermost autocast region drops the cached casts of the
  // weights, so they are not held past the forward pass.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

}  // namespace benchd::worker
