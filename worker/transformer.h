// The CS336 Transformer LM (assignment 1's cs336_basics model) as LibTorch
// modules. Every computation is written out the way the course's reference
// writes it (its softmax, RMSNorm, RoPE, SwiGLU and cross-entropy), so our
// timings measure the same kernels a student's Python run launches.
#ifndef BENCHD_WORKER_TRANSFORMER_H_
#define BENCHD_WORKER_TRANSFORMER_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd::worker {

// Fills `t` in place with N(0, std²) truncated to [a, b], by inverse-CDF
// sampling exactly as torch.nn.init.trunc_normal_ does (LibTorch's C++ API has
// no trunc_normal_).
void TruncatedNormal_(torch::Tensor t, double std, double a, double b);

// x - max, exp, / sum: the course's softmax (not at::softmax's fused kernel).
torch::Tensor Softmax(const torch::Tensor& x, int64_t dim);
// The course's log-softmax: (x - max) - log(sum(exp(x - max))).
torch::Tensor LogSoftmax(const torch::Tensor& x, int64_t dim);
// Mean over all positions of -log_softmax(logits)[target].
torch::Tensor CrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets);
// x * sigmoid(x).
torch::Tensor Silu(const torch::Tensor& x);
// [T, T] bool, true where key <= query (the positions a query may attend to).
torch::Tensor CausalMask(int64_t seq_len, const torch::Device& device);
// softmax(Q Kᵀ / sqrt(d_k), masked to -inf where `mask` is false) V.
// `mask` may be undefined (no masking). With `masks`, the -inf comes from
// its NegInf; without, `where` makes one from a scalar (a fill per call).
class CausalMaskCache;
torch::Tensor ScaledDotProductAttention(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& mask,
                                        CausalMaskCache* masks = nullptr);

// The causal mask and the -inf that masked scores take, built once and shared
// by every layer, as the RoPE table is. The course builds them in each layer:
// an arange, a compare and where's scalar fill, three small kernels and their
// launches per layer in steps bound by launches. Same values, same `where`.
class CausalMaskCache {
 public:
  // CausalMask(seq_len, device), rebuilt when the length or device changes.
  torch::Tensor Mask(int64_t seq_len, const torch::Device& device);
  // A 0-dim -inf of `dtype` on `device`: in the scores' own dtype, so that
  // `where` uses it as it is (another dtype would be cast on every call).
  torch::Tensor NegInf(at::ScalarType dtype, const torch::Device& device);

 private:
  torch::Tensor mask_;
  std::vector<torch::Tensor> neg_inf_;  // one per (dtype, device) seen
};

// y = x Wᵀ, W [d_out, d_in], no bias; W ~ truncated N(0, 2/(d_in+d_out)) at ±3 std.
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t d_in, int64_t d_out, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
  // With the weight_copies option: `weight` in bf16/fp16, a leaf that
  // requires grad, which forward uses instead of `weight` (so autocast has
  // nothing to cast). Not a registered parameter: the optimizer updates the
  // fp32 `weight` from this copy's gradient and rewrites it. Undefined
  // otherwise.
  torch::Tensor weight_copy;
};
TORCH_MODULE(Linear);

// Row lookup in a [vocab, d_model] table initialised truncated N(0, 1) at ±3.
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t vocab_size, int64_t d_model, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& token_ids);
  torch::Tensor weight;
};
TORCH_MODULE(Embedding);

// x / rms(x) * g, computed in fp32 and cast back to the input's dtype.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t d_model, const torch::TensorOptions& options, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;
  double eps;
  // fused_ops: at::rms_norm on the fp32 input (one kernel each way on CUDA)
  // instead of the course's pow, mean, rsqrt and products.
  bool fused = false;
};
TORCH_MODULE(RMSNorm);

// Rotary position embedding on interleaved pairs (x[2i], x[2i+1]) of the last
// dimension, for positions 0..T-1 (T = x.size(-2)). Has no parameters; the
// cos/sin table is cached per device and grown on demand, since the model is
// resident and serves any context length.
class RotaryEmbeddingImpl : public torch::nn::Module {
 public:
  RotaryEmbeddingImpl(int64_t head_dim, double theta);
  torch::Tensor forward(const torch::Tensor& x);
  // The (cos, sin) table for positions 0..seq_len-1 on `device`, each
  // [seq_len, head_dim/2] fp32 (views of the cache, built or grown here).
  std::pair<torch::Tensor, torch::Tensor> Table(int64_t seq_len, const torch::Device& device);
  int64_t head_dim() const { return head_dim_; }
  // fused_ops: on CUDA, FusedRope (worker/rope.h), one kernel each way; the
  // course's ops elsewhere.
  bool fused = false;

