#include "worker/flash/fused_attention.h"

#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdint>
#include <sstream>

#include "worker/attention_backend.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "worker/flash/flash_attention_kernel.h"
#endif

namespace benchd::worker {
namespace {

// The kernels' grid takes batch and heads in its y and z dimensions.
constexpr int64_t kMaxGridDim = 65535;
constexpr bool kBuiltWithCuda = BENCHD_WITH_CUDA;

bool KernelDtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// What the kernels read in place: the last dimension contiguous and, for
// bf16/fp16 (16-byte cp.async and TMA loads), a 16-byte aligned base and
// row, head and batch strides that are multiples of 8 elements.
bool Readable(const torch::Tensor& t) {
  if (t.stride(3) != 1) return false;
  if (t.scalar_type() == at::kFloat) return true;
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i) {
    if (t.stride(i) % 8 != 0) return false;
  }
  return true;
}

// t as it is when the kernels can read it, else a fresh contiguous copy
// (clone, not contiguous(): a contiguous view at a misaligned offset must move).
torch::Tensor ReadableCopy(const torch::Tensor& t) {
  return Readable(t) ? t : t.clone(at::MemoryFormat::Contiguous);
}

std::string DescribeInputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  std::ostringstream what;
  what << "attention fused (benchd's FlashAttention-2 kernels) cannot run on " << q.device()
       << " for q " << q.sizes() << " " << q.scalar_type() << ", k " << k.sizes() << " "
       << k.scalar_type() << ", v " << v.scalar_type();
  if (at::autocast::is_autocast_enabled(q.device().type())) {
    what << " under autocast to "
         << c10::toString(at::autocast::get_autocast_dtype(q.device().type()));
  }
  return what.str();
}

#if BENCHD_WITH_CUDA
using flash::FlashDtype;

FlashDtype FlashDtypeOf(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16:
      return FlashDtype::kBFloat16;
    case at::kHalf:
      return FlashDtype::kHalf;
    default:
      return FlashDtype::kFloat;
  }
}

flash::FlashInput InputOf(const torch::Tensor& t) {
  flash::FlashInput in;
  in.data = t.data_ptr();
  for (int i = 0; i < 4; ++i) in.stride[i] = t.stride(i);
  return in;
}

flash::FlashOutput OutputOf(torch::Tensor& t) {
  flash::FlashOutput out;
  out.data = t.data_ptr();
  for (int i = 0; i < 4; ++i) out.stride[i] = t.stride(i);
  return out;
}

// What the forward's and the backward's arguments share: dtype, shape,
// causal, the scale 1/sqrt(d), and Q, K, V.
template <typename Args>
Args ArgsOf(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  Args a;
  a.dtype = FlashDtypeOf(q);
  a.batch = q.size(0);
  a.heads = q.size(1);
  a.seqlen_q = q.size(2);
  a.seqlen_k = k.size(2);
  a.head_dim = q.size(3);
  a.causal = causal;
  a.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head_dim)));
  a.q = InputOf(q);
  a.k = InputOf(k);
  a.v = InputOf(v);
  return a;
}

cudaStream_t CurrentStream(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}
#endif

void CheckLaunchable(const char* what, std::initializer_list<const torch::Tensor*> operands) {
  const torch::Tensor& q = **operands.begin();
  for (const torch::Tensor* t : operands) {
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "fused attention ", what,
                ": every operand must have q's dtype ", q.scalar_type(), ", got ",
                t->scalar_type());
    TORCH_CHECK(t->dim() == 4 && t->device() == q.device() && Readable(*t), "fused attention ",
                what, ": an operand of shape ", t->sizes(), " and strides ", t->strides(), " on ",
                t->device(), " is not in a layout the kernels read");
  }
}

class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, bool causal) {
    FusedForward f = FusedAttentionForward(q, k, v, causal);
    ctx->save_for_backward({q, k, v, f.out, f.lse});
    ctx->saved_data["causal"] = causal;
    return f.out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor grad_out = ReadableCopy(grads[0].to(saved[0].scalar_type()));
    FusedGrads g = FusedAttentionBackward(saved[0], saved[1], saved[2], saved[3], saved[4],
                                          grad_out, ctx->saved_data["causal"].toBool());
    return {g.dq, g.dk, g.dv, torch::Tensor()};
  }
};

}  // namespace

bool FusedAttentionHeadDim(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

std::string FusedAttentionRefusal(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v) {
  if (!q.is_cuda() || !k.is_cuda() || !v.is_cuda()) {
    return "they are CUDA kernels (on a CPU, tiled runs the same algorithm in ATen ops)";
  }
  if (!kBuiltWithCuda) return "this worker was built without CUDA, so without the kernels";
  if (k.device() != q.device() || v.device() != q.device()) {
    return "q, k and v must be on one device";
  }
  for (const torch::Tensor* t : {&q, &k, &v}) {
    if (!KernelDtype(t->scalar_type())) {
      return std::string("the kernels take float32, bf16 or fp16, got ") +
             c10::toString(t->scalar_type());
    }
  }
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
    return "q, k and v must be [batch, heads, seq_len, head_dim]";
  }
  if (k.sizes() != v.sizes() || q.size(0) != k.size(0) || q.size(1) != k.size(1) ||
      q.size(3) != k.size(3)) {
    return "k and v must have one shape, and q the same batch, heads and head_dim";
  }
  if (!FusedAttentionHeadDim(q.size(3))) {
    return "the kernels are built for head dims 16, 32, 64 and 128, got " +
           std::to_string(q.size(3));
  }
  if (q.numel() == 0 || k.numel() == 0) return "empty inputs";
  if (q.size(0) > kMaxGridDim || q.size(1) > kMaxGridDim) {
    return "batch and heads must each be at most " + std::to_string(kMaxGridDim) + ", got " +
           std::to_string(q.size(0)) + " and " + std::to_string(q.size(1));
  }
  return "";
}

