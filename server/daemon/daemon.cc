#include "server/daemon/daemon.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/artifacts.h"
#include "common/credentials.h"
#include "common/limits.h"
#include "common/version.h"
#include "grpc/grpc.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "nlohmann/json.hpp"
#include "server/core/devices.h"
#include "server/security/private_dir.h"
#include "server/store/artifact_owner.h"

namespace benchd::server {
namespace {

namespace fs = std::filesystem;

// Unix socket paths are limited to 107 bytes; a deep data dir falls back to
// a new private folder (mkdtemp) under $XDG_RUNTIME_DIR, /run/user/<uid> or
// /tmp, removed at stop.
constexpr size_t kSocketNameBytes = sizeof("/worker-cuda-999.sock");

bool FitsSocketPath(const fs::path& run) { return run.string().size() + kSocketNameBytes <= 107; }

// The gRPC server's HTTP/2 and connection limits, all here (docs/security.md
// "HTTP/2 and connection abuse" gives each and what it does not cover). gRPC
// 1.51 (Debian 12) predates upstream's fixes for rapid reset, connection
// floods and HPACK parsing (CVE-2023-44487, CVE-2023-4785, CVE-2023-33953).
//
// Streams open at once on one connection; a client past it waits, not fails:
// above the 1,000 Watches the load bench holds on one channel and the calls a
// coordinator forwards over its one channel per member.
constexpr int kMaxConcurrentStreams = 2048;
// A connection without a call for this long is closed (GOAWAY): a client
// reconnects on its next call; idle connections held open are let go.
constexpr int kMaxConnectionIdleMs = 2 * 60 * 1000;
// A connection this old is asked to go (GOAWAY): new calls take a new one
// (and the certificate SIGHUP renewed) ...
constexpr int kMaxConnectionAgeMs = 60 * 60 * 1000;
// ... and its open calls finish however long they take: a Watch lasts as
// long as its job, and neither benchctl nor the Python client resumes one
// that is cut.
constexpr int kMaxConnectionAgeGraceMs = INT_MAX;
// TLS and the client's HTTP/2 SETTINGS within this long, or the connection
// is closed (gRPC's default: 120 s): sockets opened and left bare go.
constexpr int kHandshakeTimeoutMs = 10 * 1000;
// A quiet connection is pinged this often and closed when the answer does
// not come within the timeout: vanished peers and readers that never read.
constexpr int kKeepaliveTimeMs = 60 * 1000;
constexpr int kKeepaliveTimeoutMs = 20 * 1000;
// A client's pings without data closer together than this are strikes, and
// past kMaxPingStrikes the connection ends (GOAWAY ENHANCE_YOUR_CALM): a ping
// flood. No benchd client sends keepalive pings.
constexpr int kMinRecvPingIntervalMs = 60 * 1000;
constexpr int kMaxPingStrikes = 2;
// All headers of one call: a token and gRPC's own need under 1 KiB; more is
// refused (RST_STREAM) before the call starts.
constexpr int kMaxMetadataBytes = 8 * 1024;
// Memory gRPC may take for its buffers (reads, frames, calls): near it, gRPC
// closes idle connections, then cancels calls, rather than grow.
constexpr size_t kGrpcMemoryBytes = size_t{256} << 20;
// Threads gRPC may start for synchronous handlers (the callback handlers
// benchd has run on gRPC's own pools, sized by the CPU count; docs say so).
constexpr int kGrpcMaxThreads = 64;

void SetServerLimits(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kMaxConnectionIdleMs);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, kMaxConnectionAgeMs);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, kMaxConnectionAgeGraceMs);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              kMinRecvPingIntervalMs);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  builder->AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  grpc::ResourceQuota quota("benchd");
  quota.Resize(kGrpcMemoryBytes);
  quota.SetMaxThreads(kGrpcMaxThreads);
  builder->SetResourceQuota(quota);
}

// gRPC 1.51 stops accepting for good once accept() fails for want of file
// descriptors (CVE-2023-4785): take the hard limit, so that only a flood of
// that many connections reaches it (docs/security.md says what does not).
void RaiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    fprintf(stderr, "benchd: cannot raise the open-file limit from %llu: %s\n",
            static_cast<unsigned long long>(was), strerror(errno));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config) {
  std::unique_ptr<Daemon> d(new Daemon(std::move(config)));
  if (auto s = d->Prepare(); !s.ok()) return s;
  if (auto s = d->Wire(); !s.ok()) return s;
  if (auto s = d->Serve(); !s.ok()) return s;
  d->LogStarted();
  return d;
}

Daemon::~Daemon() {
  // Members go in reverse order (the server before the services it calls);
  // the fallback run folder after the workers whose sockets it held.
  health_.reset();
  server_.reset();
  if (!temporary_run_dir_.empty()) {
    supervisor_.reset();
    std::error_code ec;
    fs::remove_all(temporary_run_dir_, ec);
  }
}

