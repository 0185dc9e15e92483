#include "worker/explicit_step.h"

#include <ATen/ExpandUtils.h>
#include <ATen/autocast_mode.h>
#include <c10/util/accumulate.h>

#include <cmath>
#include <limits>
#include <vector>

#include "worker/named_range.h"

namespace benchd::worker {
namespace {

using torch::Tensor;

// The dtype autocast runs matmuls in, or nullopt when autocast is off for the
// device (fp32 steps, and every backward).
std::optional<at::ScalarType> LowerPrecision(const torch::Device& device) {
  if (!at::autocast::is_autocast_enabled(device.type())) return std::nullopt;
  return at::autocast::get_autocast_dtype(device.type());
}

// The cast autocast's matmul and linear make of each floating operand
// (cached_cast); made here so the backward has the cast operand.
Tensor Lower(const Tensor& t, std::optional<at::ScalarType> lower) {
  if (!lower || !t.is_floating_point() || t.scalar_type() == at::kDouble ||
      t.scalar_type() == *lower) {
    return t;
  }
  return t.to(*lower);
}

// A gradient as the engine hands it to an input (validate_outputs): reduced to
// the input's shape where the op broadcast it, then cast to its dtype.
Tensor ToInput(Tensor g, at::IntArrayRef sizes, at::ScalarType dtype) {
  if (g.sizes() != sizes) g = at::sum_to(g, sizes);
  if (g.scalar_type() != dtype) g = g.to(dtype);
  return g;
}
Tensor ToInput(const Tensor& g, const Tensor& input) {
  return ToInput(g, input.sizes(), input.scalar_type());
}

// InputBuffer::accumulate: the first gradient is taken as it is; later ones
// are added, in place into a tensor nobody else holds.
void Accumulate(Tensor& buffer, Tensor g) {
  if (!buffer.defined()) {
    buffer = std::move(g);
    return;
  }
  auto sole = [](const Tensor& t) {
    return t.use_count() == 1 && t.storage().use_count() == 1 && t.is_non_overlapping_and_dense();
  };
  if (sole(buffer)) {
    buffer.add_(g);
  } else if (sole(g)) {
    buffer = g.add_(buffer);
  } else {
    buffer = buffer + g;
  }
}

// AccumulateGrad: a parameter without a gradient takes this one (a copy in
// the parameter's layout if its strides differ); one with a gradient adds it.
void AccumulateGrad(const Tensor& param, Tensor g) {
  Tensor& grad = param.mutable_grad();
  if (grad.defined()) {
    grad.add_(g);
  } else if (g.strides() == param.strides() && g.storage().use_count() == 1) {
    grad = std::move(g);
  } else {
    grad = at::empty_strided(param.sizes(), param.strides(), g.options()).copy_(g);
  }
}

// shifted = x - max(x, -1, keepdim).values, as the course's softmax and
// log-softmax subtract it: x's gradient from shifted's. SubBackward0 passes
// g to x, and -g summed over the last dim to the max; MaxBackward0 scatters
// that to the argmax (value_selecting_reduction_backward).
Tensor MaxShiftBackward(Tensor g_shifted, const Tensor& max_indices, at::IntArrayRef x_sizes,
                        at::ScalarType x_dtype) {
  std::vector<int64_t> max_sizes = x_sizes.vec();
  max_sizes.back() = 1;
  const Tensor g_max = ToInput(-g_shifted, max_sizes, x_dtype);
  Tensor g_x = ToInput(g_shifted, x_sizes, x_dtype);
  g_shifted = Tensor();
  Accumulate(g_x, at::value_selecting_reduction_backward(g_max, -1, max_indices, x_sizes, true));
  return g_x;
}

// ---- Linear: y = x Wᵀ (at::matmul folds x to 2-D and runs one mm) ----------

struct LinearSaved {
  Tensor x2;  // the folded operand the mm read ([B*T, d_in]: x, or autocast's cast of it)
  Tensor wc;  // the weight the mm read (W, or its cast)
  std::vector<int64_t> x_sizes;
  at::ScalarType x_dtype;
};

Tensor LinearForward(LinearImpl& linear, const Tensor& x, std::optional<at::ScalarType> lower,
                     LinearSaved* saved) {
  Tensor xc = Lower(x, lower), wc = Lower(linear.weight, lower);
  // at::matmul of [..., d_in] by Wᵀ: fold, mm, unfold (its should_fold path).
  std::vector<int64_t> out_sizes = xc.sizes().vec();
  out_sizes.back() = wc.size(0);
  Tensor x2 = xc.reshape({-1, xc.size(-1)});
  Tensor y = at::_unsafe_view(x2.mm(wc.t()), out_sizes);
  if (saved) *saved = {std::move(x2), std::move(wc), x.sizes().vec(), x.scalar_type()};
  return y;
}

// gy: the gradient of y (its dtype and shape). Returns x's gradient.
Tensor LinearBackward(LinearImpl& linear, LinearSaved& s, const Tensor& gy) {
  const Tensor g2 = gy.reshape({-1, gy.size(-1)});  // _unsafe_view's backward
  // MmBackward0 with mat2 = Wcᵀ (column-major): mm_mat2_backward computes
  // (gᵀ x)ᵀ, which TBackward turns back into gᵀ x, in W's layout.
  AccumulateGrad(linear.weight, ToInput(g2.t().mm(s.x2), linear.weight));
  const Tensor gx2 = g2.mm(s.wc);  // mm_mat1_backward: g (Wcᵀ)ᵀ
  const std::vector<int64_t> x_sizes = std::move(s.x_sizes);
  const at::ScalarType x_dtype = s.x_dtype;
  s = LinearSaved{};
  return ToInput(gx2.reshape(x_sizes), x_sizes, x_dtype);  // the fold's backward, the cast's
}

// ---- RMSNorm (the course's ops) --------------------------------------------

struct NormSaved {
  Tensor xf, inv, n;
  at::ScalarType in_dtype;
};

Tensor NormForward(RMSNormImpl& norm, const Tensor& x, NormSaved* saved) {
  const auto in_dtype = x.scalar_type();
  const Tensor xf = x.to(torch::kFloat32);
  const Tensor inv = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + norm.eps);
  const Tensor n = xf * inv;
  Tensor y = (norm.weight * n).to(in_dtype);
  if (saved) *saved = {xf, inv, n, in_dtype};
  return y;
}

// Adds x's gradient contributions to `gx` in the engine's order.
void NormBackward(RMSNormImpl& norm, NormSaved& s, const Tensor& gy, Tensor& gx) {
  const Tensor g0 = ToInput(gy, gy.sizes(), s.n.scalar_type());  // .to(in_dtype)'s backward
  // y0 = weight * n
  AccumulateGrad(norm.weight, ToInput(g0 * s.n, norm.weight));
  const Tensor g_n = g0 * norm.weight;
  // n = xf * inv
  Tensor g_xf = g_n * s.inv;
  const Tensor g_inv = ToInput(g_n * s.xf, s.inv);
  // inv = rsqrt(mean(xf^2) + eps): RsqrtBackward0, then MeanBackward1, PowBackward0.
  const Tensor g_ms = -0.5 * g_inv * s.inv.pow(3);
  const Tensor g_sq = g_ms.expand(s.xf.sizes()) / s.xf.size(-1);
  Tensor g_xf2 = g_sq * (2.0 * s.xf.pow(1.0));
  if (s.in_dtype == at::kFloat) {  // x.to(fp32) was x itself: both reach x
    Accumulate(gx, std::move(g_xf));
    Accumulate(gx, std::move(g_xf2));
  } else {
    Accumulate(g_xf, std::move(g_xf2));
    Accumulate(gx, g_xf.to(s.in_dtype));
  }
  s = NormSaved{};
}

// ---- RoPE (the course's ops, on [B, H, T, dk] heads) -----------------------

struct RopeSaved {
  Tensor cos, sin;
  std::vector<int64_t> x_sizes, pair_sizes;
  at::ScalarType x_dtype;
};

Tensor RopeForward(RotaryEmbeddingImpl& rope, const Tensor& x, RopeSaved* saved) {
  const int64_t head_dim = rope.head_dim();
  const auto [cos, sin] = rope.Table(x.size(-2), x.device());
  const Tensor pairs = x.unflatten(-1, {head_dim / 2, 2});
  const Tensor x1 = pairs.select(-1, 0), x2 = pairs.select(-1, 1);
  const Tensor r1 = cos * x1 - sin * x2;
  const Tensor r2 = sin * x1 + cos * x2;
  Tensor y = torch::stack({r1, r2}, -1).flatten(-2).contiguous();
  if (saved) *saved = {cos, sin, x.sizes().vec(), pairs.sizes().vec(), x.scalar_type()};
  return y;
}

// gy: [B, H, T, dk] in the output's dtype. Returns x's gradient (contiguous).
Tensor RopeBackward(RopeSaved& s, const Tensor& gy) {
  const Tensor gs = gy.reshape(at::IntArrayRef(s.pair_sizes));    // flatten's backward
  const Tensor g_r1 = gs.select(-1, 0), g_r2 = gs.select(-1, 1);  // StackBackward0
  const std::vector<int64_t> half(s.pair_sizes.begin(), s.pair_sizes.end() - 1);
  auto to_x = [&](const Tensor& g) { return ToInput(g, half, s.x_dtype); };
  // r2 = sin*x1 + cos*x2 runs first (made last), then r1 = cos*x1 - sin*x2.
  Tensor g_x2 = to_x(g_r2 * s.cos);
  Tensor g_x1 = to_x(g_r2 * s.sin);
  const Tensor neg_r1 = -g_r1;
  Accumulate(g_x2, to_x(neg_r1 * s.sin));
  Accumulate(g_x1, to_x(g_r1 * s.cos));
  // SelectBackward0 for x2 (the later select) and x1 into the pairs' gradient.
  Tensor g_pairs = at::select_backward(g_x2, s.pair_sizes, -1, 1);
  Accumulate(g_pairs, at::select_backward(g_x1, s.pair_sizes, -1, 0));
  Tensor gx = g_pairs.reshape(at::IntArrayRef(s.x_sizes));  // unflatten's backward
  s = RopeSaved{};
  return gx;
}

// ---- Attention block --------------------------------------------------------

struct AttentionSaved {
  LinearSaved q_lin, k_lin, v_lin, out_lin;
  RopeSaved q_rope, k_rope;
  // The core: scores = (q kᵀ) / sqrt(dk), masked, softmaxed, times v.
  Tensor q3, kt3;  // bmm operands of q kᵀ (after autocast's casts)
  Tensor mask, max_indices, e, sum_e;
  Tensor w3, v3;  // bmm operands of weights v
  std::vector<int64_t> q_sizes, kt_sizes, scores_sizes, v_sizes, head_sizes;
  at::ScalarType q_dtype, kt_dtype, w_dtype, v_dtype, shifted_dtype, scores_dtype;
  double scale = 1;
};

Tensor AttentionForward(CausalMultiHeadSelfAttentionImpl& attn, const Tensor& x,
                        std::optional<at::ScalarType> lower, AttentionSaved* s) {
  const int64_t batch = x.size(0), seq_len = x.size(1), d_model = x.size(2);
  const int64_t heads_n = attn.num_heads(), head_dim = d_model / heads_n;
  auto heads = [&](const Tensor& t) {
    return t.view({batch, seq_len, heads_n, head_dim}).transpose(1, 2);
  };
  RotaryEmbeddingImpl& rope = attn.rope();
  const Tensor q =
      RopeForward(rope, heads(LinearForward(*attn.q_proj, x, lower, s ? &s->q_lin : nullptr)),
                  s ? &s->q_rope : nullptr);
  const Tensor k =
      RopeForward(rope, heads(LinearForward(*attn.k_proj, x, lower, s ? &s->k_lin : nullptr)),
                  s ? &s->k_rope : nullptr);
  const Tensor v = heads(LinearForward(*attn.v_proj, x, lower, s ? &s->v_lin : nullptr));
  Tensor out;
  {
    NamedRange range("attention");
    CausalMaskCache& masks = attn.masks();
    const Tensor mask = masks.Mask(seq_len, x.device());
    const double d_k = static_cast<double>(k.size(-1));
    const Tensor kt = k.transpose(-2, -1);
    const int64_t bh = batch * heads_n;
    // at::matmul of [B, H, ...] operands: each folded to [B*H, ...] by
    // reshape (a copy where the strides do not allow a view), one bmm, unfold.
    Tensor q3, kt3, scores, masked, e, sum_e, weights, w3, v3;
    std::tuple<Tensor, Tensor> max;
    {
      NamedRange r("attention.scores");
      q3 = Lower(q, lower).reshape({bh, seq_len, head_dim});
      kt3 = Lower(kt, lower).reshape({bh, head_dim, seq_len});
      scores = at::_unsafe_view(q3.bmm(kt3), {batch, heads_n, seq_len, seq_len}) / std::sqrt(d_k);
    }
    {
      NamedRange r("attention.mask");
      masked = torch::where(mask, scores, masks.NegInf(scores.scalar_type(), scores.device()));
    }
    Tensor shifted;
    {
      NamedRange r("attention.softmax");
      max = masked.max(-1, /*keepdim=*/true);
      shifted = masked - std::get<0>(max);
      e = shifted.exp();
      sum_e = e.sum(-1, /*keepdim=*/true);
      weights = e / sum_e;
    }
    {
      NamedRange r("attention.weighted_sum");
      w3 = Lower(weights, lower).reshape({bh, seq_len, seq_len});
      v3 = Lower(v, lower).reshape({bh, seq_len, head_dim});
      out = at::_unsafe_view(w3.bmm(v3), {batch, heads_n, seq_len, head_dim});
    }
    if (s) {
      s->q3 = std::move(q3);
      s->kt3 = std::move(kt3);
      s->w3 = std::move(w3);
      s->v3 = std::move(v3);
      s->mask = mask;
      s->max_indices = std::get<1>(max);
      s->e = e;
      s->sum_e = sum_e;
      s->q_sizes = q.sizes().vec();
      s->kt_sizes = kt.sizes().vec();
      s->scores_sizes = masked.sizes().vec();
      s->v_sizes = v.sizes().vec();
      s->q_dtype = q.scalar_type();
      s->kt_dtype = kt.scalar_type();
      s->w_dtype = weights.scalar_type();
      s->v_dtype = v.scalar_type();
      s->shifted_dtype = shifted.scalar_type();
      s->scores_dtype = masked.scalar_type();
      s->scale = std::sqrt(d_k);
    }
  }
  const Tensor merged = out.transpose(1, 2).reshape({batch, seq_len, d_model}).contiguous();
  if (s) s->head_sizes = out.transpose(1, 2).sizes().vec();  // [B, T, H, dk]
  return LinearForward(*attn.output_proj, merged, lower, s ? &s->out_lin : nullptr);
}

// gy: the block's attention output gradient (the output's dtype). Adds the
// input's gradient contributions to `gx` in the engine's order (v, k, q).
void AttentionBackward(CausalMultiHeadSelfAttentionImpl& attn, AttentionSaved& s, const Tensor& gy,
                       Tensor& gx) {
  const int64_t bh = s.q3.size(0), seq_len = s.q3.size(1), head_dim = s.q3.size(2);
  const int64_t batch = s.head_sizes[0], d_model = s.head_sizes[2] * head_dim;
  // out.transpose(1, 2).reshape(...): _unsafe_view, clone, transpose backward.
  const Tensor g_merged = LinearBackward(*attn.output_proj, s.out_lin, gy);
  const Tensor g_out = g_merged.reshape(at::IntArrayRef(s.head_sizes)).transpose(1, 2);
  // out = weights @ v (BmmBackward0 after the batch fold)
  const Tensor g_out3 = g_out.reshape({bh, seq_len, head_dim});
  const Tensor g_w3 = g_out3.bmm(s.v3.transpose(1, 2));
  const Tensor g_v3 = s.w3.transpose(1, 2).bmm(g_out3);
  s.w3 = s.v3 = Tensor();
  // v's path: the cast, then heads()'s transpose and view.
  const Tensor g_v = ToInput(g_v3.reshape(at::IntArrayRef(s.v_sizes)), s.v_sizes, s.v_dtype);
  // The softmax: weights = e / sum_e (DivBackward0), sum (SumBackward1), exp.
  const Tensor g_w =
      ToInput(g_w3.reshape(at::IntArrayRef(s.scores_sizes)), s.scores_sizes, s.w_dtype);
  Tensor g_e = g_w / s.sum_e;
  const Tensor g_sum = ToInput(-g_w * ((s.e / s.sum_e) / s.sum_e), s.sum_e);
  Accumulate(g_e, g_sum.expand(s.e.sizes()));
  Tensor g_shifted = ToInput(g_e * s.e, s.scores_sizes, s.shifted_dtype);
  s.e = s.sum_e = Tensor();
  Tensor g_masked =
      MaxShiftBackward(std::move(g_shifted), s.max_indices, s.scores_sizes, s.scores_dtype);
  // masked = where(mask, scores, -inf); scores = (q kᵀ) / sqrt(dk)
  const Tensor g_scores = at::where(s.mask, g_masked, at::Scalar(0));
  g_masked = Tensor();
  const Tensor g_qk3 = (g_scores / s.scale).reshape({bh, seq_len, seq_len});
  const Tensor g_q3 = g_qk3.bmm(s.kt3.transpose(1, 2));
  const Tensor g_kt3 = s.q3.transpose(1, 2).bmm(g_qk3);
  s.q3 = s.kt3 = Tensor();
  const Tensor g_q = ToInput(g_q3.reshape(at::IntArrayRef(s.q_sizes)), s.q_sizes, s.q_dtype);
  const Tensor g_k =
      ToInput(g_kt3.reshape(at::IntArrayRef(s.kt_sizes)), s.kt_sizes, s.kt_dtype).transpose(-2, -1);
  // heads(): view [B, T, H, dk] then transpose(1, 2); its backward reshapes.
  auto unheads = [&](const Tensor& g) {
    return g.transpose(1, 2).reshape({batch, seq_len, d_model});
  };
  Accumulate(gx, LinearBackward(*attn.v_proj, s.v_lin, unheads(g_v)));
  Accumulate(gx, LinearBackward(*attn.k_proj, s.k_lin, unheads(RopeBackward(s.k_rope, g_k))));
  Accumulate(gx, LinearBackward(*attn.q_proj, s.q_lin, unheads(RopeBackward(s.q_rope, g_q))));
  s = AttentionSaved{};
}

// ---- SwiGLU: w2(silu(w1 x) * w3 x), silu(a) = a * sigmoid(a) -----------------

struct SwiGluSaved {
  LinearSaved w1, w2, w3;
  Tensor a, sig, silu, b;
};

Tensor SwiGluForward(SwiGLUImpl& ffn, const Tensor& x, std::optional<at::ScalarType> lower,
                     SwiGluSaved* s) {
  const Tensor a = LinearForward(*ffn.w1, x, lower, s ? &s->w1 : nullptr);
  const Tensor sig = torch::sigmoid(a);
  const Tensor silu = a * sig;
  const Tensor b = LinearForward(*ffn.w3, x, lower, s ? &s->w3 : nullptr);
  Tensor y = LinearForward(*ffn.w2, silu * b, lower, s ? &s->w2 : nullptr);
  if (s) {
    s->a = a;
    s->sig = sig;
    s->silu = silu;
    s->b = b;
  }
  return y;
}

void SwiGluBackward(SwiGLUImpl& ffn, SwiGluSaved& s, const Tensor& gy, Tensor& gx) {
  const Tensor g_p = LinearBackward(*ffn.w2, s.w2, gy);
  // p = silu * b
  const Tensor g_silu = ToInput(g_p * s.b, s.silu);
  const Tensor g_b = ToInput(g_p * s.silu, s.b);
  // silu = a * sig (runs before sigmoid's backward)
  Tensor g_a = ToInput(g_silu * s.sig, s.a);
  const Tensor g_sig = ToInput(g_silu * s.a, s.sig);
  Accumulate(g_a, ToInput(at::sigmoid_backward(g_sig, s.sig), s.a));
  s.a = s.sig = s.silu = s.b = Tensor();
  Accumulate(gx, LinearBackward(*ffn.w3, s.w3, g_b));
  Accumulate(gx, LinearBackward(*ffn.w1, s.w1, g_a));
}

// ---- Block: h = x + attn(ln1(x)); y = h + ffn(ln2(h)) -----------------------

struct BlockSaved {
  NormSaved ln1, ln2;
  AttentionSaved attn;
  SwiGluSaved ffn;
  std::vector<int64_t> attn_sizes, ffn_sizes;
  at::ScalarType attn_dtype, ffn_dtype;
};

Tensor BlockForward(TransformerBlockImpl& block, const Tensor& x,
                    std::optional<at::ScalarType> lower, BlockSaved* s) {
  const Tensor a = AttentionForward(*block.attn, NormForward(*block.ln1, x, s ? &s->ln1 : nullptr),
                                    lower, s ? &s->attn : nullptr);
  const Tensor h = x + a;
  const Tensor f = SwiGluForward(*block.ffn, NormForward(*block.ln2, h, s ? &s->ln2 : nullptr),
                                 lower, s ? &s->ffn : nullptr);
  if (s) {
    s->attn_sizes = a.sizes().vec();
    s->attn_dtype = a.scalar_type();
    s->ffn_sizes = f.sizes().vec();
    s->ffn_dtype = f.scalar_type();
  }
  return h + f;
}

// gy in y's dtype. Returns x's gradient.
Tensor BlockBackward(TransformerBlockImpl& block, BlockSaved& s, const Tensor& gy) {
  // y = h + f: h takes gy as it is; f's share is cast to f's dtype.
  Tensor g_h = gy;
  {
    Tensor g_ln2;
    SwiGluBackward(*block.ffn, s.ffn, ToInput(gy, s.ffn_sizes, s.ffn_dtype), g_ln2);
    NormBackward(*block.ln2, s.ln2, g_ln2, g_h);
  }
  Tensor g_x = g_h;
  {
    Tensor g_ln1;
    AttentionBackward(*block.attn, s.attn, ToInput(g_h, s.attn_sizes, s.attn_dtype), g_ln1);
    g_h = Tensor();
    NormBackward(*block.ln1, s.ln1, g_ln1, g_x);
  }
  return g_x;
}

// ---- Loss: the course's cross-entropy over log-softmax ----------------------

struct LossSaved {
  Tensor logits_max_indices, e, sum_e, targets;
  std::vector<int64_t> logits_sizes, nll_sizes, gathered_sizes, l_sizes;
  at::ScalarType logits_dtype, shifted_dtype, log_dtype;
  Tensor loss;
};

Tensor LossForward(const Tensor& logits, const Tensor& targets, LossSaved* s) {
  // LogSoftmax: shifted = x - max; shifted - log(sum(exp(shifted)))
  auto max = logits.max(-1, /*keepdim=*/true);
  const Tensor shifted = logits - std::get<0>(max);
  const Tensor e = shifted.exp();
  const Tensor sum_e = e.sum(-1, /*keepdim=*/true);
  const Tensor l = sum_e.log();
  const Tensor nll = -(shifted - l);
  const Tensor index = targets.unsqueeze(-1);
  const Tensor gathered = nll.gather(-1, index);
  Tensor loss = gathered.mean();
  if (s) {
    s->logits_max_indices = std::get<1>(max);
    s->e = e;
    s->sum_e = sum_e;
    s->targets = index;
    s->logits_sizes = logits.sizes().vec();
    s->nll_sizes = nll.sizes().vec();
    s->gathered_sizes = gathered.sizes().vec();
    s->l_sizes = l.sizes().vec();
    s->logits_dtype = logits.scalar_type();
    s->shifted_dtype = shifted.scalar_type();
    s->log_dtype = l.scalar_type();
    s->loss = loss;
  }
  return loss;
}

// Returns the logits' gradient, seeded with ones as loss.backward() seeds.
Tensor LossBackward(LossSaved& s) {
  const Tensor g_loss = at::ones_like(s.loss, LEGACY_CONTIGUOUS_MEMORY_FORMAT);
  // mean: expand / numel
  const Tensor g_gathered =
      g_loss.expand(at::IntArrayRef(s.gathered_sizes)) / c10::multiply_integers(s.gathered_sizes);
  // gather's backward: zeros, then scatter_add_
  Tensor g_nll = g_gathered.new_zeros(at::IntArrayRef(s.nll_sizes));
  g_nll.scatter_add_(-1, s.targets, g_gathered);
  // nll = -ls; ls = shifted - l
  const Tensor g_ls = g_nll.neg();
  Tensor g_shifted = ToInput(g_ls, s.nll_sizes, s.shifted_dtype);
  const Tensor g_l = ToInput(-g_ls, s.l_sizes, s.log_dtype);
  // l = log(sum_e); sum_e = sum(e); e = exp(shifted)
  const Tensor g_sum = g_l.div(s.sum_e);
  const Tensor g_e = g_sum.expand(s.e.sizes());
  Accumulate(g_shifted, ToInput(g_e * s.e, s.nll_sizes, s.shifted_dtype));
  Tensor g_logits =
      MaxShiftBackward(std::move(g_shifted), s.logits_max_indices, s.logits_sizes, s.logits_dtype);
  s = LossSaved{};
  return g_logits;
}

}  // namespace

