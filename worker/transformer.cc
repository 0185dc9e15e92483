#include "worker/transformer.h"

#include <cmath>
#include <limits>
#include <string>

#include "worker/attention_backend.h"
#include "worker/flash/fused_attention.h"
#include "worker/flash/tiled_attention.h"
#include "worker/named_range.h"
#include "worker/rope.h"

namespace benchd::worker {

void TruncatedNormal_(torch::Tensor t, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  // Draw u uniform on [cdf(a), cdf(b)] (as 2u-1 in erf space) and map it back
  // through the inverse CDF: an exact sample of the truncated distribution.
  // The clamp only catches erfinv rounding at the ends.
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = cdf(a / std), hi = cdf(b / std);
  t.uniform_(2 * lo - 1, 2 * hi - 1);
  t.erfinv_();
  t.mul_(std * std::sqrt(2.0));
  t.clamp_(a, b);
}

torch::Tensor Softmax(const torch::Tensor& x, int64_t dim) {
  const torch::Tensor shifted = x - std::get<0>(x.max(dim, /*keepdim=*/true));
  const torch::Tensor e = shifted.exp();
  return e / e.sum(dim, /*keepdim=*/true);
}

torch::Tensor LogSoftmax(const torch::Tensor& x, int64_t dim) {
  const torch::Tensor shifted = x - std::get<0>(x.max(dim, /*keepdim=*/true));
  return shifted - shifted.exp().sum(dim, /*keepdim=*/true).log();
}

torch::Tensor CrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  const torch::Tensor nll = -LogSoftmax(logits, -1);
  return nll.gather(-1, targets.unsqueeze(-1)).mean();
}

torch::Tensor Silu(const torch::Tensor& x) { return x * torch::sigmoid(x); }

torch::Tensor CausalMask(int64_t seq_len, const torch::Device& device) {
  const torch::Tensor pos = torch::arange(seq_len, torch::TensorOptions().device(device));
  return pos.unsqueeze(1) >= pos.unsqueeze(0);  // [query, key]
}

torch::Tensor CausalMaskCache::Mask(int64_t seq_len, const torch::Device& device) {
  if (!mask_.defined() || mask_.size(0) != seq_len || mask_.device() != device) {
    mask_ = CausalMask(seq_len, device);
  }
  return mask_;
}

torch::Tensor CausalMaskCache::NegInf(at::ScalarType dtype, const torch::Device& device) {
  for (const torch::Tensor& t : neg_inf_) {
    if (t.scalar_type() == dtype && t.device() == device) return t;
  }
  neg_inf_.push_back(torch::full({}, -std::numeric_limits<double>::infinity(),
                                 torch::TensorOptions().dtype(dtype).device(device)));
  return neg_inf_.back();
}

// Each part is a named range, so a profile can set softmax's time against
// the matmuls' (the profile request's attention table).
torch::Tensor ScaledDotProductAttention(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& mask,
                                        CausalMaskCache* masks) {
  const double d_k = static_cast<double>(k.size(-1));
  torch::Tensor scores, weights;
  {
    NamedRange range("attention.scores");
    scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(d_k);
  }
  if (mask.defined()) {
    NamedRange range("attention.mask");
    scores = masks
                 ? torch::where(mask, scores, masks->NegInf(scores.scalar_type(), scores.device()))
                 : torch::where(mask, scores, -std::numeric_limits<double>::infinity());
  }
  {
    NamedRange range("attention.softmax");
    weights = Softmax(scores, -1);
  }
  NamedRange range("attention.weighted_sum");
  return torch::matmul(weights, v);
}

LinearImpl::LinearImpl(int64_t d_in, int64_t d_out, const torch::TensorOptions& options) {
  const double std = std::sqrt(2.0 / static_cast<double>(d_in + d_out));
  torch::Tensor w = torch::empty({d_out, d_in}, options);
  TruncatedNormal_(w, std, -3 * std, 3 * std);
  weight = register_parameter("weight", w);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  return torch::linear(x, weight_copy.defined() ? weight_copy : weight);
}

EmbeddingImpl::EmbeddingImpl(int64_t vocab_size, int64_t d_model,
                             const torch::TensorOptions& options) {
  torch::Tensor w = torch::empty({vocab_size, d_model}, options);
  TruncatedNormal_(w, 1.0, -3.0, 3.0);
  weight = register_parameter("weight", w);
}

// weight[token_ids] (an index op, as the course writes it; its backward is
// index_put with accumulation).
torch::Tensor EmbeddingImpl::forward(const torch::Tensor& token_ids) {
  return weight.index({token_ids});
}