 private:
  int64_t head_dim_;
  double theta_;
  torch::Tensor cos_, sin_;            // [cached_len, head_dim/2], fp32
  torch::Tensor cos_view_, sin_view_;  // their first rows, as Table last returned them
};
TORCH_MODULE(RotaryEmbedding);

class CausalMultiHeadSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalMultiHeadSelfAttentionImpl(int64_t d_model, int64_t num_heads, RotaryEmbedding rope,
                                   std::shared_ptr<CausalMaskCache> masks,
                                   const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  // ATTENTION_IMPL_FAITHFUL (the default): ScaledDotProductAttention above. Any
  // ATTENTION_IMPL_SDPA*: at::scaled_dot_product_attention(is_causal) on the same
  // q, k, v (worker/attention_backend.h); which kernel runs is chosen by the
  // process-wide SDPA switches (SdpBackendGuard). ATTENTION_IMPL_TILED:
  // TiledAttention (worker/flash/tiled_attention.h); ATTENTION_IMPL_FUSED:
  // benchd's CUDA kernels, FusedAttention (worker/flash/fused_attention.h).
  // A per-job runtime switch.
  void set_attention(v1::AttentionImpl attention) { attention_ = attention; }
  v1::AttentionImpl attention() const { return attention_; }
  RotaryEmbeddingImpl& rope() { return *rope_; }
  const RotaryEmbeddingImpl& rope() const { return *rope_; }
  CausalMaskCache& masks() { return *masks_; }
  int64_t num_heads() const { return num_heads_; }
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, output_proj{nullptr};

 private:
  int64_t num_heads_;
  v1::AttentionImpl attention_ = v1::ATTENTION_IMPL_FAITHFUL;
  RotaryEmbedding rope_;  // shared by all layers, not registered (it has no state to save)
  std::shared_ptr<CausalMaskCache> masks_;  // shared by all layers
};
TORCH_MODULE(CausalMultiHeadSelfAttention);

// w2(silu(w1 x) * w3 x).
class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t d_model, int64_t d_ff, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
  bool fused = false;  // fused_ops: at::silu (one kernel) for x * sigmoid(x)
};
TORCH_MODULE(SwiGLU);

// Pre-norm block: h = x + attn(ln1(x)); y = h + ffn(ln2(h)).
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int64_t d_model, int64_t num_heads, int64_t d_ff, RotaryEmbedding rope,
                       std::shared_ptr<CausalMaskCache> masks, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  RMSNorm ln1{nullptr}, ln2{nullptr};
  CausalMultiHeadSelfAttention attn{nullptr};
  SwiGLU ffn{nullptr};
};
TORCH_MODULE(TransformerBlock);

// token_embeddings -> layers -> ln_final -> lm_head (untied). Parameter names
// follow cs336_basics ("layers.0.attn.q_proj.weight", ...).
class TransformerLMImpl : public torch::nn::Module {
 public:
  // `config` must be resolved (benchd::ResolveModelConfig). Parameters are
  // created and initialised with `options` (fp32 on the target device; the
  // meta device allocates nothing, for counting).
  TransformerLMImpl(const v1::ModelConfig& config, const torch::TensorOptions& options);
  // [B, T] int64 token ids -> [B, T, vocab] logits.
  torch::Tensor forward(const torch::Tensor& token_ids);
  // Sets every layer's attention implementation (see CausalMultiHeadSelfAttentionImpl).
  void SetAttention(v1::AttentionImpl attention);
  // The fused_ops option (RMSNorm, SiLU, RoPE; see each module), on or off.
  void SetFusedOps(bool fused);
  // The weight_copies option: gives every Linear a weight_copy in `dtype`
  // (round-to-nearest, as autocast's cast) and returns the (fp32 weight,
  // copy) pairs for the optimizer. DropWeightCopies frees them again.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> MakeWeightCopies(at::ScalarType dtype);
  void DropWeightCopies();
  // Module::zero_grad, and the weight copies' gradients too.
  void zero_grad(bool set_to_none = true) override;

  Embedding token_embeddings{nullptr};
  std::vector<TransformerBlock> layers;
  RMSNorm ln_final{nullptr};
  Linear lm_head{nullptr};

 private:
  std::vector<LinearImpl*> linears_;  // every Linear, found once (zero_grad runs every step)
};
TORCH_MODULE(TransformerLM);

// Sum of numel over the module's parameters.
int64_t CountParameters(const torch::nn::Module& module);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_TRANSFORMER_H_
