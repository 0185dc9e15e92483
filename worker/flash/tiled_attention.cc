#include "worker/flash/tiled_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace benchd::worker {
namespace {

using torch::indexing::Slice;

// fp32 inside, whatever autocast the caller runs under (the model's bf16
// step): autocast would otherwise run the tiles' matmuls in bf16.
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::autocast_dispatch_keyset};
};

double ScaleOf(const torch::Tensor& q, const TiledAttentionOptions& o) {
  return o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

void Check(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
           const TiledAttentionOptions& o) {
  TORCH_CHECK(o.q_tile >= 16, "tiled attention: q_tile must be >= 16, got ", o.q_tile);
  TORCH_CHECK(o.k_tile >= 16, "tiled attention: k_tile must be >= 16, got ", o.k_tile);
  TORCH_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(),
              "tiled attention: q, k and v need the same rank (>= 2), got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "tiled attention: k and v differ: ", k.sizes(), " vs ",
              v.sizes());
  TORCH_CHECK(q.size(-1) == k.size(-1), "tiled attention: head dims differ: ", q.size(-1), " vs ",
              k.size(-1));
  TORCH_CHECK(q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2),
              "tiled attention: leading dimensions differ: ", q.sizes(), " vs ", k.sizes());
  TORCH_CHECK(!o.causal || q.size(-2) == k.size(-2),
              "tiled attention: causal needs as many queries as keys, got ", q.size(-2), " and ",
              k.size(-2));
}

// Keys of tile [k0, k1) that query tile [q0, q1) may see: none when the whole
// key tile lies above the diagonal.
bool Skipped(int64_t q1, int64_t k0, bool causal) { return causal && k0 > q1 - 1; }

// -inf where key j > query i (top-left causal), for the rows q0.. and columns k0..
torch::Tensor CausalMask(int64_t q0, int64_t rows, int64_t k0, int64_t cols,
                         const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  auto i = torch::arange(q0, q0 + rows, opts).unsqueeze(1);
  auto j = torch::arange(k0, k0 + cols, opts).unsqueeze(0);
  return j > i;
}

}  // namespace

TiledForward TiledAttentionForward(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const TiledAttentionOptions& options) {
  Check(q, k, v, options);
  torch::NoGradGuard no_grad;
  NoAutocast fp32_inside;
  const double scale = ScaleOf(q, options);
  const int64_t sq = q.size(-2), sk = k.size(-2), d = q.size(-1);
  auto lead = q.sizes().slice(0, q.dim() - 2).vec();
  auto f32 = q.options().dtype(torch::kFloat32);
  std::vector<int64_t> out_shape = lead;
  out_shape.push_back(sq);
  auto lse = torch::empty(out_shape, f32);
  out_shape.push_back(d);
  auto out = torch::empty(out_shape, q.options());
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (int64_t q0 = 0; q0 < sq; q0 += options.q_tile) {
    const int64_t q1 = std::min(sq, q0 + options.q_tile), rows = q1 - q0;
    auto qi = q.index({"...", Slice(q0, q1), Slice()}).to(torch::kFloat32);
    auto lead_rows = lead;
    lead_rows.push_back(rows);
    auto m = torch::full(lead_rows, neg_inf, f32);
    auto l = torch::zeros(lead_rows, f32);
    lead_rows.push_back(d);
    auto acc = torch::zeros(lead_rows, f32);
    for (int64_t k0 = 0; k0 < sk; k0 += options.k_tile) {
      if (Skipped(q1, k0, options.causal)) break;
      const int64_t k1 = std::min(sk, k0 + options.k_tile);
      auto kj = k.index({"...", Slice(k0, k1), Slice()}).to(torch::kFloat32);
      auto vj = v.index({"...", Slice(k0, k1), Slice()}).to(torch::kFloat32);
      auto s = torch::matmul(qi, kj.transpose(-2, -1)).mul_(scale);
      if (options.causal && k1 - 1 > q0) {
        s.masked_fill_(CausalMask(q0, rows, k0, k1 - k0, q.device()), neg_inf);
      }
      auto m_new = torch::maximum(m, std::get<0>(s.max(-1)));
      auto p = torch::exp(s - m_new.unsqueeze(-1));
      auto correction = torch::exp(m - m_new);
      l = correction * l + p.sum(-1);
      acc = correction.unsqueeze(-1) * acc + torch::matmul(p, vj);
      m = m_new;
    }
    out.index_put_({"...", Slice(q0, q1), Slice()}, (acc / l.unsqueeze(-1)).to(q.scalar_type()));
    lse.index_put_({"...", Slice(q0, q1)}, m + torch::log(l));
  }
  return {out, lse};
}

