#include "common/ddp_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"

namespace benchd {
namespace {

using ::testing::HasSubstr;

v1::DdpSpec OnCpus(int world) {
  v1::DdpSpec d;
  for (int r = 0; r < world; ++r) d.mutable_target()->add_devices("cpu:" + std::to_string(r));
  d.mutable_step()->mutable_model()->set_preset("tiny");
  return d;
}

std::string Error(const v1::DdpSpec& d) {
  auto r = ResolveDdp(d);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(ResolveDdpTest, DefaultsAreWrittenOut) {
  auto r = ResolveDdp(OnCpus(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->target().backend(), v1::COLLECTIVE_BACKEND_GLOO);
  EXPECT_EQ(r->step().mode(), v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(r->step().precision(), v1::PRECISION_FP32);
  EXPECT_EQ(r->global_batch_size(), 8);
  EXPECT_EQ(r->step().batch_size(), 4);  // per rank
  EXPECT_EQ(r->step().context_length(), 128);
  EXPECT_THAT(r->variants(),
              ::testing::ElementsAre(v1::DDP_VARIANT_NAIVE, v1::DDP_VARIANT_FLAT,
                                     v1::DDP_VARIANT_OVERLAP, v1::DDP_VARIANT_BUCKETED));
  EXPECT_THAT(r->bucket_mb(), ::testing::ElementsAre(1, 10, 100, 1000));
  EXPECT_THAT(r->optimizers(), ::testing::ElementsAre(v1::DDP_OPTIMIZER_ADAMW));
  EXPECT_EQ(r->timeout_seconds(), 300);
  // Resolving again changes nothing (the worker resolves what the daemon stored).
  auto again = ResolveDdp(*r);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), r->SerializeAsString());
}

TEST(ResolveDdpTest, PerRankOrGlobalBatch) {
  v1::DdpSpec d = OnCpus(4);
  d.mutable_step()->set_batch_size(3);
  auto r = ResolveDdp(d);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_batch_size(), 12);
  EXPECT_EQ(r->step().batch_size(), 3);

  d = OnCpus(4);
  d.set_global_batch_size(6);
  EXPECT_EQ(Error(d),
            "ddp.global_batch_size: 6 does not split evenly over 4 ranks; expected a multiple of "
            "4 (or give ddp.step.batch_size, the batch of each rank)");
  d.mutable_step()->set_batch_size(2);
  d.set_global_batch_size(16);
  EXPECT_EQ(Error(d), "ddp.step.batch_size: 2 per rank x 4 ranks is not ddp.global_batch_size 16");
}

TEST(ResolveDdpTest, AGroupLeavesTheBatchToTheDaemon) {
  v1::DdpSpec d;
  d.mutable_target()->set_group("g1");
  d.mutable_step()->mutable_model()->set_preset("tiny");
  d.set_global_batch_size(6);
  auto r = ResolveDdp(d);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->step().has_batch_size());
  EXPECT_EQ(ResolveDdpBatch(4, &*r).message(),
            "ddp.global_batch_size: 6 does not split evenly over 4 ranks; expected a multiple of "
            "4 (or give ddp.step.batch_size, the batch of each rank)");
  ASSERT_TRUE(ResolveDdpBatch(3, &*r).ok());
  EXPECT_EQ(r->step().batch_size(), 2);
}

TEST(ResolveDdpTest, BadTargetsAreNamed) {
  v1::DdpSpec d = OnCpus(1);
  EXPECT_EQ(Error(d),
            "ddp.target.devices: 1 device (cpu:0); data-parallel training needs 2 or more ranks (a "
            "benchmark runs one device)");
  d = OnCpus(2);
  d.mutable_target()->set_devices(1, "cuda:0");
  EXPECT_THAT(Error(d), HasSubstr("ddp.target.devices: [cpu:0, cuda:0] mixes cpu and cuda"));
  d = OnCpus(2);
  d.mutable_target()->set_backend(v1::COLLECTIVE_BACKEND_NCCL);
  EXPECT_THAT(Error(d), HasSubstr("ddp.target.backend: nccl needs CUDA devices"));
  d = OnCpus(2);
  d.mutable_target()->set_group("g1");
  EXPECT_THAT(Error(d), HasSubstr("ddp.target: a group id or devices with a backend, not both"));
  d = OnCpus(0);
  EXPECT_THAT(Error(d), HasSubstr("ddp.target: nothing to train on"));
}

TEST(ResolveDdpTest, BadListsAreNamed) {
  v1::DdpSpec d = OnCpus(2);
  d.add_bucket_mb(0);
  EXPECT_EQ(Error(d), "ddp.bucket_mb[0]: expected 0 < MB <= 1000000, got 0");
  d.set_bucket_mb(0, -5);
  EXPECT_EQ(Error(d), "ddp.bucket_mb[0]: expected 0 < MB <= 1000000, got -5");
  d.set_bucket_mb(0, 25);
  d.add_bucket_mb(25);
  EXPECT_EQ(Error(d), "ddp.bucket_mb[1]: 25 MB is listed twice");

  d = OnCpus(2);
  d.add_variants(v1::DDP_VARIANT_FLAT);
  d.add_bucket_mb(25);
  EXPECT_EQ(Error(d),
            "ddp.bucket_mb: bucket sizes are for the bucketed and reducer variants, which "
            "ddp.variants leaves out");
  d.clear_bucket_mb();
  d.add_variants(static_cast<v1::DdpVariant>(9));
  EXPECT_EQ(Error(d),
            "ddp.variants[1]: unknown value 9; expected naive, flat, overlap, bucketed or reducer");
  d.set_variants(1, v1::DDP_VARIANT_FLAT);
  EXPECT_EQ(Error(d),
            "ddp.variants[1]: flat is listed twice; each variant runs once (bucket sizes in "
            "ddp.bucket_mb)");

  d = OnCpus(2);
  d.add_optimizers(v1::DDP_OPTIMIZER_UNSPECIFIED);
  EXPECT_EQ(
      Error(d),
      "ddp.optimizers[0]: unknown value 0; expected adamw, sharded_adamw or adamw_overlapped");
  d = OnCpus(2);
  d.set_timeout_seconds(-1);
  EXPECT_EQ(Error(d), "ddp.timeout_seconds: expected 0 (= 300) or 1..86400, got -1");
}

TEST(ResolveDdpTest, StepOptionsItDoesNotRunAreRefused) {
  v1::DdpSpec d = OnCpus(2);
  d.mutable_step()->set_mode(v1::BENCHMARK_MODE_FORWARD);
  EXPECT_EQ(Error(d),
            "ddp.step.mode: data-parallel training runs train_step, got forward; leave it unset");
  d = OnCpus(2);
  d.mutable_step()->set_attention(v1::ATTENTION_IMPL_SDPA);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.attention: attention sdpa changes the model's ops"));
  d = OnCpus(2);
  d.mutable_step()->set_fused_ops(true);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.fused_ops: fused_ops changes the model's ops"));
  d = OnCpus(2);
  d.mutable_step()->set_cuda_graph(true);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.cuda_graph: not supported"));
  d = OnCpus(2);
  d.mutable_step()->set_warmup_auto(true);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.warmup_auto: not supported"));
  d = OnCpus(2);
  d.mutable_step()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  d.mutable_step()->set_optimizer_overlap(true);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.optimizer_overlap: not supported"));
  // The optimizer's path is the step's to choose, sharded or not.
  d = OnCpus(2);
  d.mutable_step()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  auto fused = ResolveDdp(d);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(fused->step().optimizer_impl(), v1::OPTIMIZER_IMPL_FUSED);
  // The benchmark's own checks, renamed.
  d = OnCpus(2);
  d.mutable_step()->set_context_length(0);
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.context_length: expected 1.."));
  d = OnCpus(2);
  d.mutable_step()->mutable_model()->set_preset("huge");
  EXPECT_THAT(Error(d), HasSubstr("ddp.step.model.preset"));
}

// c10d's Reducer needs the autograd engine's hooks: refused without
// step.autograd, and one of the defaults with it.
TEST(ResolveDdpTest, TheReducerRunsWithAutogradOnly) {
  v1::DdpSpec d = OnCpus(2);
  d.add_variants(v1::DDP_VARIANT_OVERLAP);
  d.add_variants(v1::DDP_VARIANT_REDUCER);
  EXPECT_EQ(Error(d),
            "ddp.variants[1]: reducer (c10d's Reducer, PyTorch DDP's engine) learns that a "
            "gradient is final from the autograd engine's hooks; set ddp.step.autograd (benchctl "
            "--autograd) to run it");
  d.mutable_step()->set_autograd(true);
  d.add_bucket_mb(25);
  auto r = ResolveDdp(d);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->step().autograd());
  std::vector<std::string> labels;
  for (const DdpRunSpec& run : DdpRuns(*r)) {
    labels.push_back(DdpRunLabel(run));
  }
  EXPECT_THAT(labels, ::testing::ElementsAre("overlap", "reducer 25 MB"));

