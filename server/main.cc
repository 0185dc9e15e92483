// benchd: the daemon. Parses its settings, opens the store, starts one worker
// per device, serves benchd.v1.Bench (+ health, reflection of the public API
// only) and /metrics, and
// stops in order on SIGTERM/SIGINT.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/artifacts.h"
#include "common/credentials.h"
#include "common/job_spec.h"
#include "common/limits.h"
#include "common/loopback.h"
#include "common/version.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "nlohmann/json.hpp"
#include "server/artifact_owner.h"
#include "server/auth.h"
#include "server/bench_service.h"
#include "server/cluster.h"
#include "server/cluster_config.h"
#include "server/cluster_service.h"
#include "server/cluster_workers.h"
#include "server/config.h"
#include "server/event_hub.h"
#include "server/forwarding.h"
#include "server/group_registry.h"
#include "server/health.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "server/node_service.h"
#include "server/peer_channels.h"
#include "server/private_dir.h"
#include "server/public_reflection.h"
#include "server/store.h"
#include "server/supervisor.h"
#include "server/tls.h"

namespace fs = std::filesystem;
using benchd::IsLoopbackAddress;
using benchd::server::DaemonConfig;

namespace {

int Fail(const std::string& message) {
  fprintf(stderr, "benchd: %s\n", message.c_str());
  return 1;
}

// Unix socket paths are limited to 107 bytes; a deep data dir falls back to
// a new private folder (mkdtemp) under $XDG_RUNTIME_DIR, /run/user/<uid> or
// /tmp, removed at stop.
constexpr size_t kSocketNameBytes = sizeof("/worker-cuda-999.sock");

bool FitsSocketPath(const fs::path& run) { return run.string().size() + kSocketNameBytes <= 107; }

// Removes the fallback run folder when main returns, whichever way.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Whatever the caller's umask: what the daemon and its workers (who inherit
  // it) create is for this user only: folders 0700, files 0600, sockets in a
  // 0700 folder.
  umask(077);
  // Debian's Abseil is built without NDEBUG, which leaves absl::Mutex's
  // deadlock detection on: 3-4% of the daemon's CPU under load for a check
  // meant for debug builds (docs/results/load.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"benchd: GPU benchmarking and profiling daemon"};
  app.set_version_flag("--version", std::string("benchd ") + benchd::kVersion);
  DaemonConfig config;
  std::string config_file, listen, metrics, data_dir, worker;
  std::vector<std::string> devices;
  int start_timeout = 0;
  int heartbeat_timeout = 0;
  std::vector<std::string> progress_timeouts;
  int stop_grace = std::numeric_limits<int>::min();  // not given
  std::string tls_cert, tls_key, tls_client_ca, auth_file;
  bool insecure = false;
  benchd::server::ClusterFlags cluster_flags;
  int node_rank = -1, nodes = 0;
  double lost_after = 0;
  app.add_option("--config", config_file, "JSON config file (flags override it)");
  // The last --listen / --metrics wins, so a wrapper's defaults can be overridden.
  app.add_option("--listen", listen, "gRPC address (default 127.0.0.1:7531; port 0 = any free)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--metrics", metrics,
                 "/metrics address (default 127.0.0.1:9531; 'off' = none; port 0 = any free)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--data-dir", data_dir,
                 "where the store, logs and sockets live (default ./benchd-data)");
  app.add_option("--device", devices, "a device to serve (cpu:0, cuda:N); repeat; default: detect");
  app.add_option("--worker", worker, "benchd-worker binary (default: beside benchd)");
  app.add_option("--worker-start-timeout", start_timeout, "seconds a worker may take to start");
  app.add_option("--worker-heartbeat-timeout", heartbeat_timeout,
                 "seconds a worker may leave its heartbeat unanswered before it is shown "
                 "UNRESPONSIVE (default 10)");
  app.add_option("--stop-grace", stop_grace,
                 "seconds running jobs get to finish after SIGTERM/SIGINT before they are "
                 "interrupted (default 10; queued jobs stay queued)");
  std::vector<std::string> kind_defaults;
  for (benchd::v1::JobKind kind : benchd::JobKinds()) {
    kind_defaults.push_back(
        absl::StrCat(benchd::JobKindName(kind), " ", benchd::DefaultProgressTimeoutSeconds(kind)));
  }
  app.add_option("--progress-timeout", progress_timeouts,
                 absl::StrCat("KIND=SECONDS: a job of KIND that shows no progress for SECONDS has "
                              "its worker killed and fails (defaults: ",
                              absl::StrJoin(kind_defaults, ", "),
                              "); repeat; a job's progress_timeout_seconds wins"));
  app.add_option("--tls-cert", tls_cert,
                 "PEM certificate chain: the gRPC port speaks TLS (reloaded on SIGHUP)");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert (reloaded on SIGHUP)");
  app.add_option("--tls-client-ca", tls_client_ca,
                 "PEM CA: every client must show a certificate it signed (mTLS)");
  app.add_option("--auth-file", auth_file,
                 "who may do what: lines 'ROLE NAME sha256:<token hash>' or 'ROLE NAME "
                 "subject:<certificate subject>', ROLE read|submit|admin (benchctl token create; "
                 "reloaded on SIGHUP)");
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without TLS or without checking callers");
  // A cluster (docs/architecture.md "Cluster"): the launcher's environment,
  // or these flags; a flag beside --cluster-from wins.
  app.add_option("--cluster-from", cluster_flags.from,
                 "join a cluster as the launcher says: slurm (SLURM_NODEID, SLURM_JOB_NODELIST) or "
                 "kubernetes (an Indexed Job: JOB_COMPLETION_INDEX, BENCHD_NODES, "
                 "BENCHD_CLUSTER_JOB, BENCHD_CLUSTER_SERVICE)")
      ->check(CLI::IsMember({"slurm", "kubernetes"}));
  app.add_option("--cluster-coordinator", cluster_flags.coordinator,
                 "HOST:PORT of the cluster's rank 0 (with --node-rank and --nodes)");
  app.add_option("--node-rank", node_rank, "this daemon's rank in the cluster (0 = coordinator)");
  app.add_option("--nodes", nodes, "how many daemons the cluster has");
  app.add_option("--node-name", cluster_flags.name,
                 "this member's name in device names (node1/cuda:0); default node<rank>");
  app.add_option("--advertise", cluster_flags.advertise,
                 "HOST:PORT the other members reach this daemon at (default: --listen's, or this "
                 "host's name when --listen is a wildcard)");
  app.add_option("--cluster-lost-after", lost_after,
                 "seconds without a heartbeat after which a member is LOST and its groups broken "
                 "(default 10)");
  CLI11_PARSE(app, argc, argv);
  if (node_rank >= 0) cluster_flags.rank = node_rank;
  if (nodes > 0) cluster_flags.nodes = nodes;
  if (lost_after > 0) cluster_flags.lost_after_s = lost_after;