absl::Status Daemon::Prepare() {
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  hostname_ = hostname;
  auto cluster = ResolveClusterOptions(config_.cluster, config_.listen_address, hostname_,
                                       ProcessClusterEnvironment());
  if (!cluster.ok()) return cluster.status();
  cluster_options_ = *std::move(cluster);
  // Node-to-node calls carry benchctl's credentials (BENCHD_TOKEN_FILE,
  // BENCHD_TLS_CA, ... or the client config file), checked against the
  // coordinator's address: no token in the clear to another host.
  if (cluster_options_.enabled) {
    CredentialFlags peer_flags;
    peer_flags.address = cluster_options_.coordinator;
    auto settings = ResolveClientSettings(peer_flags, ProcessEnvironment());
    if (!settings.ok()) {
      return absl::Status(settings.status().code(),
                          absl::StrCat("node-to-node credentials: ", settings.status().message()));
    }
    for (const auto& warning : settings->warnings) fprintf(stderr, "benchd: %s\n", warning.c_str());
    // Members are set up alike: a daemon that serves TLS dials TLS too. Its
    // plaintext calls would only be dropped by the others' TLS ports.
    if (!config_.tls_cert.empty() && !settings->security.tls) {
      return absl::InvalidArgumentError(
          "this daemon serves TLS, but its calls to the cluster's other members would be "
          "plaintext: set BENCHD_TLS_CA to the CA of their certificates (or BENCHD_TLS=1 for the "
          "system's CAs; \"tls_ca\" in the client config file), as for benchctl");
    }
    // And the cluster's secret, which makes each call a member's.
    peers_ = PeerChannels(settings->security, cluster_options_.secret);
  }
  if (config_.devices.empty()) config_.devices = DetectDevices();
  for (const auto& d : config_.devices) {
    if (auto s = CheckDeviceName(d); !s.ok()) return s;
  }
  if (config_.worker_path.empty()) {
    config_.worker_path =
        (fs::canonical("/proc/self/exe").parent_path() / "benchd-worker").string();
  }
  if (access(config_.worker_path.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("worker binary '", config_.worker_path,
                                                   "' is not an executable file; pass --worker"));
  }

  std::error_code ec;
  const fs::path data = fs::absolute(config_.data_dir);
  data_ = data.string();
  fs::create_directories(data, ec);  // 0700 for what it makes (umask 077)
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", data_, ": ", ec.message()));
  for (const fs::path& dir : {data / "logs", data / "artifacts"}) {
    if (auto s = MakePrivateDir(dir.string()); !s.ok()) return s;
  }
  run_dir_ = (data / "run").string();
  if (FitsSocketPath(run_dir_)) {
    if (auto s = MakePrivateDir(run_dir_); !s.ok()) return s;
  } else {
    auto made = MakeTemporaryRunDir(RuntimeDirCandidates(), kSocketNameBytes);
    if (!made.ok()) return made.status();
    run_dir_ = temporary_run_dir_ = *made;
  }

  // SIGTERM/SIGINT (stop) and SIGHUP (reload) are taken by sigwait in
  // ServeUntilStopped; every thread started from here on inherits the mask.
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return absl::OkStatus();
}

