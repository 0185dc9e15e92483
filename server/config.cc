#include "server/config.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_spec.h"
#include "nlohmann/json.hpp"

namespace benchd::server {

absl::Status LoadConfigFile(const std::string& path, DaemonConfig* config) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config file '", path, "' cannot be read"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config file '", path, "': ", e.what()));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file '", path, "': expected a JSON object"));
  }
  try {
    for (auto& [key, value] : j.items()) {
      if (key == "listen_address")
        config->listen_address = value.get<std::string>();
      else if (key == "metrics_address")
        config->metrics_address = value.get<std::string>();
      else if (key == "data_dir")
        config->data_dir = value.get<std::string>();
      else if (key == "devices")
        config->devices = value.get<std::vector<std::string>>();
      else if (key == "worker_path")
        config->worker_path = value.get<std::string>();
      else if (key == "worker_start_timeout_s")
        config->worker_start_timeout_s = value.get<int>();
      else if (key == "worker_heartbeat_timeout_s")
        config->worker_heartbeat_timeout_s = value.get<int>();
      else if (key == "stop_grace_s")
        config->stop_grace_s = value.get<int>();
      else if (key == "tls_cert")
        config->tls_cert = value.get<std::string>();
      else if (key == "tls_key")
        config->tls_key = value.get<std::string>();
      else if (key == "tls_client_ca")
        config->tls_client_ca = value.get<std::string>();
      else if (key == "auth_file")
        config->auth_file = value.get<std::string>();
      else if (key == "insecure")
        config->insecure = value.get<bool>();
      else if (key == "progress_timeout_s") {
        for (const auto& [kind, seconds] : value.items()) {
          auto s = ParseProgressTimeout(absl::StrCat(kind, "=", seconds.get<double>()),
                                        &config->progress_timeout_s);
          if (!s.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("config file '", path, "': progress_timeout_s: ", s.message()));
          }
        }
      } else
        return absl::InvalidArgumentError(absl::StrCat(
            "config file '", path, "': unknown key '", key,
            "'; expected listen_address, metrics_address, data_dir, devices, worker_path, "
            "worker_start_timeout_s, worker_heartbeat_timeout_s, stop_grace_s, "
            "progress_timeout_s, tls_cert, tls_key, tls_client_ca, auth_file, insecure"));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config file '", path, "': ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status ParseProgressTimeout(const std::string& flag, std::map<std::string, double>* out) {
  const size_t eq = flag.find('=');
  const std::string kind = flag.substr(0, eq);
  const std::vector<std::string> kinds = JobKindNames();
  if (eq == std::string::npos || std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "progress timeout '", flag, "': expected KIND=SECONDS with KIND ", JobKindChoices()));
  }
  double seconds = 0;
  if (!absl::SimpleAtod(flag.substr(eq + 1), &seconds) || !(seconds >= 1 && seconds <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress timeout '", flag, "': expected 1..86400 seconds for ", kind));
  }
  (*out)[kind] = seconds;
  return absl::OkStatus();
}

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

std::vector<std::string> DetectDevices() {
  int gpus = 0;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    for (absl::string_view part : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
      if (part == "-1") break;  // CUDA stops at the first invalid ordinal
      ++gpus;
    }
  } else if (DIR* dev = opendir("/dev"); dev != nullptr) {
    static const std::regex kNode("^nvidia[0-9]+$");
    while (dirent* e = readdir(dev)) {
      if (std::regex_match(e->d_name, kNode)) ++gpus;
    }
    closedir(dev);
  }
  std::vector<std::string> devices;
  for (int i = 0; i < gpus; ++i) devices.push_back(absl::StrCat("cuda:", i));
  if (devices.empty()) devices.push_back("cpu:0");
  return devices;
}

std::string BoundAddress(const std::string& listen, int port) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    return listen;
  }
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

}  // namespace benchd::server
