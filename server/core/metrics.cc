#include "server/core/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/version.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/text_serializer.h"

namespace benchd::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Powers of two from 2^lo to 2^hi seconds: exact in binary, so a bucket's
// bound prints the same everywhere.
Histogram::BucketBoundaries PowersOfTwo(int lo, int hi) {
  Histogram::BucketBoundaries b;
  for (int e = lo; e <= hi; ++e) b.push_back(std::ldexp(1.0, e));
  return b;
}

// Step times from ~122 us (a tiny model's forward on a GPU) to 64 s (a large
// train step on a CPU).
Histogram::BucketBoundaries StepBuckets() { return PowersOfTwo(-13, 6); }

// Collective iterations from ~0.95 us (a small NCCL all-reduce) to 64 s.
Histogram::BucketBoundaries CollectiveBuckets() { return PowersOfTwo(-20, 6); }

// Jobs run from under a second to their 86400 s limit.
Histogram::BucketBoundaries JobBuckets() {
  return {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400};
}

// The workload's hash and its readable parts; the hash alone tells workloads
// apart (custom models all read "custom").
prometheus::Labels BenchLabels(const v1::BenchmarkSpec& spec) {
  return {{"model", ModelLabel(spec.model())},
          {"mode", ModeName(spec.mode())},
          {"precision", PrecisionName(spec.precision())},
          {"batch_size", absl::StrCat(spec.batch_size())},
          {"context_length", absl::StrCat(spec.context_length())},
          {"workload", WorkloadLabel(spec)}};
}

// FNV-1a, 64 bits: fixed by its definition, so a label computed by another
// daemon or release of the same spec is the same.
uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string ProtobufVersion() {
  const int v = GOOGLE_PROTOBUF_VERSION;
  return absl::StrCat(v / 1000000, ".", v / 1000 % 1000, ".", v % 1000);
}

}  // namespace

std::string ModelLabel(const v1::ModelConfig& model) {
  for (const auto& p : Presets()) {
    if (p.name == model.preset() && p.vocab_size == model.vocab_size() &&
        p.d_model == model.d_model() && p.d_ff == model.d_ff() &&
        p.num_layers == model.num_layers() && p.num_heads == model.num_heads()) {
      return p.name;
    }
  }
  return "custom";
}

std::string WorkloadLabel(const v1::BenchmarkSpec& spec) {
  v1::BenchmarkSpec w = spec;
  w.mutable_model()->clear_preset();
  w.clear_warmup_steps();
  w.clear_measure_steps();
  w.clear_warmup_auto();
  w.clear_warmup_max_steps();
  w.clear_seed();
  w.clear_export_parity();
  // The worker runs these through autograd whatever was asked (bench.proto,
  // BenchmarkSpec.autograd): the request and the result's echo are one workload.
  const bool own_ops = w.attention() != v1::ATTENTION_IMPL_UNSPECIFIED &&
                       w.attention() != v1::ATTENTION_IMPL_FAITHFUL;
  if (own_ops || w.weight_copies() || w.fused_ops() || w.cuda_graph()) w.set_autograd(true);
  // The defaults spelled out or left unset are one workload.
  if (w.attention() == v1::ATTENTION_IMPL_FAITHFUL) w.clear_attention();
  if (w.optimizer_impl() == v1::OPTIMIZER_IMPL_FAITHFUL) w.clear_optimizer_impl();
  if (w.mode() == v1::BENCHMARK_MODE_FORWARD) w.clear_mode();
  if (w.precision() == v1::PRECISION_FP32) w.clear_precision();
  // Fields in field-number order, no maps: the bytes are deterministic.
  return absl::StrFormat("%016x", Fnv1a64(w.SerializeAsString()));
}