absl::Status Daemon::Wire() {
  const std::string artifacts = data_ + "/artifacts";
  auto store = Store::Open(data_ + "/benchd.sqlite3");
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  // Before any worker starts: artifacts of another store are refused here.
  if (auto s = ClaimArtifactsDir(*store_, artifacts); !s.ok()) return s;
  if (!config_.tls_cert.empty()) {
    auto loaded = ReloadableTls::Load({config_.tls_cert, config_.tls_key, config_.tls_client_ca});
    if (!loaded.ok()) return loaded.status();
    tls_ = *std::move(loaded);
  }
  std::unique_ptr<AuthFile> principals;
  if (!config_.auth_file.empty()) {
    auto loaded = AuthFile::Load(config_.auth_file);
    if (!loaded.ok()) return loaded.status();
    principals = std::make_unique<AuthFile>(*std::move(loaded));
  }
  authorizer_ = std::make_unique<Authorizer>(
      Authorizer::Options{.client_certificates = !config_.tls_client_ca.empty(),
                          .tls = tls_ != nullptr,
                          .insecure = config_.insecure},
      std::move(principals));
  auto metrics = Metrics::Create(config_.metrics_address, config_.devices);
  if (!metrics.ok()) return metrics.status();
  metrics_ = *std::move(metrics);

  Supervisor::Options supervisor_options;
  supervisor_options.worker_path = config_.worker_path;
  supervisor_options.run_dir = run_dir_;
  supervisor_options.log_dir = data_ + "/logs";
  supervisor_options.start_timeout = std::chrono::seconds(config_.worker_start_timeout_s);
  supervisor_options.artifacts_dir = artifacts;
  supervisor_options.heartbeat_timeout = std::chrono::seconds(config_.worker_heartbeat_timeout_s);
  supervisor_options.idle_exit = std::chrono::seconds(config_.worker_idle_exit_s);
  supervisor_ = std::make_unique<Supervisor>(supervisor_options, config_.devices, metrics_.get());
  cluster_ = std::make_unique<Cluster>(
      cluster_options_,
      [supervisor = supervisor_.get(), host = hostname_] {
        v1::ClusterNode self;
        self.set_hostname(host);
        for (v1::Device& d : supervisor->Devices()) *self.add_devices() = std::move(d);
        *self.mutable_versions() = supervisor->WorkerVersions();
        self.mutable_versions()->set_benchd(kVersion);
        return self;
      },
      peers_);
  // The workers of this node and, by "node/device" names, of the other members.
  cluster_workers_ = std::make_unique<ClusterWorkers>(supervisor_.get(), cluster_.get(), &peers_);
  groups_ =
      std::make_unique<GroupRegistry>(cluster_workers_.get(), metrics_.get(), config_.devices);
  cluster_->SetNodeLostListener(
      [groups = groups_.get()](const std::string& node, const std::string& why) {
        groups->OnNodeLost(node, why);
      });
  supervisor_->SetExitListener([groups = groups_.get()](const std::string& device,
                                                        uint64_t generation, pid_t pid,
                                                        const std::string& how) {
    groups->OnWorkerExit(device, generation, pid, how);
  });
  if (config_.gpu_sharing == GpuSharingMode::kWhenIdle) {
    // BENCHD_NVML_LIBRARY: another libnvidia-ml (tests; a driver off the
    // loader's path).
    const char* nvml = std::getenv("BENCHD_NVML_LIBRARY");
    gpu_sharing_ = std::make_unique<GpuSharing>(
        LoadNvml(nvml != nullptr && *nvml != '\0' ? nvml : "libnvidia-ml.so.1"),
        GpuSharing::Hooks{[supervisor = supervisor_.get()](const std::string& d) {
                            return supervisor->GpuUuid(d);
                          },
                          [supervisor = supervisor_.get()] { return supervisor->WorkerPids(); }});
  }
  jobs_ = std::make_unique<JobManager>(
      store_.get(), &hub_, cluster_workers_.get(), metrics_.get(), config_.devices,
      JobManagerOptions{groups_.get(), artifacts, config_.progress_timeout_s, gpu_sharing_.get()});
  service_ = std::make_unique<BenchService>(
      jobs_.get(), &hub_, supervisor_.get(),
      BenchService::NodeDetails{data_, metrics_->BoundAddress(), artifacts}, groups_.get());
  service_->SetOnEvicted([jobs = jobs_.get()] { jobs->RefreshResidentModels(""); });
  service_->SetAuthorizer(authorizer_.get());
  forwarder_ = std::make_unique<Forwarder>(cluster_.get(), &peers_);
  service_->SetCluster(cluster_.get(), cluster_options_.enabled ? forwarder_.get() : nullptr);
  cluster_service_ = std::make_unique<ClusterService>(cluster_.get(), authorizer_.get());
  node_service_ =
      std::make_unique<NodeService>(supervisor_.get(), authorizer_.get(), cluster_.get());
  return absl::OkStatus();
}

absl::Status Daemon::Serve() {
  grpc::EnableDefaultHealthCheckService(true);
  reflection_.reset(NewPublicReflection());
  RaiseOpenFileLimit();
  grpc::ServerBuilder builder;
  SetServerLimits(&builder);
  int port = 0;
  builder.AddListeningPort(config_.listen_address,
                           tls_ ? tls_->ServerCredentials() : grpc::InsecureServerCredentials(),
                           &port);
  // No request comes near this (common/limits.h): gRPC refuses a bigger one
  // before it is parsed.
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.RegisterService(service_.get());
  builder.RegisterService(reflection_.get());
  if (cluster_options_.enabled) {
    builder.RegisterService(cluster_service_.get());
    builder.RegisterService(node_service_.get());
  }
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen_address,
                                               " (in use, or not an address of this host?)"));
  }
  bound_ = BoundAddress(config_.listen_address, port);

  // Health: "" and "benchd.v1.Bench" are SERVING while every device's worker
  // is UP; "benchd.v1.Bench/<device>" follows that device's worker.
  health_ = std::make_unique<NodeHealth>(
      config_.devices,
      [hc = server_->GetHealthCheckService()](const std::string& name, bool serving) {
        hc->SetServingStatus(name, serving);
      });
  supervisor_->SetHealthListener([health = health_.get()](const std::string& device, bool serving) {
    health->Set(device, serving);
  });
  supervisor_->Start();
  if (auto s = jobs_->Start(); !s.ok()) return s;

  // Where a script or test finds the daemon when it asked for port 0.
  nlohmann::json endpoints = {{"grpc", bound_},
                              {"metrics", metrics_->BoundAddress()},
                              {"pid", getpid()},
                              {"devices", config_.devices}};
  if (auto s = WriteFileAtomically(data_ + "/endpoints.json", endpoints.dump() + "\n"); !s.ok()) {
    fprintf(stderr, "benchd: %s\n", std::string(s.message()).c_str());
  }
  if (cluster_options_.enabled) cluster_->Start();
  return absl::OkStatus();
}

