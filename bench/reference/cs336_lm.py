"""The CS336 (assignment 1) Transformer LM and AdamW in plain PyTorch eager.

A reference for checking benchd's LibTorch model (bench/reference/parity.py).
It is written from the assignment's specification, not from benchd's C++:

- token embedding, a [vocab, d_model] table looked up by id;
- pre-norm blocks: h = x + attn(norm1(x)); y = h + ffn(norm2(h));
- RMSNorm with eps 1e-5, computed in fp32 and cast back to the input's dtype;
- causal multi-head self-attention with separate q/k/v/output projections and
  no biases; RoPE (theta 10000 by default) on the interleaved pairs
  (x[2i], x[2i+1]) of each head's query and key; scores / sqrt(d_k), -inf
  above the diagonal, softmax that subtracts the row max;
- SwiGLU feed-forward w2(silu(w1 x) * w3 x);
- a final RMSNorm and an untied lm_head; mean cross-entropy;
- AdamW with decoupled weight decay applied after the Adam update:
  alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t);
  p -= alpha_t * m / (sqrt(v) + eps);  p -= lr * weight_decay * p.

Parameter names follow the course's module names, so a state dict maps one to
one onto benchd's: token_embeddings.weight, layers.{i}.ln1.weight,
layers.{i}.attn.{q,k,v,output}_proj.weight, layers.{i}.ln2.weight,
layers.{i}.ffn.{w1,w2,w3}.weight, ln_final.weight, lm_head.weight.

Mixed precision is torch.autocast around forward and loss, as the course's
benchmarking script does; parameters stay fp32.
"""
import math

import torch
from torch import nn


class Linear(nn.Module):
    """y = x W^T, W of shape [d_out, d_in]; W ~ N(0, 2/(d_in+d_out)) truncated at 3 std."""

    def __init__(self, d_in: int, d_out: int, init: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        if init:
            std = math.sqrt(2.0 / (d_in + d_out))
            nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T


class Embedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, init: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim))
        if init:
            nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype)


def silu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int, init: bool = True):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, init)
        self.w2 = Linear(d_ff, d_model, init)
        self.w3 = Linear(d_model, d_ff, init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(silu(self.w1(x)) * self.w3(x))


class RotaryPositionalEmbedding(nn.Module):
    """Rotates each pair (x[2i], x[2i+1]) at position p by the angle p * theta^(-2i/d_k)."""

    def __init__(self, theta: float, d_k: int, max_seq_len: int):
        super().__init__()
        assert d_k % 2 == 0, "RoPE needs an even head dimension"
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k))
        angles = torch.arange(max_seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", torch.cos(angles), persistent=False)  # [max_seq_len, d_k/2]
        self.register_buffer("sin", torch.sin(angles), persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor) -> torch.Tensor:
        cos = self.cos[token_positions]
        sin = self.sin[token_positions]
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    x = x - torch.max(x, dim=dim, keepdim=True).values
    e = torch.exp(x)
    return e / torch.sum(e, dim=dim, keepdim=True)


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v; where mask is False the score is -inf."""
    d_k = q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v


class CausalMultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, rope: RotaryPositionalEmbedding,
                 init: bool = True):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.q_proj = Linear(d_model, d_model, init)
        self.k_proj = Linear(d_model, d_model, init)
        self.v_proj = Linear(d_model, d_model, init)
        self.output_proj = Linear(d_model, d_model, init)
        self.rope = [rope]  # shared with the other layers; kept out of the module tree

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, d_model = x.shape
        d_k = d_model // self.num_heads

        def split(t):  # [B, T, H*d_k] -> [B, H, T, d_k]
            return t.reshape(batch, seq_len, self.num_heads, d_k).transpose(1, 2)

        positions = torch.arange(seq_len, device=x.device)
        q = self.rope[0](split(self.q_proj(x)), positions)
        k = self.rope[0](split(self.k_proj(x)), positions)
        v = split(self.v_proj(x))
        causal = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device))
        out = scaled_dot_product_attention(q, k, v, causal)
        return self.output_proj(out.transpose(1, 2).reshape(batch, seq_len, d_model))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, rope, init: bool = True):
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = CausalMultiHeadSelfAttention(d_model, num_heads, rope, init)
        self.ln2 = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff, init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attn(self.ln1(x))
        return h + self.ffn(self.ln2(h))


class TransformerLM(nn.Module):
    """[batch, seq] token ids -> [batch, seq, vocab] logits. init=False leaves the
    weights uninitialised, for loading a state dict."""

    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff,
                 rope_theta=10000.0, init: bool = True):
        super().__init__()
        self.token_embeddings = Embedding(vocab_size, d_model, init)
        self.rope = RotaryPositionalEmbedding(rope_theta, d_model // num_heads, context_length)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, num_heads, d_ff, self.rope, init) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab_size, init)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embeddings(token_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over all positions of -log softmax(logits)[target], with the max subtracted."""
    shifted = logits - torch.max(logits, dim=-1, keepdim=True).values
    log_sum_exp = torch.log(torch.sum(torch.exp(shifted), dim=-1))
    target_logit = torch.gather(shifted, -1, targets.unsqueeze(-1)).squeeze(-1)
    return torch.mean(log_sum_exp - target_logit)


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t = state["t"]
                state["m"] = beta1 * state["m"] + (1 - beta1) * g
                state["v"] = beta2 * state["v"] + (1 - beta2) * g * g
                alpha_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                p -= alpha_t * state["m"] / (torch.sqrt(state["v"]) + eps)
                p -= lr * weight_decay * p
        return loss
