// The model's pieces against values worked out by hand (derivations in the
// comments), its parameter counts against the course's figures, and its
// initialisation against the truncated normal it must draw from.
#include "worker/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/model_config.h"
#include "worker/autocast_guard.h"
#include "worker/test_model.h"

namespace benchd::worker {
namespace {

torch::Tensor T(std::vector<float> values, std::vector<int64_t> shape) {
  return torch::tensor(values).reshape(shape);
}

void ExpectNear(const torch::Tensor& actual, const torch::Tensor& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const auto a = actual.to(torch::kFloat64).flatten();
  const auto e = expected.to(torch::kFloat64).flatten();
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_NEAR(a[i].item<double>(), e[i].item<double>(), tol) << "at flat index " << i;
  }
}

using testing::ResolvedPreset;

const auto kCpu = torch::TensorOptions().dtype(torch::kFloat32);

TEST(RMSNormTest, MatchesHandComputedValues) {
  RMSNorm norm(2, kCpu);
  // Row [3, 4]: mean square 12.5, 1/sqrt(12.5 + 1e-5) = 0.28284258;
  // row [1, 1]: 1/sqrt(1 + 1e-5) = 0.99999500.
  const auto x = T({3, 4, 1, 1}, {2, 2});
  ExpectNear(norm(x), T({0.84852780f, 1.13137040f, 0.99999500f, 0.99999500f}, {2, 2}));
  // The gain multiplies per feature.
  torch::NoGradGuard no_grad;
  norm->weight.copy_(torch::tensor({2.0f, 0.5f}));
  ExpectNear(norm(x), T({1.69705560f, 0.56568520f, 1.99999000f, 0.49999750f}, {2, 2}));
}

TEST(RMSNormTest, ComputesInFp32AndReturnsTheInputDtype) {
  RMSNorm norm(2, kCpu);
  const auto y = norm(T({3, 4}, {1, 2}).to(torch::kBFloat16));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  ExpectNear(y, T({0.8485278f, 1.1313704f}, {1, 2}), 1e-2);
}

TEST(RoPETest, RotatesInterleavedPairsByPositionTimesFrequency) {
  // head_dim 4, theta 10000: frequencies theta^(-0/4) = 1 and theta^(-2/4) = 0.01.
  RotaryEmbedding rope(4, 10000.0);
  // Position 0 is the identity. Position 1: pair (1, 0) turns by 1 rad to
  // (cos 1, sin 1); pair (0, 1) turns by 0.01 rad to (-sin 0.01, cos 0.01).
  const auto x = T({1, 2, 3, 4, 1, 0, 0, 1}, {1, 2, 4});
  ExpectNear(rope(x),
             T({1, 2, 3, 4, 0.54030231f, 0.84147098f, -0.00999983f, 0.99995000f}, {1, 2, 4}));
}

TEST(RoPETest, UsesTheConfiguredTheta) {
  // theta 100: second frequency 100^(-1/2) = 0.1, so (0, 1) -> (-sin 0.1, cos 0.1).
  RotaryEmbedding rope(4, 100.0);
  const auto x = T({0, 0, 0, 0, 0, 0, 0, 1}, {1, 2, 4});
  ExpectNear(rope(x).select(1, 1), T({0, 0, -0.09983342f, 0.99500417f}, {1, 4}));
}

TEST(RoPETest, ServesLongerSequencesAfterShorterOnes) {
  RotaryEmbedding rope(2, 10000.0);
  // One pair at frequency 1: position p turns (1, 0) to (cos p, sin p).
  rope(torch::ones({1, 2, 2}));
  const auto y = rope(T({1, 0, 1, 0, 1, 0}, {1, 3, 2}));
  ExpectNear(y, T({1, 0, 0.54030231f, 0.84147098f, -0.41614684f, 0.90929743f}, {1, 3, 2}));
}

TEST(SoftmaxTest, MatchesHandComputedValues) {
  // e^1, e^2, e^3 over their sum 30.1928748.
  const auto expected = T({0.09003057f, 0.24472847f, 0.66524096f}, {1, 3});
  ExpectNear(Softmax(T({1, 2, 3}, {1, 3}), -1), expected);
  // Subtracting the row max keeps large logits finite.
  ExpectNear(Softmax(T({1000, 1001, 1002}, {1, 3}), -1), expected);
  const float inf = std::numeric_limits<float>::infinity();
  ExpectNear(Softmax(T({0, -inf}, {1, 2}), -1), T({1, 0}, {1, 2}));
}

TEST(CrossEntropyTest, IsTheMeanNegativeLogLikelihood) {
  // Uniform over 3: ln 3 = 1.0986123. Logits [1, 2, 3], target 2:
  // -ln 0.66524096 = 0.4076059. Mean 0.7531091.
  const auto logits = T({0, 0, 0, 1, 2, 3}, {1, 2, 3});
  const auto targets = torch::tensor({0, 2}, torch::kInt64).reshape({1, 2});
  EXPECT_NEAR(CrossEntropy(logits, targets).item<double>(), 0.7531091, 1e-6);
}

TEST(SiluTest, IsXTimesSigmoid) {
  // sigmoid(1) = 0.7310586; silu(-1) = -sigmoid(-1) = -0.2689414.
  ExpectNear(Silu(torch::tensor({1.0f, -1.0f, 0.0f})),
             torch::tensor({0.7310586f, -0.2689414f, 0.0f}));
}

TEST(AttentionTest, CausalMaskIsLowerTriangular) {
  const auto m = CausalMask(3, torch::kCPU);
  const auto expected = torch::tensor({1, 0, 0, 1, 1, 0, 1, 1, 1}).reshape({3, 3}).to(torch::kBool);
  EXPECT_TRUE(torch::equal(m, expected));
}

TEST(AttentionTest, MatchesHandComputedValues) {
  // d_k = 4, so scores are q.k / 2.
  //   q0 = 2 e0, q1 = 2 e1, k0 = e0, k1 = e1:
  //   s00 = 1, s01 = 0 (masked), s10 = 0, s11 = 1.
  // Row 0 attends only to key 0 -> v0. Row 1: softmax(0, 1) =
  // (0.2689414, 0.7310586), so v0 + 0.7310586 (v1 - v0) = v0 + 2.9242344.
  const auto q = T({2, 0, 0, 0, 0, 2, 0, 0}, {1, 2, 4});
  const auto k = T({1, 0, 0, 0, 0, 1, 0, 0}, {1, 2, 4});
  const auto v = T({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 4});
  ExpectNear(ScaledDotProductAttention(q, k, v, CausalMask(2, torch::kCPU)),
             T({1, 2, 3, 4, 3.9242344f, 4.9242344f, 5.9242344f, 6.9242344f}, {1, 2, 4}));
  // Unmasked, row 0 is softmax(1, 0) = (0.7310586, 0.2689414): v0 + 1.0757656.
  ExpectNear(ScaledDotProductAttention(q, k, v, torch::Tensor()).select(1, 0),
             T({2.0757656f, 3.0757656f, 4.0757656f, 5.0757656f}, {1, 4}));
}

TEST(AttentionTest, MaskCacheGivesTheSameMaskAndFill) {
  CausalMaskCache masks;
  const auto m4 = masks.Mask(4, torch::kCPU);
  EXPECT_TRUE(torch::equal(m4, CausalMask(4, torch::kCPU)));
  EXPECT_TRUE(masks.Mask(4, torch::kCPU).is_same(m4));                                // built once
  EXPECT_TRUE(torch::equal(masks.Mask(3, torch::kCPU), CausalMask(3, torch::kCPU)));  // rebuilt
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kFloat16}) {
    const auto inf = masks.NegInf(dtype, torch::kCPU);
    EXPECT_EQ(inf.dim(), 0);
    EXPECT_EQ(inf.scalar_type(), dtype);
    EXPECT_EQ(inf.item<double>(), -std::numeric_limits<double>::infinity());
    EXPECT_TRUE(masks.NegInf(dtype, torch::kCPU).is_same(inf));
  }
  // The cache's -inf gives the scalar's result bit for bit, in each dtype.
  torch::manual_seed(0);
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const auto q = torch::randn({2, 3, 5, 8}).to(dtype), k = torch::randn({2, 3, 5, 8}).to(dtype),
               v = torch::randn({2, 3, 5, 8}).to(dtype);
    const auto mask = masks.Mask(5, torch::kCPU);
    const auto cached = ScaledDotProductAttention(q, k, v, mask, &masks);
    EXPECT_EQ(cached.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(cached, ScaledDotProductAttention(q, k, v, mask)));
  }
}

