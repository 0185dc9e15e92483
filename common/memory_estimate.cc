#include "common/memory_estimate.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/limits.h"
#include "common/model_config.h"

namespace benchd {
namespace {

// Exact arithmetic: a batch x heads x context² term of the largest request
// the checks let through passes int64, never 128 bits.
using Int = __int128;

std::string Num(Int v) {
  if (v == 0) return "0";
  std::string s;
  const bool negative = v < 0;
  if (negative) v = -v;
  while (v > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  if (negative) s.push_back('-');
  return std::string(s.rbegin(), s.rend());
}

Int CeilDiv(Int x, Int by) { return (x + by - 1) / by; }

// The resolved request's numbers, and the sharding's.
struct Shape {
  Int V, d, dff, L, H, B, T, N, S, a;
  bool low;  // bf16/fp16 autocast
  v1::BenchmarkMode mode;
  bool keep;        // the forward keeps what backward needs (any mode but an explicit forward)
  Int D, t, p, Lp;  // data, tensor, pipeline degrees; layers on one device
  int zero;
  bool fsdp;
  bool sharded() const { return D > 1 || t > 1 || p > 1; }
  bool grads() const { return mode != v1::BENCHMARK_MODE_FORWARD; }
  bool adamw() const { return mode == v1::BENCHMARK_MODE_TRAIN_STEP; }
  // What ZeRO (or FSDP) shards over the data-parallel replicas.
  bool shard_params() const { return fsdp || zero >= 3; }
  bool shard_grads() const { return fsdp || zero >= 2; }
  bool shard_adamw() const { return fsdp || zero >= 1; }
};

struct Term {
  std::string name, formula;
  Int bytes = 0, per_device = 0;
};

// "what: symbolic = 4 x 1024 x 2560" and its product.
Term Product(std::string name, const std::string& what, const std::string& symbolic,
             std::initializer_list<Int> factors) {
  Term t;
  t.name = std::move(name);
  Int product = 1;
  std::vector<std::string> parts;
  for (Int f : factors) {
    product *= f;
    parts.push_back(Num(f));
  }
  t.formula = absl::StrCat(what, ": ", symbolic, " = ", absl::StrJoin(parts, " x "));
  t.bytes = t.per_device = product;
  return t;
}

// A term split over the tensor-parallel ranks (heads, d_ff or vocabulary).
Term SplitByTp(Term t, const Shape& s) {
  if (s.t > 1) {
    t.per_device = CeilDiv(t.bytes, s.t);
    absl::StrAppend(&t.formula, "; per device / tensor_parallel ", Num(s.t));
  }
  return t;
}

// The model state's terms: `elements` whole, `device_elements` on one device
// before ZeRO; `shard` when ZeRO/FSDP divides it over the replicas.
Term State(std::string name, const std::string& what, Int bytes_per_element, Int elements,
           const std::string& symbol, Int device_elements, bool shard, const Shape& s) {
  Term t = Product(std::move(name), what, absl::StrCat(Num(bytes_per_element), " B x ", symbol),
                   {bytes_per_element, elements});
  t.per_device = bytes_per_element * device_elements;
  if (shard && s.D > 1) t.per_device = CeilDiv(t.per_device, s.D);
  if (s.sharded()) {
    absl::StrAppend(&t.formula, "; per device ", Num(bytes_per_element), " x ",
                    Num(device_elements), " (this device's ", symbol, ")",
                    shard && s.D > 1 ? absl::StrCat(" / data_parallel ", Num(s.D)) : "");
  }
  return t;
}

Int Sum(const std::vector<Term>& terms, bool per_device) {
  Int total = 0;
  for (const Term& t : terms) total += per_device ? t.per_device : t.bytes;
  return total;
}

std::vector<std::string> Names(const std::vector<const Term*>& terms) {
  std::vector<std::string> names;
  for (const Term* t : terms) names.push_back(t->name);
  return names;
}

struct Phase {
  std::string name, formula;
  Int peak = 0, per_device = 0;
};

// The sum of the terms alive in a phase.
Phase Alive(std::string name, const std::vector<const Term*>& terms) {
  Phase p;
  p.name = std::move(name);
  p.formula = absl::StrJoin(Names(terms), " + ");
  for (const Term* t : terms) {
    p.peak += t->bytes;
    p.per_device += t->per_device;
  }
  return p;
}

// The larger of two candidate moments, whole and per device separately.
Phase Larger(std::string name, const Phase& x, const Phase& y) {
  Phase p;
  p.name = std::move(name);
  p.formula = absl::StrCat("max(", x.formula, "; ", y.formula, ")");
  p.peak = std::max(x.peak, y.peak);
  p.per_device = std::max(x.per_device, y.per_device);
  return p;
}

void Out(const Term& t, v1::EstimateTerm* out) {
  out->set_name(t.name);
  out->set_formula(t.formula);
  out->set_bytes(static_cast<int64_t>(t.bytes));
  out->set_per_device_bytes(static_cast<int64_t>(t.per_device));
}

// The tensors one block keeps for backward (worker/explicit_step.cc's
// BlockSaved, which are autograd's saved tensors), one layer's worth.
std::vector<Term> LayerTerms(const Shape& s) {
  const Int a = s.a, N = s.N, d = s.d, S = s.S;
  const std::string as = s.low ? "2 B (autocast)" : "4 B";
  std::vector<Term> l;
  l.push_back(Product("layer.input", "the block's input, the fp32 residual stream (ln1 reads it)",
                      "4 B x N x d", {4, N, d}));
  l.push_back(Product("layer.ln1_rms", "ln1's 1/rms per token (fp32)", "4 B x N", {4, N}));
  l.push_back(Product("layer.ln1_normalized", "ln1's x/rms (fp32)", "4 B x N x d", {4, N, d}));
  if (s.low) {
    l.push_back(Product("layer.qkv_input",
                        "ln1's output cast for each of the q, k and v matmuls (3 copies)",
                        "3 x 2 B x N x d", {3, 2, N, d}));
  } else {
    l.push_back(
        Product("layer.qkv_input", "ln1's output, read by q, k and v", "4 B x N x d", {4, N, d}));
  }
  l.push_back(SplitByTp(Product("layer.qk_rotated",
                                absl::StrCat("q and k after RoPE, the scores' operands (", as, ")"),
                                "2 x a x N x d", {2, a, N, d}),
                        s));
  l.push_back(SplitByTp(
      Product("layer.v", "v copied to [batch x heads, context, d_k]", "a x N x d", {a, N, d}), s));
  l.push_back(
      SplitByTp(Product("layer.softmax_exp", "exp(scores - max), fp32 (autocast runs exp in fp32)",
                        "4 B x S, S = batch x heads x context²", {4, S}),
                s));
  l.push_back(SplitByTp(Product("layer.attention_weights",
                                s.low ? "the softmax weights cast for the weighted sum"
                                      : "the softmax weights, read by the weighted sum",
                                "a x S", {a, S}),
                        s));
  l.push_back(SplitByTp(Product("layer.softmax_stats",
                                "the row max's int64 index and the row sum (fp32) per score row",
                                "12 B x batch x heads x context", {12, s.B, s.H, s.T}),
                        s));
  l.push_back(SplitByTp(Product("layer.attention_output", "the heads merged, output_proj's input",
                                "a x N x d", {a, N, d}),
                        s));
  l.push_back(Product("layer.attention_residual", "h = x + attention (fp32), ln2's input",
                      "4 B x N x d", {4, N, d}));
  l.push_back(Product("layer.ln2_rms", "ln2's 1/rms per token (fp32)", "4 B x N", {4, N}));
  l.push_back(Product("layer.ln2_normalized", "ln2's x/rms (fp32)", "4 B x N x d", {4, N, d}));
  if (s.low) {
    l.push_back(Product("layer.ffn_input",
                        "ln2's output cast for each of the w1 and w3 matmuls (2 copies)",
                        "2 x 2 B x N x d", {2, 2, N, d}));
  } else {
    l.push_back(
        Product("layer.ffn_input", "ln2's output, read by w1 and w3", "4 B x N x d", {4, N, d}));
  }
  l.push_back(SplitByTp(
      Product("layer.ffn_hidden", "SwiGLU's w1 x, sigmoid(w1 x), silu, w3 x and silu * w3 x",
              "5 x a x N x d_ff", {5, a, N, s.dff}),
      s));
  return l;
}

Shape ShapeOf(const v1::EstimateRequest& r) {
  Shape s;
  const v1::ModelConfig& m = r.model();
  s.V = m.vocab_size();
  s.d = m.d_model();
  s.dff = m.d_ff();
  s.L = m.num_layers();
  s.H = m.num_heads();
  s.B = r.batch_size();
  s.T = r.context_length();
  s.N = s.B * s.T;
  s.S = s.B * s.H * s.T * s.T;
  s.low = r.precision() == v1::PRECISION_BF16 || r.precision() == v1::PRECISION_FP16;
  s.a = s.low ? 2 : 4;
  s.mode = r.mode();
  s.keep = r.mode() != v1::BENCHMARK_MODE_FORWARD || r.autograd();
  const v1::Sharding& sh = r.sharding();
  s.D = sh.data_parallel();
  s.t = sh.tensor_parallel();
  s.p = sh.pipeline_stages();
  s.Lp = CeilDiv(s.L, s.p);
  s.zero = sh.zero_stage();
  s.fsdp = sh.fsdp();
  return s;
}

}  // namespace

absl::StatusOr<v1::EstimateRequest> ResolveEstimateRequest(const v1::EstimateRequest& in) {
  if (auto s = CheckSizeLimits(in); !s.ok()) return s;
  if (auto s = CheckFiniteNumbers(in); !s.ok()) return s;
  v1::EstimateRequest out = in;
  auto model = ResolveModelConfig(in.model(), "model.");
  if (!model.ok()) return model.status();
  *out.mutable_model() = *model;
  if (!v1::BenchmarkMode_IsValid(in.mode())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode: unknown value ", in.mode(), "; expected forward, forward_backward or train_step"));
  }
  if (!v1::Precision_IsValid(in.precision())) {
    return absl::InvalidArgumentError(
        absl::StrCat("precision: unknown value ", in.precision(), "; expected fp32, bf16 or fp16"));
  }
  if (out.mode() == v1::BENCHMARK_MODE_UNSPECIFIED) out.set_mode(v1::BENCHMARK_MODE_FORWARD);
  if (out.precision() == v1::PRECISION_UNSPECIFIED) out.set_precision(v1::PRECISION_FP32);
  // The benchmark's defaults and ranges, so an estimate and a job agree.
  if (!out.has_batch_size()) out.set_batch_size(4);
  if (!out.has_context_length()) out.set_context_length(128);
  if (auto s = CheckRange("batch_size", out.batch_size(), 1, kMaxBatch); !s.ok()) return s;
  if (auto s = CheckRange("context_length", out.context_length(), 1, kMaxContext); !s.ok()) {
    return s;
  }

  v1::Sharding& sh = *out.mutable_sharding();
  if (!sh.has_data_parallel()) sh.set_data_parallel(1);
  if (!sh.has_tensor_parallel()) sh.set_tensor_parallel(1);
  if (!sh.has_pipeline_stages()) sh.set_pipeline_stages(1);
  for (const auto& [field, value] :
       {std::pair<const char*, int64_t>{"sharding.data_parallel", sh.data_parallel()},
        {"sharding.tensor_parallel", sh.tensor_parallel()}}) {
    if (auto s = CheckRange(field, value, 1, kMaxParallelDegree); !s.ok()) return s;
  }
  if (auto s = CheckRange("sharding.pipeline_stages", sh.pipeline_stages(), 1,
                          std::min<int64_t>(model->num_layers(), kMaxParallelDegree));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(),
                                                   " (a stage holds at least one of the model's ",
                                                   model->num_layers(), " layers)"));
  }
  if (auto s = CheckRange("sharding.zero_stage", sh.zero_stage(), 0, 3); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(),
                     " (0 = plain data parallel, 1 = AdamW state, 2 = and gradients, 3 = and "
                     "parameters sharded)"));
  }
  if (sh.fsdp() && (sh.zero_stage() == 1 || sh.zero_stage() == 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding.fsdp: FSDP shards parameters, gradients and AdamW state (ZeRO stage 3), which "
        "contradicts sharding.zero_stage ",
        sh.zero_stage(), "; give zero_stage 0 or 3 with fsdp"));
  }
  const int64_t tp = sh.tensor_parallel();
  for (const auto& [field, value] :
       {std::pair<const char*, int64_t>{"num_heads", model->num_heads()},
        {"d_ff", model->d_ff()},
        {"vocab_size", model->vocab_size()}}) {
    if (value % tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharding.tensor_parallel: ", tp, " does not divide model.", field, " (", value,
          "); tensor parallelism splits the heads, d_ff and the vocabulary "
          "evenly, so it must divide all three"));
    }
  }
  return out;
}