RMSNormImpl::RMSNormImpl(int64_t d_model, const torch::TensorOptions& options, double eps)
    : eps(eps) {
  weight = register_parameter("weight", torch::ones({d_model}, options));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto in_dtype = x.scalar_type();
  const torch::Tensor xf = x.to(torch::kFloat32);
  if (fused) return at::rms_norm(xf, {xf.size(-1)}, weight, eps).to(in_dtype);
  const torch::Tensor inv_rms = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (weight * (xf * inv_rms)).to(in_dtype);
}

RotaryEmbeddingImpl::RotaryEmbeddingImpl(int64_t head_dim, double theta)
    : head_dim_(head_dim), theta_(theta) {
  TORCH_CHECK(head_dim % 2 == 0, "RoPE needs an even head dimension, got ", head_dim);
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbeddingImpl::Table(int64_t seq_len,
                                                                   const torch::Device& device) {
  if (!cos_.defined() || cos_.size(0) < seq_len || cos_.device() != device) {
    torch::NoGradGuard no_grad;
    // The course's table: freqs[t, i] = t * theta^(-2i/d) in fp32.
    const auto on = torch::TensorOptions().device(device);
    const torch::Tensor d = torch::arange(0, head_dim_, 2, on.dtype(torch::kInt64)) / head_dim_;
    const torch::Tensor inv_freq = torch::pow(theta_, -d);
    const torch::Tensor t = torch::arange(seq_len, on.dtype(torch::kFloat32));
    const torch::Tensor freqs = torch::outer(t, inv_freq);
    cos_ = freqs.cos();
    sin_ = freqs.sin();
    cos_view_ = sin_view_ = torch::Tensor();
  }
  // The views are kept too: every layer asks twice per step.
  if (!cos_view_.defined() || cos_view_.size(0) != seq_len) {
    cos_view_ = cos_.narrow(0, 0, seq_len);
    sin_view_ = sin_.narrow(0, 0, seq_len);
  }
  return {cos_view_, sin_view_};
}

torch::Tensor RotaryEmbeddingImpl::forward(const torch::Tensor& x) {
  const int64_t seq_len = x.size(-2);
  TORCH_CHECK(x.size(-1) == head_dim_, "RoPE built for head dim ", head_dim_, ", got ", x.size(-1));
  const auto [cos, sin] = Table(seq_len, x.device());
  if (fused && x.is_cuda()) return FusedRope(x, cos, sin);
  const torch::Tensor pairs = x.unflatten(-1, {head_dim_ / 2, 2});
  const torch::Tensor x1 = pairs.select(-1, 0), x2 = pairs.select(-1, 1);
  const torch::Tensor r1 = cos * x1 - sin * x2;
  const torch::Tensor r2 = sin * x1 + cos * x2;
  return torch::stack({r1, r2}, -1).flatten(-2).contiguous();
}

CausalMultiHeadSelfAttentionImpl::CausalMultiHeadSelfAttentionImpl(
    int64_t d_model, int64_t num_heads, RotaryEmbedding rope,
    std::shared_ptr<CausalMaskCache> masks, const torch::TensorOptions& options)
    : num_heads_(num_heads), rope_(std::move(rope)), masks_(std::move(masks)) {
  TORCH_CHECK(d_model % num_heads == 0, "d_model ", d_model, " not divisible by num_heads ",
              num_heads);
  q_proj = register_module("q_proj", Linear(d_model, d_model, options));
  k_proj = register_module("k_proj", Linear(d_model, d_model, options));
  v_proj = register_module("v_proj", Linear(d_model, d_model, options));
  output_proj = register_module("output_proj", Linear(d_model, d_model, options));
}

torch::Tensor CausalMultiHeadSelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), seq_len = x.size(1), d_model = x.size(2);
  const int64_t head_dim = d_model / num_heads_;
  // [B, T, H*dk] -> [B, H, T, dk]
  auto heads = [&](const torch::Tensor& t) {
    return t.view({batch, seq_len, num_heads_, head_dim}).transpose(1, 2);
  };
  const torch::Tensor q = rope_->forward(heads(q_proj->forward(x)));
  const torch::Tensor k = rope_->forward(heads(k_proj->forward(x)));
  const torch::Tensor v = heads(v_proj->forward(x));
  torch::Tensor out;
  {
    // The attention core, after the projections and RoPE.
    NamedRange range("attention");
    if (attention_ == v1::ATTENTION_IMPL_FAITHFUL) {
      out = ScaledDotProductAttention(q, k, v, masks_->Mask(seq_len, x.device()), masks_.get());
    } else if (attention_ == v1::ATTENTION_IMPL_TILED) {
      out = TiledAttention(q, k, v, TiledAttentionOptions{.causal = true});
    } else if (attention_ == v1::ATTENTION_IMPL_FUSED) {
      out = FusedAttention(q, k, v, /*causal=*/true);
    } else {
      out = SdpaCausalAttention(q, k, v, attention_);
    }
  }
  return output_proj->forward(out.transpose(1, 2).reshape({batch, seq_len, d_model}).contiguous());
}

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t d_ff, const torch::TensorOptions& options) {
  w1 = register_module("w1", Linear(d_model, d_ff, options));
  w2 = register_module("w2", Linear(d_ff, d_model, options));
  w3 = register_module("w3", Linear(d_model, d_ff, options));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  const torch::Tensor gate = w1->forward(x);
  return w2->forward((fused ? at::silu(gate) : Silu(gate)) * w3->forward(x));
}

