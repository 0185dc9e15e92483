// benchd's Prometheus metrics (prometheus-cpp), served at /metrics by the
// daemon: the worker loads libtorch_cuda, beside which civetweb cannot start.
// Names follow Prometheus practice: benchd_ prefix, base units, _total
// counters, labels from small fixed sets (custom model configs are "custom",
// collective sizes are their power-of-two size class) except a benchmark's
// workload: one series per distinct workload (`workload`, a hash of
// everything that sets its step time, beside the readable model, mode,
// precision, batch_size and context_length), so a shape change is a new
// series, never a regression of the old one. `device` is the daemon's device
// name on every per-device series; benchd_worker_info adds the GPU's `UUID`
// and `pci_bus_id`, dcgm-exporter's labels, to join with its series. `node`
// is not exported: the scrape config sets it per target (deploy/prometheus).
#ifndef BENCHD_SERVER_CORE_METRICS_H_
#define BENCHD_SERVER_CORE_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace benchd::server {

class Metrics {
 public:
  // Serves /metrics on `address` ("" = not served; the registry still counts).
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const std::string& address,
                                                         const std::vector<std::string>& devices);
  // "127.0.0.1:9531" with the port really bound (for address port 0), or "".
  std::string BoundAddress() const { return bound_address_; }

  void JobSubmitted(const std::string& kind);
  // outcome: succeeded, failed, cancelled, interrupted. seconds < 0: never started.
  void JobFinished(const std::string& kind, const std::string& outcome, double seconds);
  // The peak memory of a finished job's result (benchmark, profile, memory),
  // by kind and device; other results are ignored.
  void SetLastPeakMemory(const std::string& kind, const v1::JobResult& result);
  void SetQueueDepth(const std::string& device, size_t depth);
  void SetRunning(const std::string& device, bool running);
  // One measured benchmark step of a resolved spec.
  void ObserveStep(const v1::BenchmarkSpec& spec, double seconds);
  void SetLastBenchmark(const v1::BenchmarkResult& result);
  void SetWorkerUp(const std::string& device, bool up);
  // 1 while the device's worker is parked (--worker-idle-exit): down on
  // purpose, not a failure.
  void SetWorkerParked(const std::string& device, bool parked);
  void WorkerRestarted(const std::string& device);
  // What a started worker reported (benchd_worker_info): its device model,
  // versions and, for a GPU, its UUID and PCI bus id.
  void SetWorkerInfo(const std::string& device, const internal::WorkerInfo& info);
  // Memory in use is total - free: everything on the device, as nvidia-smi counts it.
  void SetDeviceMemory(const std::string& device, int64_t total_bytes, int64_t free_bytes);
  void SetResidentModels(const std::string& device, int64_t count, int64_t bytes);
  // A collective cell as it completes: its bus bandwidth (bytes/s) and each
  // iteration's duration (the slowest rank's, seconds).
  void ObserveCollective(const std::string& op, const std::string& backend, int world_size,
                         int64_t size_bytes, double bus_bytes_per_second,
                         const std::vector<double>& iteration_seconds);
  // Process groups by backend and state ("ready", "broken").
  void SetGroups(const std::string& backend, const std::string& state, int64_t count);
  // A stored job record that does not parse (counted once per row and run).
  void StoreBadRow();
  // Finished jobs whose final record waits to be stored (a full data disk).
  void SetUnstoredResults(int64_t count);

  // The text exposition of everything, as /metrics serves it.
  std::string Serialize() const;

 private:
  Metrics();
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;

  prometheus::Family<prometheus::Counter>* jobs_submitted_;
  prometheus::Family<prometheus::Counter>* jobs_finished_;
  prometheus::Family<prometheus::Histogram>* job_duration_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Gauge>* jobs_running_;
  prometheus::Family<prometheus::Histogram>* step_duration_;
  prometheus::Family<prometheus::Gauge>* last_step_;
  prometheus::Family<prometheus::Gauge>* last_tokens_;
  prometheus::Family<prometheus::Gauge>* last_flops_;
  prometheus::Family<prometheus::Gauge>* last_peak_memory_;
  prometheus::Family<prometheus::Gauge>* last_roofline_;
  prometheus::Family<prometheus::Gauge>* job_peak_memory_;
  prometheus::Family<prometheus::Gauge>* worker_info_;
  prometheus::Family<prometheus::Gauge>* memory_total_;
  prometheus::Family<prometheus::Gauge>* memory_used_;
  prometheus::Family<prometheus::Histogram>* collective_duration_;
  prometheus::Family<prometheus::Gauge>* worker_up_;
  prometheus::Family<prometheus::Gauge>* worker_parked_;
  prometheus::Family<prometheus::Counter>* worker_restarts_;
  prometheus::Family<prometheus::Gauge>* resident_models_;
  prometheus::Family<prometheus::Gauge>* resident_model_bytes_;
  prometheus::Family<prometheus::Gauge>* build_info_;
  prometheus::Family<prometheus::Gauge>* collective_busbw_;
  prometheus::Family<prometheus::Gauge>* groups_;
  prometheus::Family<prometheus::Counter>* store_bad_rows_;
  prometheus::Family<prometheus::Gauge>* unstored_results_;

  std::mutex mu_;  // guards worker_info_by_device_
  // A restarted worker with other versions replaces its old info series.
  std::map<std::string, prometheus::Labels> worker_info_by_device_;
};

// The size class of a collective message: the largest power of two <= bytes
// (1 for bytes < 1), so any sweep stays within 64 label values.
int64_t SizeClass(int64_t bytes);

// The label value for a model: its preset name, or "custom".
std::string ModelLabel(const v1::ModelConfig& model);

// 16 hex digits naming a resolved benchmark's workload: everything that sets
// its step time (the model's dimensions, mode, precision, batch size, context
// length and every speed option), not how it is measured (warm-up and
// measured step counts, seed, parity export) nor the preset's name (a preset
// and the same dimensions spelled out are one workload). Stable across
// daemons and releases for the same spec.
std::string WorkloadLabel(const v1::BenchmarkSpec& spec);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_METRICS_H_
