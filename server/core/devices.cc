#include "server/core/devices.h"

#include <algorithm>
#include <regex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace benchd::server {

absl::Status CheckDeviceName(const std::string& device) {
  static const std::regex kDevice("^(cpu|cuda):[0-9]{1,3}$");
  if (!std::regex_match(device, kDevice)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device: '", device, "' is not a device name; expected cpu:N or cuda:N"));
  }
  return absl::OkStatus();
}

absl::Status CheckServedDevice(absl::string_view field, const std::string& device,
                               const std::vector<std::string>& served) {
  // In a cluster a device may be another member's: "node1/cuda:0".
  const size_t slash = device.find('/');
  const std::string local = slash == std::string::npos ? device : device.substr(slash + 1);
  if (!CheckDeviceName(local).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", absl::CHexEscape(device),
                                                   "' is not a device name; expected cpu:N or "
                                                   "cuda:N, one of ",
                                                   absl::StrJoin(served, ", ")));
  }
  if (std::find(served.begin(), served.end(), device) == served.end()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", device,
                                                   " is not served by this daemon; it serves ",
                                                   absl::StrJoin(served, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace benchd::server