  v1::DdpSpec defaults = OnCpus(2);
  defaults.mutable_step()->set_autograd(true);
  r = ResolveDdp(defaults);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(
      r->variants(),
      ::testing::ElementsAre(v1::DDP_VARIANT_NAIVE, v1::DDP_VARIANT_FLAT, v1::DDP_VARIANT_OVERLAP,
                             v1::DDP_VARIANT_BUCKETED, v1::DDP_VARIANT_REDUCER));
  // An overlapped optimizer steps after the reducer's backward has ended.
  defaults.add_optimizers(v1::DDP_OPTIMIZER_ADAMW_OVERLAPPED);
  EXPECT_THAT(Error(defaults),
              HasSubstr("ddp.optimizers: adamw_overlapped steps each parameter as its all-reduce "
                        "ends, and the reducer variant ends its buckets inside the backward"));
  EXPECT_EQ(DdpRunLabel({v1::DDP_VARIANT_OVERLAP, 0, v1::DDP_OPTIMIZER_ADAMW_OVERLAPPED}),
            "overlap + adamw_overlapped");
  EXPECT_TRUE(DdpVariantTakesBuckets(v1::DDP_VARIANT_REDUCER));
  EXPECT_FALSE(DdpVariantTakesBuckets(v1::DDP_VARIANT_OVERLAP));
}

