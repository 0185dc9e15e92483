#include "server/daemon/daemon_config.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/job_spec.h"
#include "common/loopback.h"
#include "common/version.h"
#include "nlohmann/json.hpp"

namespace benchd::server {
namespace {

using Values = std::vector<std::string>;

// One setting: its flag is --name, its config-file key `name` with '_'.
struct Setting {
  std::string name;
  std::string help;
  // Takes no value (--insecure); in a file, true or false.
  bool is_flag = false;
  // May be given more than once (--device); in a file, a list.
  bool repeated = false;
  // The config file's older key, still read.
  std::string legacy_key;
  // Sets the setting from what came (one entry unless `repeated`). The
  // message of a refusal says what is accepted; the caller names the source.
  std::function<absl::Status(const Values&, DaemonConfig*)> set;
  // What its value is, in help ("SECONDS"); "" for a flag.
  std::string value_name = "";

  Setting Named(std::string what) && {
    value_name = std::move(what);
    return std::move(*this);
  }
};

absl::Status ToInt(const std::string& v, int* out) {
  if (!absl::SimpleAtoi(v, out)) {
    return absl::InvalidArgumentError(absl::StrCat("expected a whole number, got '", v, "'"));
  }
  return absl::OkStatus();
}

absl::Status ToDouble(const std::string& v, double* out) {
  if (!absl::SimpleAtod(v, out)) {
    return absl::InvalidArgumentError(absl::StrCat("expected a number, got '", v, "'"));
  }
  return absl::OkStatus();
}

Setting Text(std::string name, std::string help, std::string DaemonConfig::*field,
             std::string legacy = "") {
  return {std::move(name),
          std::move(help),
          false,
          false,
          std::move(legacy),
          [field](const Values& v, DaemonConfig* c) {
            c->*field = v.back();
            return absl::OkStatus();
          }};
}

// A cluster setting taken as it comes (ResolveClusterOptions checks it).
Setting ClusterText(std::string name, std::string help, std::string ClusterFlags::*field) {
  return {std::move(name),
          std::move(help),
          false,
          false,
          "",
          [field](const Values& v, DaemonConfig* c) {
            c->cluster.*field = v.back();
            return absl::OkStatus();
          }};
}

Setting Seconds(std::string name, std::string help, int DaemonConfig::*field) {
  std::string legacy = absl::StrCat(absl::StrReplaceAll(name, {{"-", "_"}}), "_s");
  return {std::move(name),
          std::move(help),
          false,
          false,
          std::move(legacy),
          [field](const Values& v, DaemonConfig* c) { return ToInt(v.back(), &(c->*field)); }};
}

// Every setting, once: the flags, the config file's keys and their help come
// from here.
const std::vector<Setting>& Settings() {
  static const auto* settings = new std::vector<Setting>{
      Text("listen", "gRPC address (default 127.0.0.1:7531; port 0 = any free)",
           &DaemonConfig::listen_address, "listen_address")
          .Named("HOST:PORT"),
      Setting{"metrics",
              "/metrics address (default 127.0.0.1:9531; 'off' = none; port 0 = any free)", false,
              false, "metrics_address",
              [](const Values& v, DaemonConfig* c) {
                c->metrics_address = v.back() == "off" ? "" : v.back();
                return absl::OkStatus();
              }}
          .Named("HOST:PORT"),
      Text("data-dir", "where the store, logs and sockets live (default ./benchd-data)",
           &DaemonConfig::data_dir)
          .Named("DIR"),
      Setting{"device", "a device to serve (cpu:0, cuda:N); repeat; default: detect", false, true,
              "devices",
              [](const Values& v, DaemonConfig* c) {
                c->devices = v;
                return absl::OkStatus();
              }}
          .Named("DEVICE"),
      Text("worker", "benchd-worker binary (default: beside benchd)", &DaemonConfig::worker_path,
           "worker_path")
          .Named("PATH"),
      Seconds("worker-start-timeout", "seconds a worker may take to start (default 180)",
              &DaemonConfig::worker_start_timeout_s)
          .Named("SECONDS"),
      Seconds("worker-heartbeat-timeout",
              "seconds a worker may leave its heartbeat unanswered before it is shown "
              "UNRESPONSIVE (default 10)",
              &DaemonConfig::worker_heartbeat_timeout_s)
          .Named("SECONDS"),
      Seconds("worker-idle-exit",
              "seconds a worker may be idle (no job, no resident group) before it is stopped "
              "and PARKED, holding no GPU until the next job starts it again (that job waits "
              "for the worker's start); default 0 = never",
              &DaemonConfig::worker_idle_exit_s)
          .Named("SECONDS"),
      Seconds("stop-grace",
              "seconds running jobs get to finish after SIGTERM/SIGINT before they are "
              "interrupted (default 10; queued jobs stay queued)",
              &DaemonConfig::stop_grace_s)
          .Named("SECONDS"),
      Setting{"progress-timeout", "", false, true, "progress_timeout_s",
              [](const Values& v, DaemonConfig* c) {
                for (const auto& flag : v) {
                  if (auto s = ParseProgressTimeout(flag, &c->progress_timeout_s); !s.ok())
                    return s;
                }
                return absl::OkStatus();
              }}
          .Named("KIND=SECONDS"),
      Setting{"gpu-sharing",
              "dedicated (default): the GPUs are benchd's own (a benchmarking pool that holds "
              "them); when-idle: they are shared with other work, such as training jobs, and "
              "a GPU job runs only when no other process uses its GPU (NVML; refused naming "
              "the other process otherwise), a job during which one appeared is marked; "
              "without NVML (libnvidia-ml.so.1) every GPU job is refused",
              false, false, "",
              [](const Values& v, DaemonConfig* c) {
                auto mode = ParseGpuSharingMode(v.back());
                if (!mode.ok()) return mode.status();
                c->gpu_sharing = *mode;
                return absl::OkStatus();
              }}
          .Named("MODE"),
      Text("tls-cert", "PEM certificate chain: the gRPC port speaks TLS (reloaded on SIGHUP)",
           &DaemonConfig::tls_cert)
          .Named("FILE"),
      Text("tls-key", "PEM private key of --tls-cert (reloaded on SIGHUP)", &DaemonConfig::tls_key)
          .Named("FILE"),
      Text("tls-client-ca", "PEM CA: every client must show a certificate it signed (mTLS)",
           &DaemonConfig::tls_client_ca)
          .Named("FILE"),
      Text("auth-file",
           "who may do what: lines 'ROLE NAME sha256:<token hash>' or 'ROLE NAME "
           "subject:<certificate subject>', ROLE read|submit|admin (benchctl token create; "
           "reloaded on SIGHUP)",
           &DaemonConfig::auth_file)
          .Named("FILE"),
      {"insecure", "serve a non-loopback address without TLS or without checking callers", true,
       false, "",
       [](const Values& v, DaemonConfig* c) {
         c->insecure = v.back() == "true";
         return absl::OkStatus();
       }},
      Setting{"cluster-from",
              "join a cluster as the launcher says: slurm (SLURM_NODEID, SLURM_JOB_NODELIST) or "
              "kubernetes (an Indexed Job: JOB_COMPLETION_INDEX, BENCHD_NODES, BENCHD_CLUSTER_JOB, "
              "BENCHD_CLUSTER_SERVICE)",
              false, false, "",
              [](const Values& v, DaemonConfig* c) {
                if (v.back() != "slurm" && v.back() != "kubernetes") {
                  return absl::InvalidArgumentError(
                      absl::StrCat("expected slurm or kubernetes, got '", v.back(), "'"));
                }
                c->cluster.from = v.back();
                return absl::OkStatus();
              }}
          .Named("LAUNCHER"),
      ClusterText("cluster-coordinator",
                  "HOST:PORT of the cluster's rank 0 (with --node-rank and --nodes)",
                  &ClusterFlags::coordinator)
          .Named("HOST:PORT"),
      Setting{"node-rank", "this daemon's rank in the cluster (0 = coordinator)", false, false, "",
              [](const Values& v, DaemonConfig* c) {
                int rank = 0;
                if (auto s = ToInt(v.back(), &rank); !s.ok()) return s;
                c->cluster.rank = rank;
                return absl::OkStatus();
              }}
          .Named("N"),
      Setting{"nodes", "how many daemons the cluster has", false, false, "",
              [](const Values& v, DaemonConfig* c) {
                int nodes = 0;
                if (auto s = ToInt(v.back(), &nodes); !s.ok()) return s;
                c->cluster.nodes = nodes;
                return absl::OkStatus();
              }}
          .Named("N"),
      ClusterText("node-name",
                  "this member's name in device names (node1/cuda:0); default node<rank>",
                  &ClusterFlags::name)
          .Named("NAME"),
      ClusterText(
          "advertise",
          "HOST:PORT the other members reach this daemon at (default: --listen's, or this host's "
          "name when --listen is a wildcard)",
          &ClusterFlags::advertise)
          .Named("HOST:PORT"),
      ClusterText("cluster-secret-file",
                  "FILE holding the cluster's secret (one line, not readable by others), which "
                  "every member proves on each call to another; the same on every member (or "
                  "BENCHD_CLUSTER_SECRET in the environment; never a flag's value, which ps shows)",
                  &ClusterFlags::secret_file)
          .Named("FILE"),
      Setting{"cluster-lost-after",
              "seconds without a heartbeat after which a member is LOST and its groups broken "
              "(default 10)",
              false, false, "",
              [](const Values& v, DaemonConfig* c) {
                double s = 0;
                if (auto st = ToDouble(v.back(), &s); !st.ok()) return st;
                c->cluster.lost_after_s = s;
                return absl::OkStatus();
              }}
          .Named("SECONDS"),
  };
  return *settings;
}

std::string KeyOf(const Setting& s) { return absl::StrReplaceAll(s.name, {{"-", "_"}}); }

std::string ProgressTimeoutHelp() {
  std::vector<std::string> kind_defaults;
  for (v1::JobKind kind : JobKinds()) {
    kind_defaults.push_back(
        absl::StrCat(JobKindName(kind), " ", DefaultProgressTimeoutSeconds(kind)));
  }
  return absl::StrCat(
      "KIND=SECONDS: a job of KIND that shows no progress for SECONDS has its worker killed and "
      "fails (defaults: ",
      absl::StrJoin(kind_defaults, ", "), "); repeat; a job's progress_timeout_seconds wins");
}

// A JSON value as the flag's text: a list's entries one by one; the older
// progress_timeout_s object {"kind": seconds} as KIND=SECONDS.
absl::StatusOr<Values> ValuesOf(const Setting& s, const nlohmann::json& value) {
  Values out;
  auto one = [&](const nlohmann::json& v) -> absl::Status {
    if (s.is_flag && !v.is_boolean()) return absl::InvalidArgumentError("expected true or false");
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
    } else if (v.is_number() || v.is_boolean()) {
      out.push_back(v.dump());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected a ", s.repeated ? "list of strings" : "value", ", got ", v.dump()));
    }
    return absl::OkStatus();
  };
  if (s.repeated && value.is_object()) {
    for (const auto& [kind, seconds] : value.items()) {
      if (!seconds.is_number()) {
        return absl::InvalidArgumentError(absl::StrCat(kind, ": expected seconds"));
      }
      out.push_back(absl::StrCat(kind, "=", seconds.get<double>()));
    }
  } else if (s.repeated && value.is_array()) {
    for (const auto& v : value) {
      if (auto st = one(v); !st.ok()) return st;
    }
  } else if (s.repeated) {
    return absl::InvalidArgumentError(absl::StrCat("expected a list, got ", value.dump()));
  } else if (auto st = one(value); !st.ok()) {
    return st;
  }
  return out;
}

}  // namespace

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
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto& settings = Settings();
    auto it = std::find_if(settings.begin(), settings.end(), [&](const Setting& s) {
      return KeyOf(s) == key || (!s.legacy_key.empty() && s.legacy_key == key);
    });
    if (it == settings.end()) {
      std::vector<std::string> keys;
      for (const auto& s : settings) keys.push_back(KeyOf(s));
      return absl::InvalidArgumentError(absl::StrCat("config file '", path, "': unknown key '", key,
                                                     "'; expected one of ",
                                                     absl::StrJoin(keys, ", ")));
    }
    auto values = ValuesOf(*it, value);
    absl::Status s = values.ok() ? it->set(*values, config) : values.status();
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config file '", path, "': ", key, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::optional<int> ParseDaemonFlags(int argc, char** argv, DaemonConfig* config) {
  CLI::App app{"benchd: GPU benchmarking and profiling daemon"};
  app.set_version_flag("--version", std::string("benchd ") + kVersion);
  std::string config_file;
  app.add_option("--config", config_file,
                 "JSON config file: the settings below by name with '_' (\"data_dir\"); flags "
                 "override it");
  const auto& settings = Settings();
  std::vector<Values> given(settings.size());
  std::vector<bool> flags(settings.size());
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& s = settings[i];
    const std::string help = s.name == "progress-timeout" ? ProgressTimeoutHelp() : s.help;
    if (s.is_flag) {
      app.add_flag_callback(
          "--" + s.name, [&given, i] { given[i] = {"true"}; }, help);
    } else {
      CLI::Option* o = app.add_option("--" + s.name, given[i], help)->type_name(s.value_name);
      // Given twice, the last wins (a wrapper's default can be overridden).
      if (!s.repeated) o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto fail = [](const std::string& message) {
    fprintf(stderr, "benchd: %s\n", message.c_str());
    return 1;
  };
  if (!config_file.empty()) {
    if (auto s = LoadConfigFile(config_file, config); !s.ok())
      return fail(std::string(s.message()));
  }
  for (size_t i = 0; i < settings.size(); ++i) {
    if (given[i].empty()) continue;
    if (auto s = settings[i].set(given[i], config); !s.ok()) {
      return fail(absl::StrCat("--", settings[i].name, ": ", s.message()));
    }
  }
  if (auto s = CheckDaemonConfig(*config); !s.ok()) return fail(std::string(s.message()));
  return std::nullopt;
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

absl::Status CheckDaemonConfig(const DaemonConfig& config) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return invalid("--tls-cert and --tls-key go together: give both, or neither");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return invalid(
        "--tls-client-ca (mTLS) needs the daemon's own certificate: give --tls-cert and "
        "--tls-key too");
  }
  // Who gets in. Loopback stays open; an address other hosts reach needs TLS
  // and a check of callers, unless --insecure says otherwise.
  const bool tls_on = !config.tls_cert.empty();
  const bool checks_callers = !config.auth_file.empty() || !config.tls_client_ca.empty();
  if (!IsLoopbackAddress(config.listen_address) && !config.insecure) {
    if (!tls_on) {
      return invalid("--listen ", config.listen_address,
                     " is reachable from other hosts, and without TLS anyone on the network "
                     "reads and sends its calls: give --tls-cert and --tls-key (and --auth-file "
                     "or --tls-client-ca), or --insecure to serve it in the clear anyway");
    }
    if (!checks_callers) {
      return invalid("--listen ", config.listen_address,
                     " is reachable from other hosts, and without --auth-file or "
                     "--tls-client-ca every caller may do everything: give one, or "
                     "--insecure to serve it so anyway");
    }
  }
  // /metrics has no TLS: Debian's civetweb (under prometheus-cpp) crashes
  // serving HTTPS with OpenSSL 3 (a null entry in the SSL functions it loads
  // at run time; docs/architecture.md). Off loopback it stays off unless
  // --insecure: scrape it through a TLS proxy on the node, or on loopback.
  if (!config.metrics_address.empty() && !IsLoopbackAddress(config.metrics_address) &&
      !config.insecure) {
    return invalid("--metrics ", config.metrics_address,
                   " is reachable from other hosts, and /metrics has no TLS here: keep it on "
                   "loopback (scrape it through a TLS proxy on the node), --metrics off, or "
                   "--insecure to serve it in the clear");
  }
  if (config.worker_start_timeout_s < 1 || config.worker_start_timeout_s > 86400) {
    return invalid("--worker-start-timeout: expected 1..86400 seconds, got ",
                   config.worker_start_timeout_s);
  }
  if (config.stop_grace_s < 0 || config.stop_grace_s > 3600) {
    return invalid("--stop-grace: expected 0..3600 seconds, got ", config.stop_grace_s);
  }
  if (config.worker_idle_exit_s < 0 || config.worker_idle_exit_s > 86400 * 7) {
    return invalid("--worker-idle-exit: expected 0 (never) or 1..604800 seconds, got ",
                   config.worker_idle_exit_s);
  }
  if (config.worker_heartbeat_timeout_s < 1 || config.worker_heartbeat_timeout_s > 3600) {
    return invalid("--worker-heartbeat-timeout: expected 1..3600 seconds, got ",
                   config.worker_heartbeat_timeout_s);
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
