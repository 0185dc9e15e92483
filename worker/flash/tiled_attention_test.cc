#include "worker/flash/tiled_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace benchd::worker {
namespace {

// The course's attention in float64 with autograd: softmax(Q Kᵀ·scale +
// mask) V, its logsumexp, and the gradients of sum(O ∘ dO).
struct Reference {
  torch::Tensor out, lse, dq, dk, dv;
};

Reference Reference64(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const torch::Tensor& grad_out, bool causal) {
  auto q64 = q.to(torch::kFloat64).requires_grad_();
  auto k64 = k.to(torch::kFloat64).requires_grad_();
  auto v64 = v.to(torch::kFloat64).requires_grad_();
  auto s = torch::matmul(q64, k64.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    auto mask = torch::ones({q.size(-2), k.size(-2)}, torch::kBool).triu(1);
    s = s.masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  auto out = torch::matmul(torch::softmax(s, -1), v64);
  (out * grad_out.to(torch::kFloat64)).sum().backward();
  return {out.detach(), torch::logsumexp(s, -1).detach(), q64.grad(), k64.grad(), v64.grad()};
}

// max |a − b| over max(max |b|, 1): relative for these O(1)..O(10) tensors,
// absolute where b is exactly 0 (one key: dQ and dK vanish, and fp32
// rounding of dP − D leaves ~1e-7 in them).
double RelativeTo64(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1.0);
  return (a.to(torch::kFloat64) - b).abs().max().item<double>() / scale;
}

struct Case {
  int64_t batch, heads, sq, sk, d, q_tile, k_tile;
  bool causal;
};

std::string Name(const Case& c, torch::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " B" + std::to_string(c.batch) + " H" +
         std::to_string(c.heads) + " Sq" + std::to_string(c.sq) + " Sk" + std::to_string(c.sk) +
         " d" + std::to_string(c.d) + " tiles " + std::to_string(c.q_tile) + "x" +
         std::to_string(c.k_tile) + (c.causal ? " causal" : "");
}

TEST(TiledAttentionTest, MatchesTheCoursesAttentionForwardAndBackward) {
  const Case cases[] = {
      {1, 1, 16, 16, 16, 16, 16, false},  // one tile
      {2, 3, 37, 37, 16, 16, 16, true},   // partial last tiles, causal
      {2, 3, 37, 37, 16, 16, 32, false},  // tiles of two sizes
      {1, 2, 50, 23, 32, 16, 16, false},  // more queries than keys
      {1, 2, 9, 70, 8, 16, 16, false},    // fewer queries than a tile
      {1, 4, 100, 100, 64, 32, 16, true}, {2, 2, 1, 1, 16, 16, 16, true},  // one token
  };
  // Per dtype: the tiled result is computed in fp32 from the inputs as they
  // are and rounded to the dtype at the end; the reference sees the same
  // (rounded) inputs in float64.
  const std::pair<torch::ScalarType, double> dtypes[] = {{torch::kFloat32, 2e-5},
                                                         {torch::kBFloat16, 1.6e-2}};
  torch::manual_seed(3);
  for (const auto& [dtype, tol] : dtypes) {
    for (const auto& c : cases) {
      auto opts = torch::TensorOptions().dtype(dtype);
      auto q = torch::randn({c.batch, c.heads, c.sq, c.d}, opts);
      auto k = torch::randn({c.batch, c.heads, c.sk, c.d}, opts);
      auto v = torch::randn({c.batch, c.heads, c.sk, c.d}, opts);
      auto g = torch::randn({c.batch, c.heads, c.sq, c.d}, opts);
      TiledAttentionOptions o;
      o.q_tile = c.q_tile;
      o.k_tile = c.k_tile;
      o.causal = c.causal;
      const auto fwd = TiledAttentionForward(q, k, v, o);
      const auto grads = TiledAttentionBackward(q, k, v, fwd.out, fwd.lse, g, o);
      const auto ref = Reference64(q, k, v, g, c.causal);
      const std::string what = Name(c, dtype);
      EXPECT_EQ(fwd.out.scalar_type(), dtype) << what;
      EXPECT_EQ(fwd.lse.scalar_type(), torch::kFloat32) << what;
      EXPECT_EQ(grads.dq.scalar_type(), dtype) << what;
      EXPECT_LT(RelativeTo64(fwd.out, ref.out), tol) << what << ": O";
      EXPECT_LT(RelativeTo64(fwd.lse, ref.lse), 2e-6) << what << ": L";
      EXPECT_LT(RelativeTo64(grads.dq, ref.dq), tol) << what << ": dQ";
      EXPECT_LT(RelativeTo64(grads.dk, ref.dk), tol) << what << ": dK";
      EXPECT_LT(RelativeTo64(grads.dv, ref.dv), tol) << what << ": dV";
    }
  }
}

TEST(TiledAttentionTest, AgreesWithSdpasMathBackend) {
  torch::manual_seed(5);
  auto q = torch::randn({2, 4, 45, 32});
  auto k = torch::randn({2, 4, 45, 32});
  auto v = torch::randn({2, 4, 45, 32});
  for (bool causal : {false, true}) {
    TiledAttentionOptions o;
    o.q_tile = 16;
    o.k_tile = 32;
    o.causal = causal;
    auto sdpa = std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, {}, 0.0, causal));
    EXPECT_LT(RelativeTo64(TiledAttentionForward(q, k, v, o).out, sdpa.to(torch::kFloat64)), 1e-5)
        << (causal ? "causal" : "not causal");
  }
}

TEST(TiledAttentionTest, AutogradRunsTheTiledBackward) {
  torch::manual_seed(9);
  auto q = torch::randn({2, 3, 40, 16}).requires_grad_();
  auto k = torch::randn({2, 3, 40, 16}).requires_grad_();
  auto v = torch::randn({2, 3, 40, 16}).requires_grad_();
  auto g = torch::randn({2, 3, 40, 16});
  auto out =
      TiledAttention(q, k, v, TiledAttentionOptions{.q_tile = 16, .k_tile = 16, .causal = true});
  (out * g).sum().backward();
  const auto ref = Reference64(q.detach(), k.detach(), v.detach(), g, /*causal=*/true);
  EXPECT_LT(RelativeTo64(out.detach(), ref.out), 2e-5);
  EXPECT_LT(RelativeTo64(q.grad(), ref.dq), 2e-5);
  EXPECT_LT(RelativeTo64(k.grad(), ref.dk), 2e-5);
  EXPECT_LT(RelativeTo64(v.grad(), ref.dv), 2e-5);
}

TEST(TiledAttentionTest, BadOptionsAreNamed) {
  auto q = torch::randn({1, 1, 8, 16});
  auto k = torch::randn({1, 1, 9, 16});
  auto expect_error = [](const std::function<void()>& f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "no error; wanted one naming " << text;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  TiledAttentionOptions small;
  small.q_tile = 8;
  expect_error([&] { TiledAttentionForward(q, q, q, small); }, "q_tile must be >= 16, got 8");
  TiledAttentionOptions causal;
  causal.causal = true;
  expect_error([&] { TiledAttentionForward(q, k, k, causal); },
               "causal needs as many queries as keys, got 8 and 9");
  expect_error([&] { TiledAttentionForward(q, k, q, {}); }, "k and v differ");
}

}  // namespace
}  // namespace benchd::worker