int64_t SizeClass(int64_t bytes) {
  int64_t c = 1;
  while (c <= bytes / 2) c *= 2;
  return c;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  jobs_submitted_ = &BuildCounter()
                         .Name("benchd_jobs_submitted_total")
                         .Help("Jobs accepted by Submit, by request kind.")
                         .Register(r);
  jobs_finished_ = &BuildCounter()
                        .Name("benchd_jobs_finished_total")
                        .Help("Jobs that reached a final state, by kind and outcome.")
                        .Register(r);
  job_duration_ = &BuildHistogram()
                       .Name("benchd_job_duration_seconds")
                       .Help("Wall time of finished jobs from start to end, by kind and outcome.")
                       .Register(r);
  queue_depth_ =
      &BuildGauge().Name("benchd_queue_depth").Help("Jobs waiting for their device.").Register(r);
  jobs_running_ = &BuildGauge()
                       .Name("benchd_jobs_running")
                       .Help("Jobs running now (0 or 1 per device).")
                       .Register(r);
  step_duration_ = &BuildHistogram()
                        .Name("benchd_benchmark_step_duration_seconds")
                        .Help("Measured benchmark step times (device time), by workload.")
                        .Register(r);
  last_step_ = &BuildGauge()
                    .Name("benchd_benchmark_last_step_seconds")
                    .Help("Median step time of the last benchmark of each workload and device.")
                    .Register(r);
  last_tokens_ =
      &BuildGauge()
           .Name("benchd_benchmark_last_tokens_per_second")
           .Help("Tokens per second of the last benchmark (batch x context / median step).")
           .Register(r);
  last_flops_ = &BuildGauge()
                     .Name("benchd_benchmark_last_flops_per_second")
                     .Help("Achieved model FLOP/s of the last benchmark (1e12 = 1 TFLOP/s).")
                     .Register(r);
  last_peak_memory_ = &BuildGauge()
                           .Name("benchd_benchmark_last_peak_memory_bytes")
                           .Help("Peak memory over the measured steps of the last benchmark.")
                           .Register(r);
  last_roofline_ =
      &BuildGauge()
           .Name("benchd_benchmark_last_roofline_fraction")
           .Help(
               "Roofline floor / median step of the last benchmark (1 = at the floor); absent "
               "when the device's peaks could not be measured.")
           .Register(r);
  job_peak_memory_ = &BuildGauge()
                          .Name("benchd_job_last_peak_memory_bytes")
                          .Help(
                              "Peak memory of the last finished job of each kind and device "
                              "(benchmark and profile: its measured steps; memory: its largest "
                              "cell's allocated peak).")
                          .Register(r);
  worker_info_ = &BuildGauge()
                      .Name("benchd_worker_info")
                      .Help(
                          "Always 1; the labels say what the device's worker runs on (UUID and "
                          "pci_bus_id as dcgm-exporter's).")
                      .Register(r);
  memory_total_ = &BuildGauge()
                       .Name("benchd_device_memory_total_bytes")
                       .Help("The device's memory, as its worker reported it.")
                       .Register(r);
  memory_used_ = &BuildGauge()
                      .Name("benchd_device_memory_used_bytes")
                      .Help(
                          "Device memory in use by any process (total - free), refreshed while "
                          "the worker is idle.")
                      .Register(r);
  worker_up_ = &BuildGauge()
                    .Name("benchd_worker_up")
                    .Help("1 when the device's worker process answers, else 0.")
                    .Register(r);
  worker_parked_ = &BuildGauge()
                        .Name("benchd_worker_parked")
                        .Help(
                            "1 while the device's worker is parked: stopped on purpose after "
                            "--worker-idle-exit of idleness (benchd_worker_up is then 0); the "
                            "next job starts it.")
                        .Register(r);
  worker_restarts_ = &BuildCounter()
                          .Name("benchd_worker_restarts_total")
                          .Help("Times a device's worker ended and was started again.")
                          .Register(r);
  resident_models_ = &BuildGauge()
                          .Name("benchd_resident_models")
                          .Help("Models kept resident in the device's worker.")
                          .Register(r);
  resident_model_bytes_ = &BuildGauge()
                               .Name("benchd_resident_model_bytes")
                               .Help("Bytes of parameters and optimizer state of resident models.")
                               .Register(r);
  build_info_ = &BuildGauge()
                     .Name("benchd_build_info")
                     .Help("Always 1; the labels say which benchd runs.")
                     .Register(r);
  build_info_
      ->Add({{"version", kVersion},
             {"grpc_version", grpc::Version()},
             {"protobuf_version", ProtobufVersion()}})
      .Set(1);
  collective_busbw_ =
      &BuildGauge()
           .Name("benchd_collective_bus_bandwidth_bytes_per_second")
           .Help(
               "Bus bandwidth (nccl-tests definition) of the last collective cell of "
               "each op, backend, world size and size class (power of two), set live as it "
               "completes.")
           .Register(r);
  collective_duration_ = &BuildHistogram()
                              .Name("benchd_collective_duration_seconds")
                              .Help(
                                  "Collective iteration times (the slowest rank's), by op, "
                                  "backend and world size.")
                              .Register(r);
  groups_ = &BuildGauge()
                 .Name("benchd_process_groups")
                 .Help("Resident process groups by backend and state.")
                 .Register(r);
  store_bad_rows_ =
      &BuildCounter()
           .Name("benchd_store_bad_rows_total")
           .Help("Stored job records found damaged (listed with an error, never run), once each.")
           .Register(r);
  store_bad_rows_->Add({});
  unstored_results_ =
      &BuildGauge()
           .Name("benchd_unstored_results")
           .Help("Finished jobs whose final record waits to be stored (e.g. a full data disk).")
           .Register(r);
  unstored_results_->Add({}).Set(0);
  // Every kind and outcome from the start: a fleet with no failure shows 0
  // failed jobs (and increase() has a series to work on), not "No data".
  for (const auto& kind : JobKindNames()) {
    jobs_submitted_->Add({{"kind", kind}});
    for (const char* outcome : {"succeeded", "failed", "cancelled", "interrupted"}) {
      jobs_finished_->Add({{"kind", kind}, {"outcome", outcome}});
    }
  }
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& address,
                                                         const std::vector<std::string>& devices) {
  std::unique_ptr<Metrics> m(new Metrics());
  for (const auto& d : devices) {
    m->queue_depth_->Add({{"device", d}}).Set(0);
    m->jobs_running_->Add({{"device", d}}).Set(0);
    m->worker_up_->Add({{"device", d}}).Set(0);
    m->worker_parked_->Add({{"device", d}}).Set(0);
    m->worker_restarts_->Add({{"device", d}});
    m->resident_models_->Add({{"device", d}}).Set(0);
    m->resident_model_bytes_->Add({{"device", d}}).Set(0);
    m->memory_total_->Add({{"device", d}}).Set(0);
    m->memory_used_->Add({{"device", d}}).Set(0);
  }
  if (!address.empty()) {
    try {
      m->exposer_ = std::make_unique<prometheus::Exposer>(address);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve /metrics on ", address, ": ", e.what()));
    }
    m->exposer_->RegisterCollectable(m->registry_);
    const auto ports = m->exposer_->GetListeningPorts();
    const std::string host = address.substr(0, address.rfind(':'));
    m->bound_address_ = ports.empty() ? address : absl::StrCat(host, ":", ports.front());
  }
  return m;
}