struct ExplicitStep::Saved {
  Tensor token_ids;
  std::vector<BlockSaved> blocks;
  NormSaved ln_final;
  LinearSaved lm_head;
  LossSaved loss;
};

std::string ExplicitStep::Unsupported(const TransformerLMImpl& model) {
  for (const auto& layer : model.layers) {
    if (layer->attn->attention() != v1::ATTENTION_IMPL_FAITHFUL)
      return "attention other than faithful";
    if (layer->ln1->fused || layer->ln2->fused || layer->ffn->fused || layer->attn->rope().fused) {
      return "fused_ops";
    }
    for (const auto* linear :
         {&*layer->attn->q_proj, &*layer->attn->k_proj, &*layer->attn->v_proj,
          &*layer->attn->output_proj, &*layer->ffn->w1, &*layer->ffn->w2, &*layer->ffn->w3}) {
      if (linear->weight_copy.defined()) return "weight_copies";
    }
  }
  if (model.ln_final->fused) return "fused_ops";
  if (model.lm_head->weight_copy.defined()) return "weight_copies";
  return "";
}

ExplicitStep::ExplicitStep(TransformerLMImpl& model) : model_(model) {}
ExplicitStep::~ExplicitStep() = default;

Tensor ExplicitStep::Forward(const Tensor& token_ids, const Tensor& targets, bool keep_for_backward,
                             Tensor* logits_out) {
  TORCH_CHECK(Unsupported(model_).empty(), "ExplicitStep: the model runs ", Unsupported(model_),
              ", which needs autograd");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  saved_.reset();
  std::unique_ptr<Saved> s = keep_for_backward ? std::make_unique<Saved>() : nullptr;
  const auto lower = LowerPrecision(token_ids.device());
  Tensor x = model_.token_embeddings->weight.index({token_ids});
  if (s) {
    s->token_ids = token_ids;
    s->blocks.resize(model_.layers.size());
  }
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    x = BlockForward(*model_.layers[i], x, lower, s ? &s->blocks[i] : nullptr);
  }
  Tensor logits =
      LinearForward(*model_.lm_head, NormForward(*model_.ln_final, x, s ? &s->ln_final : nullptr),
                    lower, s ? &s->lm_head : nullptr);
  x = Tensor();
  Tensor loss = LossForward(logits, targets, s ? &s->loss : nullptr);
  if (logits_out) *logits_out = logits;
  saved_ = std::move(s);
  return loss;
}