absl::StatusOr<v1::MemoryEstimate> EstimateMemory(const v1::EstimateRequest& r) {
  // The degrees divide below: a request not resolved (degrees left unset)
  // is refused rather than divided by zero.
  const v1::Sharding& degrees = r.sharding();
  if (degrees.data_parallel() < 1 || degrees.tensor_parallel() < 1 ||
      degrees.pipeline_stages() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding: degrees data_parallel ", degrees.data_parallel(), ", tensor_parallel ",
        degrees.tensor_parallel(), ", pipeline_stages ", degrees.pipeline_stages(),
        "; every degree must be written out (>= 1): estimate a request through "
        "ResolveEstimateRequest (Estimate does)"));
  }
  const Shape s = ShapeOf(r);
  const Int P = ParameterCount(r.model());
  const Int matrices = 4 * s.d * s.d + 3 * s.d * s.dff;  // one layer's q, k, v, o, w1, w2, w3
  const Int layer_params = matrices + 2 * s.d;
  // One device's parameters: its stage's layers (TP splits the matrices,
  // not the norm gains), the LM head and final norm (the last stage), and
  // the embedding when there is one stage.
  const Int P_device =
      s.Lp * (matrices / s.t + 2 * s.d) + s.V * s.d / s.t + s.d + (s.p == 1 ? s.V * s.d / s.t : 0);
  const Int linear = s.L * matrices + s.V * s.d;  // every Linear weight (autocast casts them)
  const Int linear_device = s.Lp * matrices / s.t + s.V * s.d / s.t;
  const Int largest_param = std::max({s.V * s.d, s.d * s.dff, s.d * s.d});
  const Int largest_param_device = std::max({s.V * s.d / s.t, s.d * s.dff / s.t, s.d * s.d / s.t});

  // ---- model state
  const Term parameters =
      State("parameters", "fp32 parameters", 4, P, "P", P_device, s.shard_params(), s);
  const Term gradients =
      State("gradients", "fp32 gradients (.grad)", 4, P, "P", P_device, s.shard_grads(), s);
  const Term adamw =
      State("adamw_state", "AdamW's fp32 m and v", 8, P, "P", P_device, s.shard_adamw(), s);
  const Term casts = State("autocast_weight_copies",
                           "every Linear weight cast to bf16/fp16 by autocast, held from the "
                           "forward until its backward",
                           2, linear, "P_linear", linear_device, s.shard_params(), s);

  // ---- activations kept for backward
  const std::vector<Term> layer = LayerTerms(s);
  Term layers;
  layers.name = "activations.layers";
  layers.bytes = s.L * Sum(layer, false);
  layers.per_device = s.Lp * Sum(layer, true);
  layers.formula =
      absl::StrCat("every layer's saved tensors (activations_per_layer): num_layers x ",
                   Num(Sum(layer, false)), " = ", Num(s.L), " x ", Num(Sum(layer, false)));
  if (s.p > 1) absl::StrAppend(&layers.formula, "; per device ", Num(s.Lp), " layers");
  if (s.fsdp && s.D > 1) {
    // The course's assumption: every second layer's activations sharded.
    layers.per_device = CeilDiv(layers.per_device * (s.D + 1), 2 * s.D);
    absl::StrAppend(&layers.formula, "; FSDP: half of them / data_parallel ", Num(s.D),
                    " (x (1 + 1/", Num(s.D), ") / 2)");
  }
  const std::string as = s.low ? "2 B (autocast)" : "4 B";
  const Term final_input = Product("final.input", "the last block's output, ln_final's input",
                                   "4 B x N x d", {4, s.N, s.d});
  const Term final_norm = Product("final.norm", "ln_final's x/rms and 1/rms (fp32)",
                                  "4 B x N x (d + 1)", {4, s.N, s.d + 1});
  const Term lm_head_input =
      s.low ? Product("final.lm_head_input", "ln_final's output cast for the LM head",
                      "2 B x N x d", {2, s.N, s.d})
            : Product("final.lm_head_input", "ln_final's output, the LM head's input",
                      "4 B x N x d", {4, s.N, s.d});
  const Term loss_exp =
      SplitByTp(Product("loss.exp", "exp(logits - max) in fp32, kept for the loss's backward",
                        "4 B x N x vocab", {4, s.N, s.V}),
                s);
  const Term loss_stats = Product(
      "loss.stats", "the logits' row max index (int64) and row sum (fp32)", "12 B x N", {12, s.N});
  const Term batch = Product("batch", "token ids and targets (int64)", "2 x 8 B x N", {2, 8, s.N});
  const Term mask = Product("causal_mask", "the causal mask (bool), shared by every layer",
                            "1 B x context²", {1, s.T, s.T});
  const Term residual =
      Product("residual_stream",  // ResidualStreamBytes
              "one residual-stream activation in single precision (fp32 under autocast too)",
              "4 B x batch x context x d_model", {4, s.B, s.T, s.d});

  // ---- transients
  const Term loss_forward =
      SplitByTp(Product("loss.forward_transient",
                        absl::StrCat("the loss forward's logits and logits - max (", as,
                                     " each), logits - logsumexp and its negation (fp32)"),
                        "(2 x a + 8 B) x N x vocab", {2 * s.a + 8, s.N, s.V}),
                s);
  const Term loss_backward =
      s.low ? SplitByTp(Product("loss.backward_transient",
                                "the loss backward's fp32 gradients (nll, its negation, "
                                "exp's product) and their bf16/fp16 casts",
                                "16 B x N x vocab", {16, s.N, s.V}),
                        s)
            : SplitByTp(Product("loss.backward_transient",
                                "the loss backward's fp32 gradients (nll, its negation, "
                                "exp's product)",
                                "12 B x N x vocab", {12, s.N, s.V}),
                        s);
  Term first_grads =
      Product("backward.first_layer_grads",
              "the LM head's and the last block's gradients, made while the block's saved "
              "tensors are still held",
              "4 B x (vocab x d + layer parameters)", {4, s.V * s.d + layer_params});
  first_grads.per_device = 4 * (s.V * s.d / s.t + matrices / s.t + 2 * s.d);
  if (s.shard_grads() && s.D > 1) first_grads.per_device = CeilDiv(first_grads.per_device, s.D);
  Term optimizer_temp =
      Product("optimizer.temporaries",
              "the faithful AdamW loop's sqrt(v) + eps of one parameter at a time (the largest)",
              "4 B x largest parameter", {4, largest_param});
  optimizer_temp.per_device =
      4 * (s.shard_adamw() && s.D > 1 ? CeilDiv(largest_param_device, s.D) : largest_param_device);

  // A forward that keeps nothing (the explicit step, mode forward): what is
  // alive at its busiest point, the attention core of one layer or the loss.
  const Int attention_work_scores = s.low ? 16 : 20;
  const Int attention_work = 20 * s.N * s.d + attention_work_scores * s.S;
  const Int loss_work = (2 * s.a + 12) * s.N * s.V;
  const Int cast_work = s.low ? 2 * largest_param : 0;
  Term working;
  working.name = "forward.working_set";
  working.formula = absl::StrCat(
      "nothing kept for backward: the larger of one layer's attention core (q, k, v and their "
      "copies 20 B x N x d + scores, masked, shifted, exp and weights ",
      Num(attention_work_scores), " B x S = ", Num(attention_work),
      ") and the loss forward ((2 x a + 12 B) x N x vocab = ", Num(loss_work), ")",
      s.low ? absl::StrCat(", plus the largest weight's cast (2 B x ", Num(largest_param), ")")
            : "");
  working.bytes = std::max(attention_work, loss_work) + cast_work;
  working.per_device = std::max(CeilDiv(attention_work, s.t), CeilDiv(loss_work, s.t)) +
                       (s.low ? 2 * largest_param_device : 0);

  // ---- phases
  std::vector<const Term*> resident = {&parameters};
  if (s.adamw()) resident.push_back(&adamw);
  resident.push_back(&batch);
  resident.push_back(&mask);
  std::vector<const Term*> saved = {&layers,        &final_input, &final_norm,
                                    &lm_head_input, &loss_exp,    &loss_stats};
  std::vector<Phase> phases;
  std::vector<const Term*> state_terms = {&parameters};
  if (s.grads()) state_terms.push_back(&gradients);
  if (s.adamw()) state_terms.push_back(&adamw);
  if (s.low && s.keep) state_terms.push_back(&casts);

  if (s.keep) {
    std::vector<const Term*> fwd = resident;
    if (s.low) fwd.push_back(&casts);
    fwd.insert(fwd.end(), saved.begin(), saved.end());
    std::vector<const Term*> bwd_start = fwd;
    fwd.push_back(&loss_forward);
    phases.push_back(Alive("forward", fwd));
    if (s.grads()) {
      std::vector<const Term*> at_loss = bwd_start, at_first = bwd_start;
      at_loss.push_back(&loss_backward);
      at_first.push_back(&first_grads);
      std::vector<const Term*> end = resident;
      end.push_back(&gradients);
      phases.push_back(
          Larger("backward", Larger("", Alive("", at_loss), Alive("", at_first)), Alive("", end)));
    }
  } else {
    std::vector<const Term*> fwd = resident;
    fwd.push_back(&working);
    phases.push_back(Alive("forward", fwd));
  }
  if (s.adamw()) {
    std::vector<const Term*> opt = resident;
    opt.push_back(&gradients);
    opt.push_back(&optimizer_temp);
    phases.push_back(Alive("optimizer_step", opt));
  }

  // ---- the answer
  v1::MemoryEstimate e;
  *e.mutable_request() = r;
  e.set_parameter_count(static_cast<int64_t>(P));
  std::vector<const Term*> reported;
  for (const Term* t : state_terms) reported.push_back(t);
  for (const Term& t : layer) reported.push_back(&t);
  std::vector<const Term*> others = {&layers,   &final_input, &final_norm, &lm_head_input,
                                     &loss_exp, &loss_stats,  &batch,      &mask};
  if (s.keep) {
    others.push_back(&loss_forward);
    if (s.grads()) {
      others.push_back(&loss_backward);
      others.push_back(&first_grads);
    }
  } else {
    others = {&batch, &mask, &working};
  }
  if (s.adamw()) others.push_back(&optimizer_temp);
  for (const Term* t : others) reported.push_back(t);
  reported.push_back(&residual);
  Int total = 0, per_device = 0;
  std::string peak_phase;
  for (const Phase& p : phases) {
    if (p.peak > total) {
      total = p.peak;
      peak_phase = p.name;
    }
    per_device = std::max(per_device, p.per_device);
  }
  // Every figure must fit the message's int64 fields.
  for (const Term* t : reported) {
    if (t->bytes > kMaxEstimateBytes || t->per_device > kMaxEstimateBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_size, context_length: the estimate's ", t->name, " alone comes to ",
                       Num(t->bytes), " bytes, beyond the ", kMaxEstimateBytes,
                       " bytes an estimate reports; no device holds this step"));
    }
  }
  if (total > kMaxEstimateBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size, context_length: the step's peak comes to ", Num(total),
                     " bytes, beyond the ", kMaxEstimateBytes, " bytes an estimate reports"));
  }

  for (const Term* t : state_terms) Out(*t, e.add_model_state());
  for (const Term& t : layer) Out(t, e.add_activations_per_layer());
  for (const Term* t : others) Out(*t, e.add_activations());
  Out(residual, e.mutable_residual_stream());
  for (const Phase& p : phases) {
    v1::EstimatePhase* out = e.add_phases();
    out->set_name(p.name);
    out->set_peak_bytes(static_cast<int64_t>(p.peak));
    out->set_per_device_peak_bytes(static_cast<int64_t>(p.per_device));
    out->set_formula(p.formula);
  }
  e.set_total_bytes(static_cast<int64_t>(total));
  e.set_per_device_bytes(static_cast<int64_t>(per_device));
  e.set_peak_phase(peak_phase);
  e.set_devices(static_cast<int64_t>(s.D * s.t * s.p));
  e.add_not_modelled(
      "the CUDA caching allocator's rounding (512 B blocks, 2 or 20 MiB segments): peak "
      "reserved memory is above the allocated peak estimated here");
  e.add_not_modelled(
      "cuBLAS/cuBLASLt workspaces and the CUDA context (tens of MiB on an H100; "
      "docs/results/memory-estimate.md)");
  e.add_not_modelled(
      "the step options that change what is allocated (attention other than faithful, "
      "fused_ops, weight_copies, cuda_graph, foreach or fused AdamW): the faithful step is "
      "estimated");
  if (s.sharded()) {
    e.add_not_modelled(
        "communication buffers (all-gather and reduce-scatter buckets, gathered ZeRO-3/FSDP "
        "layers) and pipeline microbatches in flight beyond one batch");
  }
  return e;
}

