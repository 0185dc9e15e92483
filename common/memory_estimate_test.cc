#include "common/memory_estimate.h"

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

using ::testing::HasSubstr;

v1::EstimateRequest Request(const std::string& preset, int64_t batch, int64_t context,
                            v1::Precision precision, v1::BenchmarkMode mode) {
  v1::EstimateRequest r;
  r.mutable_model()->set_preset(preset);
  r.set_batch_size(batch);
  r.set_context_length(context);
  r.set_precision(precision);
  r.set_mode(mode);
  return r;
}

v1::MemoryEstimate Must(const v1::EstimateRequest& r) {
  auto e = Estimate(r);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : v1::MemoryEstimate();
}

const v1::EstimateTerm* Find(const google::protobuf::RepeatedPtrField<v1::EstimateTerm>& terms,
                             const std::string& name) {
  for (const auto& t : terms) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

int64_t PhasePeak(const v1::MemoryEstimate& e, const std::string& name) {
  for (const auto& p : e.phases()) {
    if (p.name() == name) return p.peak_bytes();
  }
  ADD_FAILURE() << "no phase " << name;
  return -1;
}

std::string Message(const v1::EstimateRequest& r) {
  auto e = Estimate(r);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(e.status().message());
}

// CS336 memory_profiling (d): the 2.7B model at the reference batch 4 and
// context 256, one residual-stream tensor in single precision:
// 4 x 256 x 2560 x 4 B = 10,485,760 B = 10.0 MiB.
TEST(MemoryEstimateTest, ResidualStreamOf27BIsTenMiB) {
  for (v1::Precision p : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    const auto e = Must(Request("2.7B", 4, 256, p, v1::BENCHMARK_MODE_FORWARD));
    EXPECT_EQ(e.residual_stream().bytes(), 10'485'760);
    EXPECT_THAT(e.residual_stream().formula(), HasSubstr("= 4 x 4 x 256 x 2560"));
    // The memory request's yardstick (MemoryRun.activation_bytes) is the same term.
    EXPECT_EQ(ResidualStreamBytes(4, 256, 2560), e.residual_stream().bytes());
  }
}

// One 2.7B layer at batch 4, context 512 (N = 2048 tokens, S = 4·32·512² =
// 33,554,432 scores), fp32: 10 fp32 N×d tensors (40·N·d = 209,715,200),
// SwiGLU's five N×d_ff (20·N·d_ff = 419,430,400), exp and weights per score
// (8·S = 268,435,456), softmax row stats (12·4·32·512 = 786,432), two norms'
// 1/rms (8·N = 16,384): 898,383,872 B.
TEST(MemoryEstimateTest, OneLayerOf27BInFp32) {
  const auto e = Must(Request("2.7B", 4, 512, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP));
  int64_t layer = 0;
  for (const auto& t : e.activations_per_layer()) layer += t.bytes();
  EXPECT_EQ(layer, 898'383'872);
  EXPECT_EQ(Find(e.activations_per_layer(), "layer.softmax_exp")->bytes(), 134'217'728);
  EXPECT_EQ(Find(e.activations(), "activations.layers")->bytes(), 32 * int64_t{898'383'872});
}

// The same layer under bf16 autocast: the residual stream and the norms stay
// fp32 (4+4+4+4+4 = 20), the casts for q/k/v (6) and w1/w3 (4), q, k, v and
// the merged heads in bf16 (8): 34·N·d = 178,257,920; 10·N·d_ff =
// 209,715,200; exp fp32 + weights bf16 6·S = 201,326,592; + 786,432 + 16,384.
TEST(MemoryEstimateTest, OneLayerOf27BInBf16) {
  const auto e = Must(Request("2.7B", 4, 512, v1::PRECISION_BF16, v1::BENCHMARK_MODE_TRAIN_STEP));
  int64_t layer = 0;
  for (const auto& t : e.activations_per_layer()) layer += t.bytes();
  EXPECT_EQ(layer, 178'257'920 + 209'715'200 + 201'326'592 + 786'432 + 16'384);
  // Every Linear weight's bf16 copy: 2 B x (32 x (4d² + 3 d d_ff) + V d).
  EXPECT_EQ(Find(e.model_state(), "autocast_weight_copies")->bytes(),
            2 * (32 * (4 * int64_t{2560} * 2560 + 3 * int64_t{2560} * 10240) + 10000 * 2560));
}

// The forward peak the memory request measured on an H100 (docs/results/
// h100-memory.md, through autograd): 2.7B, batch 4, context 512, fp32,
// 39.90 GiB. By hand: parameters 4 x 3,406,809,600 = 13,627,238,400; layers
// 32 x 898,383,872 = 28,748,283,904; ln_final's input, x/rms and 1/rms and the
// LM head's input 4·N·d + 4·N·(d+1) + 4·N·d = 62,922,752; the loss's exp
// 4·N·V = 81,920,000 and stats 12·N = 24,576; its forward transients
// (2·4+8)·N·V = 327,680,000; token ids 16·N = 32,768; the mask 512² = 262,144.
TEST(MemoryEstimateTest, ForwardPeakOf27BByHand) {
  auto r = Request("2.7B", 4, 512, v1::PRECISION_FP32, v1::BENCHMARK_MODE_FORWARD);
  r.set_autograd(true);
  const auto e = Must(r);
  const int64_t expected = 13'627'238'400 + 28'748'283'904 + 62'922'752 + 81'920'000 + 24'576 +
                           327'680'000 + 32'768 + 262'144;
  EXPECT_EQ(PhasePeak(e, "forward"), expected);
  EXPECT_EQ(e.total_bytes(), expected);
  EXPECT_EQ(e.peak_phase(), "forward");
  // Within 0.1% of the measured 39.90 GiB.
  EXPECT_NEAR(static_cast<double>(expected) / (1 << 30), 39.90, 0.04);
}

// Without autograd a forward-only step keeps nothing: far below the above.
TEST(MemoryEstimateTest, ExplicitForwardKeepsNothing) {
  const auto e = Must(Request("2.7B", 4, 512, v1::PRECISION_FP32, v1::BENCHMARK_MODE_FORWARD));
  EXPECT_EQ(Find(e.activations(), "activations.layers"), nullptr);
  ASSERT_NE(Find(e.activations(), "forward.working_set"), nullptr);
  // Parameters + the attention core's 20·N·d + 20·S (the loss's 20·N·V is smaller).
  const int64_t N = 2048, d = 2560, S = int64_t{4} * 32 * 512 * 512;
  EXPECT_EQ(e.total_bytes(), 13'627'238'400 + 20 * N * d + 20 * S + 16 * N + 512 * 512);
}

// The train step's phases: the optimizer step holds parameters, gradients
// and m, v (16 B per parameter) and sqrt(v) of the largest parameter
// (d x d_ff = 26,214,400 elements, above V x d = 25,600,000).
TEST(MemoryEstimateTest, TrainStepOptimizerPhase) {
  const auto e = Must(Request("2.7B", 4, 128, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP));
  EXPECT_EQ(PhasePeak(e, "optimizer_step"),
            16 * int64_t{3'406'809'600} + 4 * 26'214'400 + 16 * 512 + 128 * 128);
  EXPECT_EQ(e.phases_size(), 3);
  EXPECT_GE(e.total_bytes(), PhasePeak(e, "forward"));
  EXPECT_GE(e.total_bytes(), PhasePeak(e, "backward"));
  EXPECT_GE(e.total_bytes(), PhasePeak(e, "optimizer_step"));
}

// The course's XXL: fp32 master weights, gradients and AdamW state are
// 16 B per parameter: 16 x 465,396,252,672 = 7,446,340,042,752 B (6.8 TiB,
// 94 H100s of 80 GB before a single activation).
TEST(MemoryEstimateTest, XxlModelState) {
  const auto e = Must(Request("xxl", 4, 128, v1::PRECISION_BF16, v1::BENCHMARK_MODE_TRAIN_STEP));
  EXPECT_EQ(e.parameter_count(), 465'396'252'672);
  int64_t state = 0;
  for (const char* name : {"parameters", "gradients", "adamw_state"}) {
    state += Find(e.model_state(), name)->bytes();
  }
  EXPECT_EQ(state, 7'446'340'042'752);
}

// FSDP over 64 devices divides the model state by 64 and half of the saved
// activations (x (1 + 1/64) / 2), as the course's question has it.
TEST(MemoryEstimateTest, XxlUnderFsdp) {
  auto r = Request("xxl", 4, 128, v1::PRECISION_BF16, v1::BENCHMARK_MODE_TRAIN_STEP);
  r.mutable_sharding()->set_data_parallel(64);
  r.mutable_sharding()->set_fsdp(true);
  const auto e = Must(r);
  EXPECT_EQ(e.devices(), 64);
  EXPECT_EQ(Find(e.model_state(), "parameters")->per_device_bytes(),
            4 * int64_t{465'396'252'672} / 64);
  EXPECT_EQ(Find(e.model_state(), "adamw_state")->per_device_bytes(),
            8 * int64_t{465'396'252'672} / 64);
  const auto* layers = Find(e.activations(), "activations.layers");
  EXPECT_EQ(layers->per_device_bytes(), (layers->bytes() * 65 + 127) / 128);
  EXPECT_LT(e.per_device_bytes(), e.total_bytes() / 30);
}

// ZeRO stages shard AdamW state, then gradients, then parameters.
TEST(MemoryEstimateTest, ZeroStages) {
  auto r = Request("small", 4, 128, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP);
  r.mutable_sharding()->set_data_parallel(4);
  const int64_t P = 128'625'408;
  for (int stage = 0; stage <= 3; ++stage) {
    r.mutable_sharding()->set_zero_stage(stage);
    const auto e = Must(r);
    EXPECT_EQ(Find(e.model_state(), "adamw_state")->per_device_bytes(),
              stage >= 1 ? 8 * P / 4 : 8 * P);
    EXPECT_EQ(Find(e.model_state(), "gradients")->per_device_bytes(),
              stage >= 2 ? 4 * P / 4 : 4 * P);
    EXPECT_EQ(Find(e.model_state(), "parameters")->per_device_bytes(),
              stage >= 3 ? 4 * P / 4 : 4 * P);
  }
}

// Tensor parallelism splits the matrices and the head-, d_ff- and
// vocabulary-wide activations; the residual stream stays whole.
TEST(MemoryEstimateTest, TensorAndPipelineParallel) {
  auto r = Request("2.7B", 4, 256, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP);
  r.mutable_sharding()->set_tensor_parallel(4);
  r.mutable_sharding()->set_pipeline_stages(4);
  const auto e = Must(r);
  EXPECT_EQ(e.devices(), 16);
  const int64_t d = 2560, dff = 10240, V = 10000;
  // 8 layers of (4d² + 3 d d_ff)/4 + 2d, the LM head V d / 4, ln_final d.
  const int64_t p_device = 8 * ((4 * d * d + 3 * d * dff) / 4 + 2 * d) + V * d / 4 + d;
  EXPECT_EQ(Find(e.model_state(), "parameters")->per_device_bytes(), 4 * p_device);
  const auto* ffn = Find(e.activations_per_layer(), "layer.ffn_hidden");
  EXPECT_EQ(ffn->per_device_bytes(), ffn->bytes() / 4);
  const auto* input = Find(e.activations_per_layer(), "layer.input");
  EXPECT_EQ(input->per_device_bytes(), input->bytes());
  EXPECT_EQ(e.residual_stream().per_device_bytes(), e.residual_stream().bytes());
}

TEST(MemoryEstimateTest, DefaultsWrittenOut) {
  v1::EstimateRequest r;
  r.mutable_model()->set_preset("tiny");
  auto resolved = ResolveEstimateRequest(r);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->batch_size(), 4);
  EXPECT_EQ(resolved->context_length(), 128);
  EXPECT_EQ(resolved->precision(), v1::PRECISION_FP32);
  EXPECT_EQ(resolved->mode(), v1::BENCHMARK_MODE_FORWARD);
  EXPECT_EQ(resolved->sharding().data_parallel(), 1);
  EXPECT_EQ(resolved->sharding().tensor_parallel(), 1);
  EXPECT_EQ(resolved->sharding().pipeline_stages(), 1);
  EXPECT_EQ(resolved->model().d_model(), 64);
  const auto e = Must(r);
  EXPECT_EQ(e.devices(), 1);
  EXPECT_EQ(e.per_device_bytes(), e.total_bytes());
  for (const auto& t : e.model_state()) EXPECT_FALSE(t.formula().empty()) << t.name();
  for (const auto& t : e.activations()) EXPECT_FALSE(t.formula().empty()) << t.name();
}

TEST(MemoryEstimateTest, BadInputNamesTheField) {
  auto base = Request("2.7B", 4, 128, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP);
  {
    auto r = base;
    r.set_batch_size(0);
    EXPECT_EQ(Message(r), "batch_size: expected 1..65536, got 0");
  }
  {
    auto r = base;
    r.set_context_length(-1);
    EXPECT_EQ(Message(r), "context_length: expected 1..1048576, got -1");
  }
  {
    auto r = base;
    r.mutable_model()->set_preset("huge");
    EXPECT_THAT(Message(r), HasSubstr("model.preset: unknown preset"));
  }
  {
    auto r = base;
    r.set_mode(static_cast<v1::BenchmarkMode>(9));
    EXPECT_THAT(Message(r), HasSubstr("mode: unknown value 9"));
  }
  {
    auto r = base;
    r.set_precision(static_cast<v1::Precision>(7));
    EXPECT_THAT(Message(r), HasSubstr("precision: unknown value 7"));
  }
  {
    auto r = base;
    r.mutable_sharding()->set_data_parallel(0);
    EXPECT_EQ(Message(r), "sharding.data_parallel: expected 1..1048576, got 0");
  }
  {
    auto r = base;
    r.mutable_sharding()->set_zero_stage(4);
    EXPECT_THAT(Message(r), HasSubstr("sharding.zero_stage: expected 0..3, got 4"));
  }
  {
    auto r = base;
    r.mutable_sharding()->set_zero_stage(2);
    r.mutable_sharding()->set_fsdp(true);
    EXPECT_THAT(Message(r), HasSubstr("sharding.fsdp: "));
  }
  {
    auto r = base;
    r.mutable_sharding()->set_tensor_parallel(3);
    EXPECT_THAT(Message(r), HasSubstr("sharding.tensor_parallel: 3 does not divide "
                                      "model.num_heads (32)"));
  }
  {
    auto r = base;
    r.mutable_sharding()->set_pipeline_stages(33);
    EXPECT_THAT(Message(r), HasSubstr("sharding.pipeline_stages: expected 1..32, got 33"));
  }
  {
    // 65536 x 128 heads x (2^20)² scores is 2^63 elements: refused, not overflowed.
    auto r = Request("xxl", 65536, 1 << 20, v1::PRECISION_FP32, v1::BENCHMARK_MODE_TRAIN_STEP);
    EXPECT_THAT(Message(r), HasSubstr("batch_size, context_length: "));
  }
  {
    auto r = base;
    r.mutable_model()->set_rope_theta(std::numeric_limits<double>::infinity());
    EXPECT_THAT(Message(r), HasSubstr("model.rope_theta: expected a finite number"));
  }
}

TEST(MemoryEstimateTest, StepOptionsOutsideTheModelAreNamed) {
  v1::BenchmarkSpec step;
  step.mutable_model()->set_preset("small");
  step.set_batch_size(2);
  step.set_context_length(64);
  step.set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  std::string why = "unset";
  auto r = EstimateRequestForStep(step, &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(r.batch_size(), 2);
  EXPECT_FALSE(r.autograd());
  step.set_attention(v1::ATTENTION_IMPL_SDPA_FLASH);
  step.set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  r = EstimateRequestForStep(step, &why);
  EXPECT_EQ(why, "attention other than faithful, optimizer_impl other than faithful");
  EXPECT_TRUE(r.autograd());
}

TEST(EstimateMemoryTest, AnUnresolvedRequestIsRefusedNotDividedByZero) {
  v1::EstimateRequest in;
  in.mutable_model()->set_preset("small");
  in.mutable_sharding()->set_data_parallel(2);  // tensor_parallel, pipeline_stages unset
  auto resolved = ResolveEstimateRequest(in);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  v1::EstimateRequest unresolved = *resolved;
  unresolved.mutable_sharding()->clear_tensor_parallel();
  const absl::Status s = EstimateMemory(unresolved).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("every degree must be written out"), std::string::npos)
      << s.message();
  EXPECT_TRUE(EstimateMemory(*resolved).ok());
}

}  // namespace
}  // namespace benchd