TEST(ResolveDdpTest, JobSpecRoutesAndRefusesDeviceAndSweep) {
  v1::JobSpec spec;
  *spec.mutable_ddp() = OnCpus(2);
  EXPECT_EQ(JobKindOf(spec), v1::JOB_KIND_DDP);
  EXPECT_EQ(JobKindName(spec), "ddp");
  ASSERT_TRUE(ResolveJobSpec(spec).ok());
  spec.set_device("cpu:0");
  EXPECT_THAT(std::string(ResolveJobSpec(spec).status().message()),
              HasSubstr("spec.device: 'cpu:0' is not used by a data-parallel request"));
  spec.clear_device();
  auto* axis = spec.mutable_sweep()->add_axes();
  axis->set_field("step.precision");
  axis->add_values("bf16");
  EXPECT_THAT(std::string(ResolveJobSpec(spec).status().message()),
              HasSubstr("sweep: a data-parallel request runs its own lists"));
}

TEST(DdpRunsTest, VariantsThenBucketSizesThenOptimizers) {
  v1::DdpSpec d = OnCpus(2);
  d.add_variants(v1::DDP_VARIANT_FLAT);
  d.add_variants(v1::DDP_VARIANT_BUCKETED);
  d.add_bucket_mb(1);
  d.add_bucket_mb(25);
  d.add_optimizers(v1::DDP_OPTIMIZER_ADAMW);
  d.add_optimizers(v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  auto r = ResolveDdp(d);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> labels;
  for (const DdpRunSpec& run : DdpRuns(*r)) labels.push_back(DdpRunLabel(run));
  EXPECT_THAT(labels, ::testing::ElementsAre("flat", "flat + sharded_adamw", "bucketed 1 MB",
                                             "bucketed 1 MB + sharded_adamw", "bucketed 25 MB",
                                             "bucketed 25 MB + sharded_adamw"));
  EXPECT_EQ(DdpRunLabel(DdpRunSpec{}), "compute only");
}

TEST(DdpRunsTest, GradientCompressionsRunInnermostNoneFirst) {
  v1::DdpSpec d = OnCpus(2);
  d.add_variants(v1::DDP_VARIANT_OVERLAP);
  d.add_optimizers(v1::DDP_OPTIMIZER_ADAMW);
  d.add_optimizers(v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  d.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_BF16);
  d.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_NONE);
  auto r = ResolveDdp(d);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> labels;
  for (const DdpRunSpec& run : DdpRuns(*r)) labels.push_back(DdpRunLabel(run));
  EXPECT_THAT(labels, ::testing::ElementsAre("overlap", "overlap + bf16 gradients",
                                             "overlap + sharded_adamw",
                                             "overlap + sharded_adamw + bf16 gradients"));
  // The default is none, written out; a spec resolved before the field
  // existed runs as none too.
  v1::DdpSpec plain = OnCpus(2);
  plain.add_variants(v1::DDP_VARIANT_FLAT);
  auto p = ResolveDdp(plain);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->gradient_compressions(),
              ::testing::ElementsAre(v1::DDP_GRADIENT_COMPRESSION_NONE));
  p->clear_gradient_compressions();
  ASSERT_EQ(DdpRuns(*p).size(), 1u);
  EXPECT_EQ(DdpRuns(*p)[0].compression, v1::DDP_GRADIENT_COMPRESSION_NONE);
}

