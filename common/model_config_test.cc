#include "common/model_config.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

using ::testing::IsSubstring;

v1::ModelConfig Named(const std::string& preset) {
  v1::ModelConfig m;
  m.set_preset(preset);
  return m;
}

v1::ModelConfig Explicit(int64_t vocab, int64_t d, int64_t dff, int64_t layers, int64_t heads) {
  v1::ModelConfig m;
  m.set_vocab_size(vocab);
  m.set_d_model(d);
  m.set_d_ff(dff);
  m.set_num_layers(layers);
  m.set_num_heads(heads);
  return m;
}

int64_t CountOf(const std::string& preset) {
  auto m = ResolveModelConfig(Named(preset));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? ParameterCount(*m) : -1;
}

TEST(PresetsTest, InSizeOrder) {
  std::vector<std::string> names;
  for (const auto& p : Presets()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tiny", "mini", "small", "medium", "large", "xl",
                                             "2.7B", "xxl"}));
}

// The course's figures for its five sizes (vocab 10000).
TEST(ParameterCountTest, CoursePresets) {
  EXPECT_EQ(CountOf("small"), 128'625'408);
  EXPECT_EQ(CountOf("medium"), 423'183'360);
  EXPECT_EQ(CountOf("large"), 969'411'840);
  EXPECT_EQ(CountOf("xl"), 1'998'235'200);
  EXPECT_EQ(CountOf("2.7B"), 3'406'809'600);
}

// xxl: V=10000 d=16384 dff=53248 L=126
//   2·V·d = 327,680,000; per layer 4·16384² + 3·16384·53248 + 2·16384
//   = 1,073,741,824 + 2,617,245,696 + 32,768 = 3,691,020,288; ×126 = 465,068,556,288;
//   + 16,384 → 465,396,252,672.
TEST(ParameterCountTest, Xxl) { EXPECT_EQ(CountOf("xxl"), 465'396'252'672); }

// tiny: V=1000 d=64 dff=256 L=2
//   2·V·d = 128,000; per layer 4·64² + 3·64·256 + 2·64 = 16,384 + 49,152 + 128 = 65,664;
//   ×2 = 131,328; + final norm 64 → 259,392.
// mini: V=10000 d=256 dff=1024 L=4
//   2·V·d = 5,120,000; per layer 4·256² + 3·256·1024 + 2·256 = 262,144 + 786,432 + 512
//   = 1,049,088; ×4 = 4,196,352; + 256 → 9,316,608.
TEST(ParameterCountTest, CpuPresets) {
  EXPECT_EQ(CountOf("tiny"), 259'392);
  EXPECT_EQ(CountOf("mini"), 9'316'608);
}

TEST(ParameterCountTest, PresetNameIsCaseInsensitiveAndCanonicalized) {
  auto m = ResolveModelConfig(Named("2.7b"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->preset(), "2.7B");
  EXPECT_EQ(ParameterCount(*m), 3'406'809'600);
}

// V=10 d=4 dff=8 L=1 heads=2, batch 2, context 3:
//   matmuls per token 2·(L·(4·16 + 3·4·8) + 10·4) = 2·(64 + 96 + 40) = 400
//   attention per token 4·L·T·d = 4·1·3·4 = 48
//   forward = 2·3 tokens · 448 = 2,688; backward adds 2× → 8,064.
TEST(FlopsTest, HandWorkedExample) {
  auto m = ResolveModelConfig(Explicit(10, 4, 8, 1, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(ForwardFlops(*m, 2, 3), 2688.0);
  EXPECT_DOUBLE_EQ(StepFlops(*m, v1::BENCHMARK_MODE_FORWARD, 2, 3), 2688.0);
  EXPECT_DOUBLE_EQ(StepFlops(*m, v1::BENCHMARK_MODE_UNSPECIFIED, 2, 3), 2688.0);
  EXPECT_DOUBLE_EQ(StepFlops(*m, v1::BENCHMARK_MODE_FORWARD_BACKWARD, 2, 3), 8064.0);
  EXPECT_DOUBLE_EQ(StepFlops(*m, v1::BENCHMARK_MODE_TRAIN_STEP, 2, 3), 8064.0);
}

// Same model: B=2, H=2, T=3, d=4, L=1. Scores per layer B·H·T·T = 36.
//   scores 2·B·T·T·d + 36 = 144 + 36 = 180; mask 36; softmax 5·36 = 180;
//   weighted sum 144. The matmuls (144 + 144) are ForwardFlops' attention
//   term: 2·3 tokens · 48 = 288.
TEST(FlopsTest, AttentionPartsHandWorked) {
  auto m = ResolveModelConfig(Explicit(10, 4, 8, 1, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  const AttentionFlops f = ForwardAttentionFlops(*m, 2, 3);
  EXPECT_DOUBLE_EQ(f.scores, 180.0);
  EXPECT_DOUBLE_EQ(f.mask, 36.0);
  EXPECT_DOUBLE_EQ(f.softmax, 180.0);
  EXPECT_DOUBLE_EQ(f.weighted_sum, 144.0);
  EXPECT_DOUBLE_EQ(f.total(), 540.0);
  EXPECT_DOUBLE_EQ(f.scores - 36.0 + f.weighted_sum, 288.0);
}

TEST(ResolveModelConfigTest, FillsPresetAndRopeTheta) {
  auto m = ResolveModelConfig(Named("small"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->preset(), "small");
  EXPECT_EQ(m->vocab_size(), 10000);
  EXPECT_EQ(m->d_model(), 768);
  EXPECT_EQ(m->d_ff(), 3072);
  EXPECT_EQ(m->num_layers(), 12);
  EXPECT_EQ(m->num_heads(), 12);
  EXPECT_DOUBLE_EQ(m->rope_theta(), 10000.0);
}

TEST(ResolveModelConfigTest, ExplicitFieldsOverridePreset) {
  v1::ModelConfig in = Named("small");
  in.set_num_layers(2);
  in.set_vocab_size(512);
  in.set_rope_theta(500000.0);
  auto m = ResolveModelConfig(in);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_layers(), 2);
  EXPECT_EQ(m->vocab_size(), 512);
  EXPECT_DOUBLE_EQ(m->rope_theta(), 500000.0);
  EXPECT_EQ(m->d_model(), 768);  // the rest still from the preset
  EXPECT_EQ(m->d_ff(), 3072);
  EXPECT_EQ(m->num_heads(), 12);
}

TEST(ResolveModelConfigTest, OverrideIsCheckedToo) {
  v1::ModelConfig in = Named("small");
  in.set_num_heads(5);  // 768 % 5 != 0
  auto m = ResolveModelConfig(in);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "model.num_heads", std::string(m.status().message()));
}

TEST(ResolveModelConfigTest, UnknownPresetNamesFieldValueAndChoices) {
  auto m = ResolveModelConfig(Named("huge"), "benchmark.model.");
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(m.status().message());
  EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.model.preset", msg);
  EXPECT_PRED_FORMAT2(IsSubstring, "'huge'", msg);
  for (const auto& p : Presets()) EXPECT_PRED_FORMAT2(IsSubstring, p.name, msg);
}

TEST(ResolveModelConfigTest, DModelNotDivisibleByHeads) {
  auto m = ResolveModelConfig(Explicit(100, 96, 256, 2, 5));
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(m.status().message());
  EXPECT_PRED_FORMAT2(IsSubstring, "model.num_heads", msg);
  EXPECT_PRED_FORMAT2(IsSubstring, "divisible", msg);
}

TEST(ResolveModelConfigTest, OddHeadDimension) {
  auto m = ResolveModelConfig(Explicit(100, 60, 256, 2, 4));  // head dim 15
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(m.status().message());
  EXPECT_PRED_FORMAT2(IsSubstring, "model.num_heads", msg);
  EXPECT_PRED_FORMAT2(IsSubstring, "15", msg);
}

TEST(ResolveModelConfigTest, ZeroOrNegativeSizesNameTheField) {
  struct Case {
    v1::ModelConfig in;
    const char* field;
  };
  const Case cases[] = {
      {Explicit(0, 64, 256, 2, 4), "model.vocab_size"},
      {Explicit(-1, 64, 256, 2, 4), "model.vocab_size"},
      {Explicit(100, 0, 256, 2, 4), "model.d_model"},
      {Explicit(100, -64, 256, 2, 4), "model.d_model"},
      {Explicit(100, 64, 0, 2, 4), "model.d_ff"},
      {Explicit(100, 64, -256, 2, 4), "model.d_ff"},
      {Explicit(100, 64, 256, 0, 4), "model.num_layers"},
      {Explicit(100, 64, 256, -2, 4), "model.num_layers"},
      {Explicit(100, 64, 256, 2, 0), "model.num_heads"},
      {Explicit(100, 64, 256, 2, -4), "model.num_heads"},
  };
  for (const Case& c : cases) {
    auto m = ResolveModelConfig(c.in);
    ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_PRED_FORMAT2(IsSubstring, c.field, std::string(m.status().message()));
  }
}

// No preset and no sizes: say that a model is needed, not that vocab_size is 0.
TEST(ResolveModelConfigTest, NoModelAtAllSaysAPresetOrSizesAreNeeded) {
  auto m = ResolveModelConfig(v1::ModelConfig());
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(m.status().message());
  EXPECT_PRED_FORMAT2(IsSubstring, "model.preset: no model given; expected a preset (one of", msg);
  EXPECT_PRED_FORMAT2(IsSubstring, "small", msg);
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "or the sizes vocab_size, d_model, d_ff, num_layers and num_heads", msg);
}

TEST(ResolveModelConfigTest, NegativeOverrideOfPresetRefused) {
  v1::ModelConfig in = Named("tiny");
  in.set_d_ff(-1);
  auto m = ResolveModelConfig(in);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "model.d_ff", std::string(m.status().message()));
}

TEST(ResolveModelConfigTest, EmptyConfigSaysToNameAPreset) {
  auto m = ResolveModelConfig(v1::ModelConfig());
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "preset", std::string(m.status().message()));
}

TEST(ResolveModelConfigTest, NegativeRopeTheta) {
  v1::ModelConfig in = Named("tiny");
  in.set_rope_theta(-1.0);
  auto m = ResolveModelConfig(in);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "model.rope_theta", std::string(m.status().message()));
}

// Finite and positive is not enough: 5e-324 made every loss NaN (fp32
// frequencies overflow). Below 1 is refused, naming the field; 1 runs.
TEST(ResolveModelConfigTest, RopeThetaBelowOneIsRefused) {
  for (double theta : {5e-324, 1e-40, 0.5}) {
    v1::ModelConfig in = Named("tiny");
    in.set_rope_theta(theta);
    auto m = ResolveModelConfig(in);
    ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << theta;
    EXPECT_PRED_FORMAT2(IsSubstring, "model.rope_theta: expected >= 1",
                        std::string(m.status().message()));
  }
  v1::ModelConfig one = Named("tiny");
  one.set_rope_theta(1.0);
  EXPECT_TRUE(ResolveModelConfig(one).ok());
}

TEST(ResolveModelConfigTest, DimensionOverLimit) {
  auto m = ResolveModelConfig(Explicit(100, 64, (int64_t{1} << 20) + 1, 2, 4));
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "model.d_ff", std::string(m.status().message()));
}

// Every dimension at its limit (2^20) is accepted; the count, 7·2^60 + 2^42 + 2^20
// ≈ 8.07e18, must still fit int64 (it does, with ~12% headroom).
TEST(ParameterCountTest, AtDimensionLimitsStaysExact) {
  constexpr int64_t kBig = int64_t{1} << 20;
  // Every size at its limit: ParameterCount stays exact in int64 ...
  const v1::ModelConfig big = Explicit(kBig, kBig, kBig, kBig, 1024);
  const __int128 b = kBig;
  const __int128 exact = 2 * b * b + b * (4 * b * b + 3 * b * b + 2 * b) + b;
  EXPECT_EQ(static_cast<__int128>(ParameterCount(big)), exact);
  // ... but such a model is refused: its byte counts would overflow.
  auto m = ResolveModelConfig(big);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("parameters, more than the limit"), std::string::npos)
      << m.status();
}

TEST(ParseTest, PrecisionAndMode) {
  EXPECT_EQ(*ParsePrecision("BF16"), v1::PRECISION_BF16);
  EXPECT_EQ(*ParsePrecision("float32"), v1::PRECISION_FP32);
  EXPECT_EQ(*ParsePrecision("fp16"), v1::PRECISION_FP16);
  EXPECT_EQ(ParsePrecision("int8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseMode("train_step"), v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(*ParseMode("forward-backward"), v1::BENCHMARK_MODE_FORWARD_BACKWARD);
  EXPECT_EQ(ParseMode("sideways").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrecisionName(v1::PRECISION_BF16), "bf16");
  EXPECT_EQ(ModeName(v1::BENCHMARK_MODE_TRAIN_STEP), "train_step");
  EXPECT_EQ(ModeName(v1::BENCHMARK_MODE_UNSPECIFIED), "forward");
}

}  // namespace
}  // namespace benchd