absl::StatusOr<v1::MemoryEstimate> Estimate(const v1::EstimateRequest& in) {
  auto resolved = ResolveEstimateRequest(in);
  if (!resolved.ok()) return resolved.status();
  return EstimateMemory(*resolved);
}

v1::EstimateRequest EstimateRequestForStep(const v1::BenchmarkSpec& step, std::string* modelled) {
  v1::EstimateRequest r;
  *r.mutable_model() = step.model();
  r.set_batch_size(step.batch_size());
  r.set_context_length(step.context_length());
  r.set_precision(step.precision());
  r.set_mode(step.mode());
  r.set_autograd(step.autograd());
  r.mutable_sharding()->set_data_parallel(1);
  r.mutable_sharding()->set_tensor_parallel(1);
  r.mutable_sharding()->set_pipeline_stages(1);
  std::vector<std::string> why;
  if (step.attention() != v1::ATTENTION_IMPL_UNSPECIFIED &&
      step.attention() != v1::ATTENTION_IMPL_FAITHFUL) {
    why.push_back("attention other than faithful");
  }
  if (step.fused_ops()) why.push_back("fused_ops");
  if (step.weight_copies()) why.push_back("weight_copies");
  if (step.cuda_graph()) why.push_back("cuda_graph");
  if (step.mode() == v1::BENCHMARK_MODE_TRAIN_STEP &&
      (step.optimizer_impl() == v1::OPTIMIZER_IMPL_FOREACH ||
       step.optimizer_impl() == v1::OPTIMIZER_IMPL_FUSED)) {
    why.push_back("optimizer_impl other than faithful");
  }
  // Options that change the ops run through autograd (worker/benchmark.cc).
  if (!why.empty()) r.set_autograd(true);
  if (modelled) *modelled = absl::StrJoin(why, ", ");
  return r;
}

int64_t ResidualStreamBytes(int64_t batch, int64_t context, int64_t d_model) {
  return int64_t{4} * batch * context * d_model;
}

}  // namespace benchd
