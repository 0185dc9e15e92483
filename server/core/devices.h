// Device names as the daemon serves them: "cpu:N" and "cuda:N" (and, in a
// cluster, "node/cuda:N"), checked once for every request that names one.
#ifndef BENCHD_SERVER_CORE_DEVICES_H_
#define BENCHD_SERVER_CORE_DEVICES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace benchd::server {

// "cpu:0" / "cuda:3" are accepted; anything else is INVALID_ARGUMENT.
absl::Status CheckDeviceName(const std::string& device);

// The one check of a device a request names: INVALID_ARGUMENT naming `field`
// when `device` is not a device name, or not one of `served` (listed).
absl::Status CheckServedDevice(absl::string_view field, const std::string& device,
                               const std::vector<std::string>& served);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_DEVICES_H_
