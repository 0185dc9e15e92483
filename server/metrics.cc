#include "server/metrics.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model_config.h"
#include "common/version.h"
#include "prometheus/text_serializer.h"

namespace benchd::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Step times from 1 ms to ~65 s, doubling.
Histogram::BucketBoundaries StepBuckets() {
  Histogram::BucketBoundaries b;
  for (double v = 0.001; v < 70; v *= 2) b.push_back(v);
  return b;
}

Histogram::BucketBoundaries JobBuckets() {
  return {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
}

prometheus::Labels BenchLabels(const v1::BenchmarkSpec& spec) {
  return {{"model", ModelLabel(spec.model())},
          {"mode", ModeName(spec.mode())},
          {"precision", PrecisionName(spec.precision())}};
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
                       .Help("Wall time of finished jobs from start to end, by kind.")
                       .Register(r);
  queue_depth_ =
      &BuildGauge().Name("benchd_queue_depth").Help("Jobs waiting for their device.").Register(r);
  jobs_running_ = &BuildGauge()
                       .Name("benchd_jobs_running")
                       .Help("Jobs running now (0 or 1 per device).")
                       .Register(r);
  step_duration_ =
      &BuildHistogram()
           .Name("benchd_benchmark_step_duration_seconds")
           .Help("Measured benchmark step times (device time), by model, mode and precision.")
           .Register(r);
  last_step_ =
      &BuildGauge()
           .Name("benchd_benchmark_last_step_seconds")
           .Help("Median step time of the last benchmark of each model, mode and precision.")
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
  worker_up_ = &BuildGauge()
                    .Name("benchd_worker_up")
                    .Help("1 when the device's worker process answers, else 0.")
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
  build_info_->Add({{"version", kVersion}}).Set(1);
  collective_busbw_ =
      &BuildGauge()
           .Name("benchd_collective_bus_bandwidth_bytes_per_second")
           .Help(
               "Bus bandwidth (nccl-tests definition) of the last collective cell of "
               "each op, backend, world size and message size, set live as it completes.")
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
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& address,
                                                         const std::vector<std::string>& devices) {
  std::unique_ptr<Metrics> m(new Metrics());
  for (const auto& d : devices) {
    m->queue_depth_->Add({{"device", d}}).Set(0);
    m->jobs_running_->Add({{"device", d}}).Set(0);
    m->worker_up_->Add({{"device", d}}).Set(0);
    m->worker_restarts_->Add({{"device", d}});
    m->resident_models_->Add({{"device", d}}).Set(0);
    m->resident_model_bytes_->Add({{"device", d}}).Set(0);
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
  if (seconds >= 0) job_duration_->Add({{"kind", kind}}, JobBuckets()).Observe(seconds);
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
  const auto labels = BenchLabels(r.spec());
  last_step_->Add(labels).Set(r.step().median());
  last_tokens_->Add(labels).Set(r.tokens_per_second());
  last_flops_->Add(labels).Set(r.tflops_per_second() * 1e12);
  last_peak_memory_->Add(labels).Set(static_cast<double>(r.peak_memory_bytes()));
}

void Metrics::SetWorkerUp(const std::string& device, bool up) {
  worker_up_->Add({{"device", device}}).Set(up ? 1 : 0);
}

void Metrics::WorkerRestarted(const std::string& device) {
  worker_restarts_->Add({{"device", device}}).Increment();
}

void Metrics::SetResidentModels(const std::string& device, int64_t count, int64_t bytes) {
  resident_models_->Add({{"device", device}}).Set(static_cast<double>(count));
  resident_model_bytes_->Add({{"device", device}}).Set(static_cast<double>(bytes));
}

void Metrics::SetCollectiveBusBandwidth(const std::string& op, const std::string& backend,
                                        int world_size, int64_t size_bytes,
                                        double bytes_per_second) {
  collective_busbw_
      ->Add({{"op", op},
             {"backend", backend},
             {"world_size", absl::StrCat(world_size)},
             {"size_bytes", absl::StrCat(size_bytes)}})
      .Set(bytes_per_second);
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