FusedForward FusedAttentionForward(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, bool causal) {
  const std::string why = FusedAttentionRefusal(q, k, v);
  TORCH_CHECK(why.empty(), "fused attention: ", why);
  CheckLaunchable("forward", {&q, &k, &v});
#if BENCHD_WITH_CUDA
  const c10::cuda::CUDAGuard guard(q.device());
  FusedForward f;
  f.out = torch::empty({q.size(0), q.size(1), q.size(2), q.size(3)}, q.options());
  f.lse = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  auto a = ArgsOf<flash::FlashForwardArgs>(q, k, v, causal);
  a.o = OutputOf(f.out);
  a.lse = f.lse.data_ptr<float>();
  const char* error = flash::LaunchFlashForward(a, CurrentStream(q));
  TORCH_CHECK(error == nullptr, "fused attention: the forward failed: ", error);
  return f;
#else
  (void)causal;
  TORCH_CHECK(false, "fused attention: this worker was built without CUDA");
#endif
}

FusedGrads FusedAttentionBackward(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& out,
                                  const torch::Tensor& lse, const torch::Tensor& grad_out,
                                  bool causal) {
  const std::string why = FusedAttentionRefusal(q, k, v);
  TORCH_CHECK(why.empty(), "fused attention: ", why);
  CheckLaunchable("backward", {&q, &k, &v, &out, &grad_out});
  TORCH_CHECK(out.sizes() == q.sizes() && grad_out.sizes() == q.sizes(),
              "fused attention backward: out and grad_out must have q's shape ", q.sizes());
  const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2);
  TORCH_CHECK(lse.scalar_type() == at::kFloat && lse.is_contiguous() &&
                  lse.sizes() == torch::IntArrayRef({B, H, Sq}) && lse.device() == q.device(),
              "fused attention backward: lse must be contiguous float32 [", B, ", ", H, ", ", Sq,
              "] on ", q.device());
#if BENCHD_WITH_CUDA
  const c10::cuda::CUDAGuard guard(q.device());
  FusedGrads g;
  g.dq = torch::empty(q.sizes(), q.options());
  g.dk = torch::empty(k.sizes(), k.options());
  g.dv = torch::empty(v.sizes(), v.options());
  auto a = ArgsOf<flash::FlashBackwardArgs>(q, k, v, causal);
  a.o = InputOf(out);
  a.dout = InputOf(grad_out);
  a.lse = lse.data_ptr<float>();
  a.dq = OutputOf(g.dq);
  a.dk = OutputOf(g.dk);
  a.dv = OutputOf(g.dv);
  // The workspace (D and the float32 dQ accumulator) from the caching
  // allocator, on this stream; 256 bytes over, to align its start.
  constexpr int64_t kAlign = 256;
  const int64_t bytes = static_cast<int64_t>(flash::FlashBackwardWorkspaceBytes(a));
  torch::Tensor workspace = torch::empty({bytes + kAlign}, q.options().dtype(at::kByte));
  const auto base = reinterpret_cast<uintptr_t>(workspace.data_ptr());
  a.workspace = reinterpret_cast<void*>((base + kAlign - 1) / kAlign * kAlign);
  const char* error = flash::LaunchFlashBackward(a, CurrentStream(q));
  TORCH_CHECK(error == nullptr, "fused attention: the backward failed: ", error);
  return g;
#else
  (void)causal;
  TORCH_CHECK(false, "fused attention: this worker was built without CUDA");
#endif
}

torch::Tensor FusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             bool causal) {
  if (std::string why = FusedAttentionRefusal(q, k, v); !why.empty()) {
    throw AttentionBackendUnavailable(DescribeInputs(q, k, v) + ": " + why);
  }
  // Under autocast the autocast dtype, as SDPA's inputs (the model's q and k
  // come out of RoPE in float32, v in the autocast dtype); else the common one.
  const c10::DeviceType device_type = q.device().type();
  const at::ScalarType dtype =
      at::autocast::is_autocast_enabled(device_type)
          ? at::autocast::get_autocast_dtype(device_type)
          : at::promote_types(at::promote_types(q.scalar_type(), k.scalar_type()), v.scalar_type());
  if (!KernelDtype(dtype)) {
    throw AttentionBackendUnavailable(DescribeInputs(q, k, v) +
                                      ": the kernels take float32, bf16 or fp16, got " +
                                      c10::toString(dtype));
  }
  auto prepare = [dtype](const torch::Tensor& t) { return ReadableCopy(t.to(dtype)); };
  return FusedAttentionFunction::apply(prepare(q), prepare(k), prepare(v), causal);
}

}  // namespace benchd::worker