TiledGrads TiledAttentionBackward(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& out,
                                  const torch::Tensor& lse, const torch::Tensor& grad_out,
                                  const TiledAttentionOptions& options) {
  Check(q, k, v, options);
  TORCH_CHECK(out.sizes() == q.sizes() && grad_out.sizes() == q.sizes(),
              "tiled attention backward: out and grad_out must have q's shape ", q.sizes());
  torch::NoGradGuard no_grad;
  NoAutocast fp32_inside;
  const double scale = ScaleOf(q, options);
  const int64_t sq = q.size(-2), sk = k.size(-2);
  // D_i = rowsum(dO_i ∘ O_i), once for all key tiles.
  auto delta = (grad_out.to(torch::kFloat32) * out.to(torch::kFloat32)).sum(-1);
  auto dq = torch::zeros(q.sizes(), q.options().dtype(torch::kFloat32));
  auto dk = torch::zeros(k.sizes(), k.options().dtype(torch::kFloat32));
  auto dv = torch::zeros(v.sizes(), v.options().dtype(torch::kFloat32));
  // Key tiles outside, as FlashAttention-2's backward: dK and dV of a tile are
  // finished in one pass; dQ is accumulated across them.
  for (int64_t k0 = 0; k0 < sk; k0 += options.k_tile) {
    const int64_t k1 = std::min(sk, k0 + options.k_tile);
    auto kj = k.index({"...", Slice(k0, k1), Slice()}).to(torch::kFloat32);
    auto vj = v.index({"...", Slice(k0, k1), Slice()}).to(torch::kFloat32);
    auto dkj = torch::zeros_like(kj), dvj = torch::zeros_like(vj);
    for (int64_t q0 = 0; q0 < sq; q0 += options.q_tile) {
      const int64_t q1 = std::min(sq, q0 + options.q_tile), rows = q1 - q0;
      if (Skipped(q1, k0, options.causal)) continue;
      auto qi = q.index({"...", Slice(q0, q1), Slice()}).to(torch::kFloat32);
      auto doi = grad_out.index({"...", Slice(q0, q1), Slice()}).to(torch::kFloat32);
      auto s = torch::matmul(qi, kj.transpose(-2, -1)).mul_(scale);
      auto p = torch::exp(s - lse.index({"...", Slice(q0, q1)}).unsqueeze(-1));
      if (options.causal && k1 - 1 > q0) {
        p.masked_fill_(CausalMask(q0, rows, k0, k1 - k0, q.device()), 0.0);
      }
      dvj += torch::matmul(p.transpose(-2, -1), doi);
      auto dp = torch::matmul(doi, vj.transpose(-2, -1));
      auto ds = p * (dp - delta.index({"...", Slice(q0, q1)}).unsqueeze(-1));
      dq.index({"...", Slice(q0, q1), Slice()}) += torch::matmul(ds, kj).mul_(scale);
      dkj += torch::matmul(ds.transpose(-2, -1), qi).mul_(scale);
    }
    dk.index_put_({"...", Slice(k0, k1), Slice()}, dkj);
    dv.index_put_({"...", Slice(k0, k1), Slice()}, dvj);
  }
  return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type())};
}

namespace {

class TiledAttentionFunction : public torch::autograd::Function<TiledAttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, int64_t q_tile,
                               int64_t k_tile, bool causal, double scale) {
    TiledAttentionOptions o{.q_tile = q_tile, .k_tile = k_tile, .causal = causal, .scale = scale};
    TiledForward f = TiledAttentionForward(q, k, v, o);
    ctx->save_for_backward({q, k, v, f.out, f.lse});
    ctx->saved_data["q_tile"] = q_tile;
    ctx->saved_data["k_tile"] = k_tile;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return f.out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    TiledAttentionOptions o{.q_tile = ctx->saved_data["q_tile"].toInt(),
                            .k_tile = ctx->saved_data["k_tile"].toInt(),
                            .causal = ctx->saved_data["causal"].toBool(),
                            .scale = ctx->saved_data["scale"].toDouble()};
    TiledGrads g = TiledAttentionBackward(saved[0], saved[1], saved[2], saved[3], saved[4],
                                          grads[0].contiguous(), o);
    return {g.dq, g.dk, g.dv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor TiledAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const TiledAttentionOptions& options) {
  return TiledAttentionFunction::apply(q, k, v, options.q_tile, options.k_tile, options.causal,
                                       ScaleOf(q, options));
}

}  // namespace benchd::worker