TransformerBlockImpl::TransformerBlockImpl(int64_t d_model, int64_t num_heads, int64_t d_ff,
                                           RotaryEmbedding rope,
                                           std::shared_ptr<CausalMaskCache> masks,
                                           const torch::TensorOptions& options) {
  attn = register_module("attn", CausalMultiHeadSelfAttention(d_model, num_heads, std::move(rope),
                                                              std::move(masks), options));
  ffn = register_module("ffn", SwiGLU(d_model, d_ff, options));
  ln1 = register_module("ln1", RMSNorm(d_model, options));
  ln2 = register_module("ln2", RMSNorm(d_model, options));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x + attn->forward(ln1->forward(x));
  return h + ffn->forward(ln2->forward(h));
}

TransformerLMImpl::TransformerLMImpl(const v1::ModelConfig& config,
                                     const torch::TensorOptions& options) {
  const int64_t d_model = config.d_model();
  // Creation order follows cs336_basics, so one seed gives the same draw
  // sequence as the course's model built on the same device.
  token_embeddings =
      register_module("token_embeddings", Embedding(config.vocab_size(), d_model, options));
  RotaryEmbedding rope(d_model / config.num_heads(), config.rope_theta());
  auto masks = std::make_shared<CausalMaskCache>();
  torch::nn::ModuleList list;
  for (int64_t i = 0; i < config.num_layers(); ++i) {
    layers.push_back(
        TransformerBlock(d_model, config.num_heads(), config.d_ff(), rope, masks, options));
    list->push_back(layers.back());
  }
  register_module("layers", list);
  ln_final = register_module("ln_final", RMSNorm(d_model, options));
  lm_head = register_module("lm_head", Linear(d_model, config.vocab_size(), options));
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = dynamic_cast<LinearImpl*>(m.get())) linears_.push_back(linear);
  }
}

torch::Tensor TransformerLMImpl::forward(const torch::Tensor& token_ids) {
  torch::Tensor x = token_embeddings->forward(token_ids);
  for (auto& layer : layers) x = layer->forward(x);
  return lm_head->forward(ln_final->forward(x));
}

void TransformerLMImpl::SetAttention(v1::AttentionImpl attention) {
  // Unspecified is the default, faithful (a resolved spec says so already).
  if (attention == v1::ATTENTION_IMPL_UNSPECIFIED) attention = v1::ATTENTION_IMPL_FAITHFUL;
  for (auto& layer : layers) layer->attn->set_attention(attention);
}

void TransformerLMImpl::SetFusedOps(bool fused) {
  for (auto& layer : layers) {
    layer->ln1->fused = layer->ln2->fused = layer->ffn->fused = fused;
    layer->attn->rope().fused = fused;  // one module shared by all layers
  }
  ln_final->fused = fused;
}

std::vector<std::pair<torch::Tensor, torch::Tensor>> TransformerLMImpl::MakeWeightCopies(
    at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
  for (LinearImpl* linear : linears_) {
    linear->weight_copy = linear->weight.detach().to(dtype).requires_grad_(true);
    pairs.emplace_back(linear->weight, linear->weight_copy);
  }
  return pairs;
}

void TransformerLMImpl::DropWeightCopies() {
  for (LinearImpl* linear : linears_) linear->weight_copy = torch::Tensor();
}

void TransformerLMImpl::zero_grad(bool set_to_none) {
  torch::nn::Module::zero_grad(set_to_none);
  for (LinearImpl* linear : linears_) {
    torch::Tensor& copy = linear->weight_copy;
    if (!copy.defined() || !copy.grad().defined()) continue;
    if (set_to_none) {
      copy.mutable_grad().reset();
    } else {
      copy.mutable_grad().detach_();
      copy.mutable_grad().zero_();
    }
  }
}

int64_t CountParameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace benchd::worker
