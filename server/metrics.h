// benchd's Prometheus metrics (prometheus-cpp), served at /metrics by the
// daemon: the worker loads libtorch_cuda, beside which civetweb cannot start.
// Names follow Prometheus practice: benchd_ prefix, base units, _total
// counters, labels from small fixed sets (custom model configs are "custom").
#ifndef BENCHD_SERVER_METRICS_H_
#define BENCHD_SERVER_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  // outcome: succeeded, failed, cancelled, interrupted.
  void JobFinished(const std::string& kind, const std::string& outcome, double seconds);
  void SetQueueDepth(const std::string& device, size_t depth);
  void SetRunning(const std::string& device, bool running);
  // One measured benchmark step of a resolved spec.
  void ObserveStep(const v1::BenchmarkSpec& spec, double seconds);
  void SetLastBenchmark(const v1::BenchmarkResult& result);
  void SetWorkerUp(const std::string& device, bool up);
  void WorkerRestarted(const std::string& device);
  void SetResidentModels(const std::string& device, int64_t count, int64_t bytes);
  // A collective cell's bus bandwidth (bytes/s), set as the cell completes.
  void SetCollectiveBusBandwidth(const std::string& op, const std::string& backend, int world_size,
                                 int64_t size_bytes, double bytes_per_second);
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
  prometheus::Family<prometheus::Gauge>* worker_up_;
  prometheus::Family<prometheus::Counter>* worker_restarts_;
  prometheus::Family<prometheus::Gauge>* resident_models_;
  prometheus::Family<prometheus::Gauge>* resident_model_bytes_;
  prometheus::Family<prometheus::Gauge>* build_info_;
  prometheus::Family<prometheus::Gauge>* collective_busbw_;
  prometheus::Family<prometheus::Gauge>* groups_;
  prometheus::Family<prometheus::Counter>* store_bad_rows_;
  prometheus::Family<prometheus::Gauge>* unstored_results_;
};

// The label value for a model: its preset name, or "custom".
std::string ModelLabel(const v1::ModelConfig& model);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_METRICS_H_