void Metrics::JobSubmitted(const std::string& kind) {
  jobs_submitted_->Add({{"kind", kind}}).Increment();
}

void Metrics::JobFinished(const std::string& kind, const std::string& outcome, double seconds) {
  jobs_finished_->Add({{"kind", kind}, {"outcome", outcome}}).Increment();
  if (seconds >= 0) {
    job_duration_->Add({{"kind", kind}, {"outcome", outcome}}, JobBuckets()).Observe(seconds);
  }
}

void Metrics::SetLastPeakMemory(const std::string& kind, const v1::JobResult& result) {
  std::string device;
  int64_t peak = 0;
  if (result.has_benchmark()) {
    device = result.benchmark().device();
    peak = result.benchmark().peak_memory_bytes();
  } else if (result.has_profile()) {
    device = result.profile().unprofiled().device();
    peak = result.profile().unprofiled().peak_memory_bytes();
  } else if (result.has_memory()) {
    device = result.memory().device();
    for (const auto& run : result.memory().runs())
      peak = std::max(peak, run.peak_allocated_bytes());
  } else if (result.has_attention() && result.attention().memory_source() ==
                                           "cuda_caching_allocator") {  // a CPU measures none
    device = result.attention().device();
    peak = result.attention().peak_pass_bytes();
  }
  if (device.empty()) return;
  job_peak_memory_->Add({{"kind", kind}, {"device", device}}).Set(static_cast<double>(peak));
}

void Metrics::SetQueueDepth(const std::string& device, size_t depth) {
  queue_depth_->Add({{"device", device}}).Set(static_cast<double>(depth));
}