  if (!config_file.empty()) {
    if (auto s = benchd::server::LoadConfigFile(config_file, &config); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  if (!listen.empty()) config.listen_address = listen;
  if (!metrics.empty()) config.metrics_address = metrics == "off" ? "" : metrics;
  if (!data_dir.empty()) config.data_dir = data_dir;
  if (!devices.empty()) config.devices = devices;
  if (!worker.empty()) config.worker_path = worker;
  if (start_timeout > 0) config.worker_start_timeout_s = start_timeout;
  if (heartbeat_timeout != 0) config.worker_heartbeat_timeout_s = heartbeat_timeout;
  for (const auto& flag : progress_timeouts) {
    if (auto s = benchd::server::ParseProgressTimeout(flag, &config.progress_timeout_s); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  if (stop_grace != std::numeric_limits<int>::min()) config.stop_grace_s = stop_grace;
  if (!tls_cert.empty()) config.tls_cert = tls_cert;
  if (!tls_key.empty()) config.tls_key = tls_key;
  if (!tls_client_ca.empty()) config.tls_client_ca = tls_client_ca;
  if (!auth_file.empty()) config.auth_file = auth_file;
  if (insecure) config.insecure = true;
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return Fail("--tls-cert and --tls-key go together: give both, or neither");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return Fail(
        "--tls-client-ca (mTLS) needs the daemon's own certificate: give --tls-cert and "
        "--tls-key too");
  }
  // Who gets in. Loopback stays open as before; an address other hosts
  // reach needs TLS and a check of callers, unless --insecure says otherwise.
  const bool tls_on = !config.tls_cert.empty();
  const bool checks_callers = !config.auth_file.empty() || !config.tls_client_ca.empty();
  if (!IsLoopbackAddress(config.listen_address) && !config.insecure) {
    if (!tls_on) {
      return Fail(absl::StrCat(
          "--listen ", config.listen_address,
          " is reachable from other hosts, and without TLS anyone on the network reads and sends "
          "its calls: give --tls-cert and --tls-key (and --auth-file or --tls-client-ca), or "
          "--insecure to serve it in the clear anyway"));
    }
    if (!checks_callers) {
      return Fail(absl::StrCat("--listen ", config.listen_address,
                               " is reachable from other hosts, and without --auth-file or "
                               "--tls-client-ca every caller may do everything: give one, or "
                               "--insecure to serve it so anyway"));
    }
  }
  // /metrics has no TLS: Debian's civetweb (under prometheus-cpp) crashes
  // serving HTTPS with OpenSSL 3 (a null entry in the SSL functions it loads
  // at run time; docs/architecture.md). Off loopback it stays off unless
  // --insecure: scrape it through a TLS proxy on the node, or on loopback.
  if (!config.metrics_address.empty() && !IsLoopbackAddress(config.metrics_address) &&
      !config.insecure) {
    return Fail(absl::StrCat("--metrics ", config.metrics_address,
                             " is reachable from other hosts, and /metrics has no TLS here: keep "
                             "it on loopback (scrape it through a TLS proxy on the node), "
                             "--metrics off, or --insecure to serve it in the clear"));
  }
  if (config.stop_grace_s < 0 || config.stop_grace_s > 3600) {
    return Fail(absl::StrCat("stop grace: expected 0..3600 seconds, got ", config.stop_grace_s));
  }
  if (config.worker_heartbeat_timeout_s < 1 || config.worker_heartbeat_timeout_s > 3600) {
    return Fail(absl::StrCat("worker heartbeat timeout: expected 1..3600 seconds, got ",
                             config.worker_heartbeat_timeout_s));
  }
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  auto cluster_options = benchd::server::ResolveClusterOptions(
      cluster_flags, config.listen_address, hostname, benchd::server::ProcessClusterEnvironment());
  if (!cluster_options.ok()) return Fail(std::string(cluster_options.status().message()));
  // Node-to-node calls carry benchctl's credentials (BENCHD_TOKEN_FILE,
  // BENCHD_TLS_CA, ... or the client config file), checked against the
  // coordinator's address: no token in the clear to another host.
  benchd::server::PeerChannels peers;
  if (cluster_options->enabled) {
    benchd::CredentialFlags peer_flags;
    peer_flags.address = cluster_options->coordinator;
    auto settings = benchd::ResolveClientSettings(peer_flags, benchd::ProcessEnvironment());
    if (!settings.ok()) {
      return Fail(absl::StrCat("node-to-node credentials: ", settings.status().message()));
    }
    for (const auto& warning : settings->warnings) fprintf(stderr, "benchd: %s\n", warning.c_str());
    // Members are set up alike: a daemon that serves TLS dials TLS too. Its
    // plaintext calls would only be dropped by the others' TLS ports.
    if (!config.tls_cert.empty() && !settings->security.tls) {
      return Fail(
          "this daemon serves TLS, but its calls to the cluster's other members would be "
          "plaintext: set BENCHD_TLS_CA to the CA of their certificates (or BENCHD_TLS=1 for the "
          "system's CAs; \"tls_ca\" in the client config file), as for benchctl");
    }
    peers = benchd::server::PeerChannels(settings->security);
  }
  if (config.devices.empty()) config.devices = benchd::server::DetectDevices();
  for (const auto& d : config.devices) {
    if (auto s = benchd::server::CheckDeviceName(d); !s.ok()) return Fail(std::string(s.message()));
  }
  if (config.worker_path.empty()) {
    config.worker_path = (fs::canonical("/proc/self/exe").parent_path() / "benchd-worker").string();
  }
  if (access(config.worker_path.c_str(), X_OK) != 0) {
    return Fail(absl::StrCat("worker binary '", config.worker_path,
                             "' is not an executable file; pass --worker"));
  }

  std::error_code ec;
  const fs::path data = fs::absolute(config.data_dir);
  fs::create_directories(data, ec);  // 0700 for what it makes (umask 077)
  if (ec) return Fail(absl::StrCat("cannot create ", data.string(), ": ", ec.message()));
  for (const fs::path& dir : {data / "logs", data / "artifacts"}) {
    if (auto s = benchd::server::MakePrivateDir(dir.string()); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  RemoveOnExit temporary_run_dir;
  std::string run_dir = (data / "run").string();
  if (FitsSocketPath(run_dir)) {
    if (auto s = benchd::server::MakePrivateDir(run_dir); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  } else {
    auto made = benchd::server::MakeTemporaryRunDir(benchd::server::RuntimeDirCandidates(),
                                                    kSocketNameBytes);
    if (!made.ok()) return Fail(std::string(made.status().message()));
    run_dir = temporary_run_dir.path = *made;
  }

  // SIGTERM/SIGINT (stop) and SIGHUP (reload) are taken by sigwait below;
  // every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto store = benchd::server::Store::Open((data / "benchd.sqlite3").string());
  if (!store.ok()) return Fail(std::string(store.status().message()));
  // Before any worker starts: artifacts of another store are refused here.
  if (auto s = benchd::server::ClaimArtifactsDir(**store, (data / "artifacts").string()); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::unique_ptr<benchd::server::ReloadableTls> tls;
  if (tls_on) {
    auto loaded = benchd::server::ReloadableTls::Load(
        {config.tls_cert, config.tls_key, config.tls_client_ca});
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    tls = *std::move(loaded);
  }
  std::unique_ptr<benchd::server::AuthFile> principals;
  if (!config.auth_file.empty()) {
    auto loaded = benchd::server::AuthFile::Load(config.auth_file);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    principals = std::make_unique<benchd::server::AuthFile>(*std::move(loaded));
  }
  benchd::server::Authorizer authorizer({.client_certificates = !config.tls_client_ca.empty(),
                                         .tls = tls_on,
                                         .insecure = config.insecure},
                                        std::move(principals));
  auto metrics_or = benchd::server::Metrics::Create(config.metrics_address, config.devices);
  if (!metrics_or.ok()) return Fail(std::string(metrics_or.status().message()));
  auto& registry = *metrics_or;

  benchd::server::EventHub hub;
  benchd::server::Supervisor::Options supervisor_options;
  supervisor_options.worker_path = config.worker_path;
  supervisor_options.run_dir = run_dir;
  supervisor_options.log_dir = (data / "logs").string();
  supervisor_options.start_timeout = std::chrono::seconds(config.worker_start_timeout_s);
  supervisor_options.artifacts_dir = (data / "artifacts").string();
  supervisor_options.heartbeat_timeout = std::chrono::seconds(config.worker_heartbeat_timeout_s);
  benchd::server::Supervisor supervisor(supervisor_options, config.devices, registry.get());
  benchd::server::Cluster cluster(
      *cluster_options,
      [&supervisor, host = std::string(hostname)] {
        benchd::v1::ClusterNode self;
        self.set_hostname(host);
        for (benchd::v1::Device& d : supervisor.Devices()) *self.add_devices() = std::move(d);
        *self.mutable_versions() = supervisor.WorkerVersions();
        self.mutable_versions()->set_benchd(benchd::kVersion);
        return self;
      },
      peers);
  // The workers of this node and, by "node/device" names, of the other members.
  benchd::server::ClusterWorkers cluster_workers(&supervisor, &cluster, &peers);
  benchd::server::GroupRegistry groups(&cluster_workers, registry.get(), config.devices);
  cluster.SetNodeLostListener(
      [&groups](const std::string& node, const std::string& why) { groups.OnNodeLost(node, why); });
  supervisor.SetExitListener(
      [&groups](const std::string& device, uint64_t generation, pid_t pid, const std::string& how) {
        groups.OnWorkerExit(device, generation, pid, how);
      });
  benchd::server::JobManager jobs(store->get(), &hub, &cluster_workers, registry.get(),
                                  config.devices);
  jobs.EnableCollectives(&groups, (data / "artifacts").string());
  jobs.SetProgressTimeouts(config.progress_timeout_s);
  benchd::server::BenchService service(
      &jobs, &hub, &supervisor,
      {data.string(), registry->BoundAddress(), (data / "artifacts").string()}, &groups);
  service.SetOnEvicted([&jobs] { jobs.RefreshResidentModels(""); });
  service.SetAuthorizer(&authorizer);
  benchd::server::Forwarder forwarder(&cluster, &peers);
  service.SetCluster(&cluster, cluster_options->enabled ? &forwarder : nullptr);
  benchd::server::ClusterService cluster_service(&cluster, &authorizer);
  benchd::server::NodeService node_service(&supervisor, &authorizer);

  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<benchd::server::PublicReflection> reflection(
      benchd::server::NewPublicReflection());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen_address,
                           tls ? tls->ServerCredentials() : grpc::InsecureServerCredentials(),
                           &port);
  // No request comes near this (common/limits.h): gRPC refuses a bigger one
  // before it is parsed.
  builder.SetMaxReceiveMessageSize(benchd::kMaxRequestBytes);
  builder.RegisterService(&service);
  builder.RegisterService(reflection.get());
  if (cluster_options->enabled) {
    builder.RegisterService(&cluster_service);
    builder.RegisterService(&node_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return Fail(absl::StrCat("cannot listen on ", config.listen_address,
                             " (in use, or not an address of this host?)"));
  }
  const std::string bound = benchd::server::BoundAddress(config.listen_address, port);

  // Health: "" and "benchd.v1.Bench" are SERVING while every device's worker
  // is UP; "benchd.v1.Bench/<device>" follows that device's worker.
  benchd::server::NodeHealth health(config.devices, [hc = server->GetHealthCheckService()](
                                                        const std::string& name, bool serving) {
    hc->SetServingStatus(name, serving);
  });
  supervisor.SetHealthListener(
      [&health](const std::string& device, bool serving) { health.Set(device, serving); });
  supervisor.Start();
  if (auto s = jobs.Start(); !s.ok()) return Fail(std::string(s.message()));

  // Where a script or test finds the daemon when it asked for port 0.
  nlohmann::json endpoints = {{"grpc", bound},
                              {"metrics", registry->BoundAddress()},
                              {"pid", getpid()},
                              {"devices", config.devices}};
  if (auto s =
          benchd::WriteFileAtomically((data / "endpoints.json").string(), endpoints.dump() + "\n");
      !s.ok()) {
    fprintf(stderr, "benchd: %s\n", std::string(s.message()).c_str());
  }
  fprintf(stderr, "benchd: serving gRPC%s on %s, /metrics on %s, devices %s, data in %s\n",
          tls ? " (TLS)" : "", bound.c_str(),
          registry->BoundAddress().empty() ? "(off)" : registry->BoundAddress().c_str(),
          absl::StrJoin(config.devices, ",").c_str(), data.string().c_str());

  if (tls) fprintf(stderr, "benchd: TLS: %s\n", tls->Describe().c_str());
  fprintf(stderr, "benchd: callers: %s\n",
          !checks_callers ? "not checked: every caller may do everything"
          : config.auth_file.empty()
              ? "any client certificate the CA signed, as admin"
              : absl::StrCat(
                    "roles from ", config.auth_file,
                    tls && tls->client_certificates() ? " (tokens and certificates)" : " (tokens)")
                    .c_str());
  if (cluster_options->enabled) {
    const auto& c = *cluster_options;
    fprintf(stderr,
            "benchd: cluster: %s, rank %d of %d (from %s), coordinator %s, reached at %s; "
            "node-to-node calls: %s\n",
            c.name.c_str(), c.rank, c.nodes, c.launcher.c_str(), c.coordinator.c_str(),
            c.advertise.c_str(), peers.Describe().c_str());
    cluster.Start();
  }
  if (config.insecure) {
    fprintf(stderr, "benchd: WARNING: --insecure: %s is served%s%s; GetNodeInfo says so\n",
            bound.c_str(), tls_on ? "" : " without TLS",
            checks_callers ? "" : " to every caller as admin");
  }

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    // Reload what may be renewed without a restart; what fails to load is
    // reported and the old one stays.
    if (tls) {
      auto s = tls->Reload();
      fprintf(stderr, "benchd: SIGHUP: TLS %s\n",
              s.ok() ? absl::StrCat("reloaded: ", tls->Describe()).c_str()
                     : absl::StrCat("kept the old certificate: ", s.message()).c_str());
    }
    if (!config.auth_file.empty()) {
      auto loaded = benchd::server::AuthFile::Load(config.auth_file);
      if (loaded.ok()) {
        fprintf(stderr, "benchd: SIGHUP: auth file reloaded: %zu principals\n", loaded->size());
        authorizer.Replace(std::make_unique<benchd::server::AuthFile>(*std::move(loaded)));
      } else {
        fprintf(stderr, "benchd: SIGHUP: kept the old auth file: %s\n",
                std::string(loaded.status().message()).c_str());
      }
    }
    if (!tls && config.auth_file.empty()) fprintf(stderr, "benchd: SIGHUP: nothing to reload\n");
  }
  // Drain while still serving: watchers see running jobs finish; Submit refuses.
  fprintf(stderr, "benchd: %s: stopping; running jobs have %d s to finish\n", strsignal(sig),
          config.stop_grace_s);
  if (!jobs.Drain(std::chrono::seconds(config.stop_grace_s))) {
    fprintf(stderr, "benchd: jobs still running after %d s are interrupted\n", config.stop_grace_s);
  }
  cluster.Stop();
  // What still runs is interrupted while the server still serves, so a
  // watcher gets the job's `interrupted` event before its stream closes
  // (after it the Watch ends by itself and Shutdown need not wait for it).
  jobs.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  supervisor.Stop();
  fs::remove(data / "endpoints.json", ec);
  fprintf(stderr, "benchd: stopped\n");
  return 0;
}