void Daemon::LogStarted() const {
  const bool checks_callers = !config_.auth_file.empty() || !config_.tls_client_ca.empty();
  fprintf(stderr, "benchd: serving gRPC%s on %s, /metrics on %s, devices %s, data in %s\n",
          tls_ ? " (TLS)" : "", bound_.c_str(),
          metrics_->BoundAddress().empty() ? "(off)" : metrics_->BoundAddress().c_str(),
          absl::StrJoin(config_.devices, ",").c_str(), data_.c_str());
  if (tls_) fprintf(stderr, "benchd: TLS: %s\n", tls_->Describe().c_str());
  fprintf(stderr, "benchd: callers: %s\n",
          !checks_callers ? "not checked: every caller may do everything"
          : config_.auth_file.empty()
              ? "any client certificate the CA signed, as admin"
              : absl::StrCat("roles from ", config_.auth_file,
                             tls_ && tls_->client_certificates() ? " (tokens and certificates)"
                                                                 : " (tokens)")
                    .c_str());
  if (cluster_options_.enabled) {
    const auto& c = cluster_options_;
    fprintf(stderr,
            "benchd: cluster: %s, rank %d of %d (from %s), coordinator %s, reached at %s; "
            "node-to-node calls: %s\n",
            c.name.c_str(), c.rank, c.nodes, c.launcher.c_str(), c.coordinator.c_str(),
            c.advertise.c_str(), peers_.Describe().c_str());
  }
  fprintf(stderr, "benchd: GPUs: %s\n",
          gpu_sharing_ ? gpu_sharing_->Describe().c_str()
                       : "--gpu-sharing dedicated: benchd's own, shared with no other work");
  if (config_.insecure) {
    fprintf(stderr, "benchd: WARNING: --insecure: %s is served%s%s; GetNodeInfo says so\n",
            bound_.c_str(), tls_ ? "" : " without TLS",
            checks_callers ? "" : " to every caller as admin");
  }
}

void Daemon::Reload() {
  // What may be renewed without a restart; what fails to load is reported
  // and the old one stays.
  if (tls_) {
    auto s = tls_->Reload();
    fprintf(stderr, "benchd: SIGHUP: TLS %s\n",
            s.ok() ? absl::StrCat("reloaded: ", tls_->Describe()).c_str()
                   : absl::StrCat("kept the old certificate: ", s.message()).c_str());
  }
  if (!config_.auth_file.empty()) {
    auto loaded = AuthFile::Load(config_.auth_file);
    if (loaded.ok()) {
      fprintf(stderr, "benchd: SIGHUP: auth file reloaded: %zu principals\n", loaded->size());
      authorizer_->Replace(std::make_unique<AuthFile>(*std::move(loaded)));
    } else {
      fprintf(stderr, "benchd: SIGHUP: kept the old auth file: %s\n",
              std::string(loaded.status().message()).c_str());
    }
  }
  if (!tls_ && config_.auth_file.empty()) fprintf(stderr, "benchd: SIGHUP: nothing to reload\n");
}

int Daemon::ServeUntilStopped() {
  int sig = 0;
  for (;;) {
    sigwait(&signals_, &sig);
    if (sig != SIGHUP) break;
    Reload();
  }
  // Drain while still serving: watchers see running jobs finish; Submit refuses.
  fprintf(stderr, "benchd: %s: stopping; running jobs have %d s to finish\n", strsignal(sig),
          config_.stop_grace_s);
  if (!jobs_->Drain(std::chrono::seconds(config_.stop_grace_s))) {
    fprintf(stderr, "benchd: jobs still running after %d s are interrupted\n",
            config_.stop_grace_s);
  }
  cluster_->Stop();
  // What still runs is interrupted while the server still serves, so a
  // watcher gets the job's `interrupted` event before its stream closes
  // (after it the Watch ends by itself and Shutdown need not wait for it).
  jobs_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  supervisor_->Stop();
  std::error_code ec;
  fs::remove(data_ + "/endpoints.json", ec);
  fprintf(stderr, "benchd: stopped\n");
  return 0;
}

}  // namespace benchd::server