void Metrics::SetRunning(const std::string& device, bool running) {
  jobs_running_->Add({{"device", device}}).Set(running ? 1 : 0);
}

void Metrics::ObserveStep(const v1::BenchmarkSpec& spec, double seconds) {
  step_duration_->Add(BenchLabels(spec), StepBuckets()).Observe(seconds);
}

void Metrics::SetLastBenchmark(const v1::BenchmarkResult& r) {
  auto labels = BenchLabels(r.spec());
  labels["device"] = r.device();
  last_step_->Add(labels).Set(r.step().median());
  last_tokens_->Add(labels).Set(r.tokens_per_second());
  last_flops_->Add(labels).Set(r.tflops_per_second() * 1e12);
  last_peak_memory_->Add(labels).Set(static_cast<double>(r.peak_memory_bytes()));
  if (r.roofline().unavailable().empty() && r.roofline().fraction_of_floor() > 0) {
    last_roofline_->Add(labels).Set(r.roofline().fraction_of_floor());
  } else if (last_roofline_->Has(labels)) {
    // An old figure would pass for this run's.
    last_roofline_->Remove(&last_roofline_->Add(labels));
  }
}

void Metrics::SetWorkerUp(const std::string& device, bool up) {
  worker_up_->Add({{"device", device}}).Set(up ? 1 : 0);
}

void Metrics::SetWorkerParked(const std::string& device, bool parked) {
  worker_parked_->Add({{"device", device}}).Set(parked ? 1 : 0);
}

void Metrics::WorkerRestarted(const std::string& device) {
  worker_restarts_->Add({{"device", device}}).Increment();
}

void Metrics::SetWorkerInfo(const std::string& device, const internal::WorkerInfo& info) {
  // UUID and pci_bus_id are spelled as dcgm-exporter's labels, so that
  // `on (UUID)` joins the two; "" (no label) on a CPU.
  const prometheus::Labels labels = {{"device", device},
                                     {"device_name", info.device().description()},
                                     {"UUID", info.uuid()},
                                     {"pci_bus_id", info.pci_bus_id()},
                                     {"torch_version", info.versions().torch()},
                                     {"cuda_runtime_version", info.versions().cuda_runtime()},
                                     {"nccl_version", info.versions().nccl()}};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = worker_info_by_device_.find(device);
  if (it != worker_info_by_device_.end() && it->second != labels && worker_info_->Has(it->second)) {
    worker_info_->Remove(&worker_info_->Add(it->second));
  }
  worker_info_by_device_[device] = labels;
  worker_info_->Add(labels).Set(1);
}

void Metrics::SetDeviceMemory(const std::string& device, int64_t total_bytes, int64_t free_bytes) {
  memory_total_->Add({{"device", device}}).Set(static_cast<double>(total_bytes));
  memory_used_->Add({{"device", device}})
      .Set(static_cast<double>(std::max<int64_t>(0, total_bytes - free_bytes)));
}

void Metrics::SetResidentModels(const std::string& device, int64_t count, int64_t bytes) {
  resident_models_->Add({{"device", device}}).Set(static_cast<double>(count));
  resident_model_bytes_->Add({{"device", device}}).Set(static_cast<double>(bytes));
}

void Metrics::ObserveCollective(const std::string& op, const std::string& backend, int world_size,
                                int64_t size_bytes, double bus_bytes_per_second,
                                const std::vector<double>& iteration_seconds) {
  const std::string world = absl::StrCat(world_size);
  collective_busbw_
      ->Add({{"op", op},
             {"backend", backend},
             {"world_size", world},
             {"size_bytes", absl::StrCat(SizeClass(size_bytes))}})
      .Set(bus_bytes_per_second);
  auto& h = collective_duration_->Add({{"op", op}, {"backend", backend}, {"world_size", world}},
                                      CollectiveBuckets());
  for (double s : iteration_seconds) h.Observe(s);
}

void Metrics::SetGroups(const std::string& backend, const std::string& state, int64_t count) {
  groups_->Add({{"backend", backend}, {"state", state}}).Set(static_cast<double>(count));
}

void Metrics::StoreBadRow() { store_bad_rows_->Add({}).Increment(); }

void Metrics::SetUnstoredResults(int64_t count) {
  unstored_results_->Add({}).Set(static_cast<double>(count));
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace benchd::server
