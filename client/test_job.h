// A hand-built succeeded benchmark job for the view and CSV tests.
#ifndef BENCHD_CLIENT_TEST_JOB_H_
#define BENCHD_CLIENT_TEST_JOB_H_

#include "benchd/v1/bench.pb.h"

namespace benchd::client::testing {

inline v1::Stats MakeStats(double median) {
  v1::Stats s;
  s.set_count(2);
  s.set_mean(median);
  s.set_std(0.0005);
  s.set_median(median);
  s.set_min(median - 0.001);
  s.set_max(median + 0.001);
  s.set_p95(median + 0.0009);
  s.set_cv(0.0005 / median);
  return s;
}

// Train step on cuda:0, 1 warm-up + 2 measured steps, step median 12.5 ms.
inline v1::Job MakeSucceededJob() {
  v1::Job job;
  job.set_id("j42");
  job.set_kind(v1::JOB_KIND_BENCHMARK);
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.add_devices("cuda:0");
  job.mutable_created()->set_seconds(1795000000);  // 2026-11-18 11:06:40 UTC
  job.mutable_started()->set_seconds(1795000001);
  job.mutable_finished()->set_seconds(1795000003);
  job.mutable_finished()->set_nanos(500000000);
  v1::BenchmarkSpec* spec = job.mutable_spec()->mutable_benchmark();
  job.mutable_spec()->set_device("cuda:0");
  spec->mutable_model()->set_preset("small");
  spec->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  spec->set_precision(v1::PRECISION_BF16);
  spec->set_batch_size(4);
  spec->set_context_length(128);
  spec->set_warmup_steps(1);
  spec->set_measure_steps(2);

  v1::BenchmarkResult* r = job.mutable_result()->mutable_benchmark();
  v1::BenchmarkSpec* rs = r->mutable_spec();
  v1::ModelConfig* m = rs->mutable_model();
  m->set_preset("small");
  m->set_vocab_size(10000);
  m->set_d_model(768);
  m->set_d_ff(3072);
  m->set_num_layers(12);
  m->set_num_heads(12);
  m->set_rope_theta(10000);
  rs->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  rs->set_precision(v1::PRECISION_BF16);
  rs->set_batch_size(4);
  rs->set_context_length(128);
  rs->set_warmup_steps(1);
  rs->set_measure_steps(2);
  r->set_warmup_steps_run(1);
  r->set_parameter_count(128625408);
  r->set_device("cuda:0");
  r->set_device_name("NVIDIA H100 80GB HBM3");
  r->set_timer("cuda_event");
  const double steps[3][6] = {
      // step, host, fwd, bwd, opt, loss
      {0.0301, 0.0305, 0.010, 0.018, 0.0021, 9.25},
      {0.0125, 0.0127, 0.004, 0.0075, 0.001, 9.2},
      {0.0125, 0.0128, 0.004, 0.0076, 0.0009, 9.125},
  };
  for (int i = 0; i < 3; ++i) {
    v1::StepTiming* t = r->add_steps();
    t->set_index(i);
    t->set_warmup(i == 0);
    t->set_step_seconds(steps[i][0]);
    t->set_host_seconds(steps[i][1]);
    t->set_forward_seconds(steps[i][2]);
    t->set_backward_seconds(steps[i][3]);
    t->set_optimizer_seconds(steps[i][4]);
    t->set_loss(steps[i][5]);
  }
  *r->mutable_step() = MakeStats(0.0125);
  *r->mutable_forward() = MakeStats(0.004);
  *r->mutable_backward() = MakeStats(0.00755);
  *r->mutable_optimizer() = MakeStats(0.00095);
  *r->mutable_host_step() = MakeStats(0.01275);
  r->set_tokens_per_second(40960);
  r->set_flops_per_step(1.234e12);
  r->set_tflops_per_second(98.72);
  v1::Roofline* roof = r->mutable_roofline();
  roof->set_floor_seconds(0.0042);
  roof->set_matmul_seconds(0.0031);
  roof->set_optimizer_seconds(0.0011);
  roof->set_optimizer_bytes(3'601'511'424);
  roof->set_fraction_of_floor(0.336);
  roof->set_peak_matmul_flops_per_second(712.34e12);
  roof->set_matmul_dtype("bf16");
  roof->set_matmul_size(8192);
  roof->set_bandwidth_bytes_per_second(3250.4e9);
  roof->set_copy_bytes(int64_t{512} << 20);
  roof->set_measured_now(true);
  roof->set_measure_seconds(1.2);
  r->set_peak_memory_bytes(int64_t{5} << 30);
  r->set_peak_memory_source("cuda_caching_allocator");
  r->set_model_build_seconds(1.5);
  r->mutable_versions()->set_benchd("0.1.0");
  r->mutable_versions()->set_torch("2.11.0");
  r->mutable_versions()->set_cuda_runtime("13.0");
  return job;
}

}  // namespace benchd::client::testing

#endif  // BENCHD_CLIENT_TEST_JOB_H_