TEST(DdpSpecTest, RefusesBadGradientCompressions) {
  v1::DdpSpec twice = OnCpus(2);
  twice.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_BF16);
  twice.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_BF16);
  EXPECT_EQ(ResolveDdp(twice).status().message(),
            "ddp.gradient_compressions[1]: bf16 is listed twice");
  v1::DdpSpec unknown = OnCpus(2);
  unknown.add_gradient_compressions(static_cast<v1::DdpGradientCompression>(7));
  EXPECT_EQ(ResolveDdp(unknown).status().message(),
            "ddp.gradient_compressions[0]: unknown value 7; expected none or bf16");
  v1::DdpSpec reducer = OnCpus(2);
  reducer.mutable_step()->set_autograd(true);
  reducer.add_variants(v1::DDP_VARIANT_REDUCER);
  reducer.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_BF16);
  EXPECT_THAT(std::string(ResolveDdp(reducer).status().message()),
              HasSubstr("ddp.gradient_compressions: bf16 compresses benchd's own variants"));
}

TEST(DdpNamesTest, ParseShortAndFullNamesAndListTheChoices) {
  EXPECT_EQ(*ParseDdpVariant("overlap"), v1::DDP_VARIANT_OVERLAP);
  EXPECT_EQ(*ParseDdpVariant("DDP_VARIANT_NAIVE"), v1::DDP_VARIANT_NAIVE);
  EXPECT_EQ(ParseDdpVariant("unspecified").status().message(),
            "unknown variant 'unspecified'; expected naive, flat, overlap, bucketed or reducer");
  EXPECT_EQ(*ParseDdpOptimizer("Sharded_AdamW"), v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  EXPECT_EQ(ParseDdpOptimizer("zero").status().message(),
            "unknown optimizer 'zero'; expected adamw, sharded_adamw or adamw_overlapped");
  EXPECT_EQ(*ParseDdpGradientCompression("BF16"), v1::DDP_GRADIENT_COMPRESSION_BF16);
  EXPECT_EQ(ParseDdpGradientCompression("fp16").status().message(),
            "unknown gradient compression 'fp16'; expected none or bf16");
  // Every value of each enum has a name that parses back.
  for (int i = 0; i < v1::DdpVariant_descriptor()->value_count(); ++i) {
    const auto v = static_cast<v1::DdpVariant>(v1::DdpVariant_descriptor()->value(i)->number());
    if (v == v1::DDP_VARIANT_UNSPECIFIED) continue;
    EXPECT_EQ(*ParseDdpVariant(DdpVariantName(v)), v);
  }
}

}  // namespace
}  // namespace benchd