void ExplicitStep::Backward(const GradsReady& grads_ready) {
  TORCH_CHECK(saved_,
              "ExplicitStep::Backward: no forward kept for backward (Forward with "
              "keep_for_backward first; each forward can be backpropagated once)");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  std::unique_ptr<Saved> s = std::move(saved_);
  auto ready = [&grads_ready](const torch::nn::Module& module) {
    if (grads_ready) grads_ready(module.parameters());
  };
  const Tensor g_logits = LossBackward(s->loss);
  Tensor g_x;
  NormBackward(*model_.ln_final, s->ln_final, LinearBackward(*model_.lm_head, s->lm_head, g_logits),
               g_x);
  ready(*model_.lm_head);
  ready(*model_.ln_final);
  for (size_t i = model_.layers.size(); i-- > 0;) {
    g_x = BlockBackward(*model_.layers[i], s->blocks[i], g_x);
    ready(*model_.layers[i]);
  }
  // IndexBackward0: index_put_ with accumulation into zeros.
  const Tensor& table = model_.token_embeddings->weight;
  Tensor g_table = g_x.new_zeros(table.sizes(), table.options());
  c10::List<std::optional<Tensor>> indices;
  indices.push_back(s->token_ids);
  at::_index_put_impl_(g_table, indices, g_x, /*accumulate=*/true, /*unsafe=*/true);
  g_x = Tensor();
  AccumulateGrad(table, std::move(g_table));
  ready(*model_.token_embeddings);
}

}  // namespace benchd::worker
