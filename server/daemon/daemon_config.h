// The daemon's settings: one struct, filled from one table of settings that
// gives each its flag (--NAME), its config-file key (NAME with '_' for '-')
// and its help. Flags override the file; the file overrides the defaults.
#ifndef BENCHD_SERVER_DAEMON_DAEMON_CONFIG_H_
#define BENCHD_SERVER_DAEMON_DAEMON_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/cluster/cluster_config.h"
#include "server/jobs/gpu_sharing.h"

namespace benchd::server {

struct DaemonConfig {
  std::string listen_address = "127.0.0.1:7531";   // port 0 picks a free one
  std::string metrics_address = "127.0.0.1:9531";  // "" turns /metrics off
  std::string data_dir = "benchd-data";
  // "cpu:0", "cuda:0", ...; empty = detect (every visible GPU, else cpu:0).
  std::vector<std::string> devices;
  std::string worker_path;  // "" = benchd-worker beside the benchd binary
  // Seconds a starting worker may take to answer (LibTorch + CUDA init).
  int worker_start_timeout_s = 180;
  // Seconds a worker that is up may leave its heartbeat (a ping every
  // second) unanswered before it is shown UNRESPONSIVE and refused work.
  int worker_heartbeat_timeout_s = 10;
  // Seconds a worker may be idle (no job, no resident group) before it is
  // stopped and PARKED, holding no process or GPU until the next job starts
  // it again; 0 = never (workers stay resident).
  int worker_idle_exit_s = 0;
  // Seconds running jobs get to finish after SIGTERM before they are
  // INTERRUPTED (under Kubernetes' default 30 s termination grace).
  int stop_grace_s = 10;
  // Progress deadlines by job kind (JobKindName: "benchmark" ... "ddp"), in
  // seconds; a kind not here uses DefaultProgressTimeoutSeconds
  // (common/job_spec.h); a job's own progress_timeout_seconds wins over both.
  std::map<std::string, double> progress_timeout_s;
  // Who gets in (docs/architecture.md "Who gets in"): TLS on the gRPC port
  // (PEM files, reloaded on SIGHUP), client certificates checked against
  // tls_client_ca (mTLS), and the auth file's tokens and roles.
  std::string tls_cert, tls_key, tls_client_ca, auth_file;
  // Serve a non-loopback address without TLS, or without checking callers.
  bool insecure = false;
  // Whether benchd's GPUs are its own or shared with other work (training
  // jobs): when-idle runs a GPU job only on a GPU no other process uses
  // (server/jobs/gpu_sharing.h; deploy/README.md "Sharing GPUs with training jobs").
  GpuSharingMode gpu_sharing = GpuSharingMode::kDedicated;
  // A cluster (docs/architecture.md "Cluster"): the launcher's environment,
  // or these settings (which win over it).
  ClusterFlags cluster;
};

// Fills `config` from argv and the --config file it names (flags win).
// Returns nullopt to go on, or the exit code when parsing ended the work:
// --help and --version (0), a bad flag or file (1; why is printed).
std::optional<int> ParseDaemonFlags(int argc, char** argv, DaemonConfig* config);

// Reads a JSON object whose keys are the settings' names (flag names with
// '_': "listen", "worker_start_timeout", ...; the older keys listen_address,
// metrics_address, worker_path and the "_s" ones are still read) into
// `config`. Unknown keys and wrong types are errors naming the key.
absl::Status LoadConfigFile(const std::string& path, DaemonConfig* config);

// "KIND=SECONDS" (--progress-timeout benchmark=900) into `out`: KIND a
// JobKindName (common/job_spec.h); SECONDS 1..86400.
absl::Status ParseProgressTimeout(const std::string& flag, std::map<std::string, double>* out);

// The settings that cannot go together or out of range, and who gets in: a
// listener other hosts reach needs TLS and a check of callers, /metrics
// stays on loopback (it has no TLS), unless `insecure`. INVALID_ARGUMENT
// naming the flag, what came and what to give instead.
absl::Status CheckDaemonConfig(const DaemonConfig& config);

// GPUs visible to this process without loading CUDA: CUDA_VISIBLE_DEVICES when
// set, else the /dev/nvidiaN nodes. cpu:0 when there are none.
std::vector<std::string> DetectDevices();

// The address clients reach a listener at, as endpoints.json and the start
// log give it: `listen` with the port the kernel bound (port 0 asked for
// "any"); a unix socket ("unix:/path", "unix:///path", "unix-abstract:name")
// as it was given, since gRPC reports port 1 for those.
std::string BoundAddress(const std::string& listen, int port);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_DAEMON_DAEMON_CONFIG_H_