TEST(TransformerLMTest, IsCausal) {
  torch::manual_seed(0);
  TransformerLM lm(ResolvedPreset("tiny"), kCpu);
  auto ids = torch::randint(0, 1000, {1, 8}, torch::kInt64);
  const auto before = lm(ids);
  ids.index_put_({0, 7}, (ids.index({0, 7}).item<int64_t>() + 1) % 1000);
  const auto after = lm(ids);
  // Changing the last token leaves every earlier position's logits alone.
  EXPECT_TRUE(torch::allclose(before.narrow(1, 0, 7), after.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(before.narrow(1, 7, 1), after.narrow(1, 7, 1)));
  EXPECT_EQ(before.sizes(), (std::vector<int64_t>{1, 8, 1000}));
}

TEST(TransformerLMTest, WeightCopiesGiveAutocastsNumbersWithoutItsCasts) {
  // The same forward and the same gradients as autocast casting the fp32
  // weights itself, bit for bit: the copies are the same round-to-nearest
  // casts, and the weight gradients come out of the same bf16 matmuls.
  torch::manual_seed(3);
  TransformerLM lm(ResolvedPreset("tiny"), kCpu);
  const auto ids = torch::randint(0, 1000, {2, 8}, torch::kInt64);
  const auto targets = torch::randint(0, 1000, {2, 8}, torch::kInt64);
  auto loss_of = [&] {
    AutocastGuard autocast(torch::kCPU, at::kBFloat16);
    return CrossEntropy(lm(ids), targets);
  };
  const torch::Tensor autocast_loss = loss_of();
  autocast_loss.backward();
  const torch::Tensor autocast_grad = lm->lm_head->weight.grad().clone();
  const torch::Tensor norm_grad = lm->ln_final->weight.grad().clone();
  lm->zero_grad();

  const auto pairs = lm->MakeWeightCopies(at::kBFloat16);
  EXPECT_EQ(pairs.size(), 2 * 7 + 1u);  // 7 Linears per layer of tiny's 2, and lm_head
  for (const auto& [weight, copy] : pairs) {
    EXPECT_EQ(copy.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(copy.requires_grad() && copy.is_leaf());
    EXPECT_TRUE(torch::equal(copy, weight.to(at::kBFloat16)));
  }
  const torch::Tensor copies_loss = loss_of();
  EXPECT_TRUE(torch::equal(copies_loss, autocast_loss));
  copies_loss.backward();
  const torch::Tensor& copy = lm->lm_head->weight_copy;
  ASSERT_TRUE(copy.grad().defined());
  EXPECT_EQ(copy.grad().scalar_type(), at::kBFloat16);
  EXPECT_FALSE(lm->lm_head->weight.grad().defined());  // the fp32 weight was not used
  EXPECT_TRUE(torch::equal(copy.grad().to(at::kFloat), autocast_grad));
  EXPECT_TRUE(torch::equal(lm->ln_final->weight.grad(), norm_grad));  // no copy: as before

  lm->zero_grad();
  EXPECT_FALSE(copy.grad().defined());
  lm->DropWeightCopies();
  EXPECT_FALSE(lm->lm_head->weight_copy.defined());
  loss_of().backward();
  EXPECT_TRUE(lm->lm_head->weight.grad().defined());
}

TEST(TransformerLMTest, FusedOpsGiveTheCoursesNumbers) {
  // On a CPU fused_ops means at::rms_norm and at::silu (RoPE stays the
  // course's ops: its kernel is CUDA's); loss and gradients as the faithful ops.
  torch::manual_seed(4);
  TransformerLM lm(ResolvedPreset("tiny"), kCpu);
  const auto ids = torch::randint(0, 1000, {2, 8}, torch::kInt64);
  const auto targets = torch::randint(0, 1000, {2, 8}, torch::kInt64);
  auto run = [&](bool fused) {
    lm->SetFusedOps(fused);
    lm->zero_grad();
    const torch::Tensor loss = CrossEntropy(lm(ids), targets);
    loss.backward();
    return std::make_pair(loss.item<double>(), lm->layers[0]->ln1->weight.grad().clone());
  };
  const auto [faithful_loss, faithful_grad] = run(false);
  const auto [fused_loss, fused_grad] = run(true);
  EXPECT_TRUE(lm->layers[1]->ln2->fused && lm->layers[1]->ffn->fused && lm->ln_final->fused);
  EXPECT_NEAR(fused_loss, faithful_loss, 1e-6 * faithful_loss);
  EXPECT_TRUE(torch::allclose(fused_grad, faithful_grad, 1e-4, 1e-6));
  EXPECT_FALSE(torch::equal(fused_grad, torch::zeros_like(fused_grad)));
  lm->SetFusedOps(false);
  EXPECT_FALSE(lm->layers[0]->ln1->fused || lm->layers[0]->ffn->fused);
}

TEST(TransformerLMTest, NamesParametersLikeTheCourse) {
  TransformerLM lm(ResolvedPreset("tiny"), torch::TensorOptions().device(torch::kMeta));
  const auto named = lm->named_parameters();
  for (const char* name :
       {"token_embeddings.weight", "layers.0.attn.q_proj.weight", "layers.0.attn.k_proj.weight",
        "layers.0.attn.v_proj.weight", "layers.1.attn.output_proj.weight", "layers.1.ffn.w1.weight",
        "layers.1.ffn.w2.weight", "layers.1.ffn.w3.weight", "layers.1.ln1.weight",
        "layers.1.ln2.weight", "ln_final.weight", "lm_head.weight"}) {
    EXPECT_NE(named.find(name), nullptr) << name;
  }
  EXPECT_EQ(named.size(), 1 + 2 * 9 + 2u);
  EXPECT_EQ(named["layers.0.ffn.w1.weight"].sizes(), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(named["lm_head.weight"].sizes(), (std::vector<int64_t>{1000, 64}));
}

TEST(ParameterCountTest, SmallPresetsBuiltForReal) {
  for (const char* preset : {"tiny", "mini"}) {
    const auto config = ResolvedPreset(preset);
    TransformerLM lm(config, kCpu);
    EXPECT_EQ(CountParameters(*lm), ParameterCount(config)) << preset;
  }
}

TEST(ParameterCountTest, CoursePresetsOnTheMetaDevice) {
  // The meta device gives shapes without storage, so 2.7B costs nothing here.
  const std::vector<std::pair<std::string, int64_t>> expected = {{"small", 128'625'408},
                                                                 {"medium", 423'183'360},
                                                                 {"large", 969'411'840},
                                                                 {"xl", 1'998'235'200},
                                                                 {"2.7B", 3'406'809'600}};
  for (const auto& [preset, count] : expected) {
    const auto config = ResolvedPreset(preset);
    TransformerLM lm(config, torch::TensorOptions().device(torch::kMeta));
    EXPECT_EQ(CountParameters(*lm), count) << preset;
    EXPECT_EQ(ParameterCount(config), count) << preset;
  }
}

// Truncated at ±3σ, the standard deviation is σ·sqrt(1 - 6φ(3)/(Φ(3)-Φ(-3)))
// = 0.986578 σ, and P(|x| > 2σ) = 2(Φ(3)-Φ(2))/(Φ(3)-Φ(-3)) = 0.042914.
constexpr double kTruncatedStdRatio = 0.986578;
constexpr double kTailBeyond2Sigma = 0.042914;

TEST(InitTest, TruncatedNormalHasTheTruncatedDistribution) {
  torch::manual_seed(1);
  const double sigma = 0.5;
  auto t = torch::empty({400'000});
  TruncatedNormal_(t, sigma, -3 * sigma, 3 * sigma);
  EXPECT_LE(t.max().item<double>(), 3 * sigma);
  EXPECT_GE(t.min().item<double>(), -3 * sigma);
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.005);
  EXPECT_NEAR(t.std().item<double>(), kTruncatedStdRatio * sigma, 0.005 * sigma);
  const double tail = (t.abs() > 2 * sigma).to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(tail, kTailBeyond2Sigma, 0.002);
  // A clamped normal would pile 0.27% of its mass on the bounds; a truncated one puts none there.
  const double at_bounds = (t.abs() >= 3 * sigma - 1e-6).to(torch::kFloat64).mean().item<double>();
  EXPECT_LT(at_bounds, 1e-4);
}

TEST(InitTest, LinearAndEmbeddingUseTheCourseScales) {
  torch::manual_seed(2);
  Linear linear(256, 768, kCpu);
  const double sigma = std::sqrt(2.0 / (256 + 768));
  EXPECT_EQ(linear->weight.sizes(), (std::vector<int64_t>{768, 256}));
  EXPECT_LE(linear->weight.abs().max().item<double>(), 3 * sigma);
  EXPECT_NEAR(linear->weight.std().item<double>(), kTruncatedStdRatio * sigma, 0.01 * sigma);

  Embedding emb(1000, 256, kCpu);
  EXPECT_LE(emb->weight.abs().max().item<double>(), 3.0);
  EXPECT_NEAR(emb->weight.std().item<double>(), kTruncatedStdRatio, 0.01);
  // RMSNorm gains start at 1.
  EXPECT_TRUE(torch::equal(RMSNorm(8, kCpu)->weight, torch::ones({8})));
}

TEST(InitTest, SameSeedSameWeights) {
  const auto config = ResolvedPreset("tiny");
  torch::manual_seed(7);
  TransformerLM a(config, kCpu);
  torch::manual_seed(7);
  TransformerLM b(config, kCpu);
  torch::manual_seed(8);
  TransformerLM c(config, kCpu);
  EXPECT_TRUE(torch::equal(a->lm_head->weight, b->lm_head->weight));
  EXPECT_FALSE(torch::equal(a->lm_head->weight, c->lm_head->weight));
}

}  // namespace
}  // namespace benchd::worker
