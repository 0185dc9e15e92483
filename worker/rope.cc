#include "worker/rope.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "worker/rope_kernel.h"
#endif

namespace benchd::worker {

#if BENCHD_WITH_CUDA
namespace {

RopeArgs ArgsOf(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  RopeArgs a;
  switch (x.scalar_type()) {
    case at::kFloat:
      a.dtype = RopeDtype::kFloat;
      break;
    case at::kBFloat16:
      a.dtype = RopeDtype::kBFloat16;
      break;
    case at::kHalf:
      a.dtype = RopeDtype::kHalf;
      break;
    default:
      TORCH_CHECK(false, "FusedRope: x must be float32, bf16 or fp16, got ", x.scalar_type());
  }
  for (int d = 0; d < 4; ++d) {
    a.size[d] = x.size(d);
    a.stride[d] = x.stride(d);
  }
  a.x = x.data_ptr();
  a.cos = cos.data_ptr<float>();
  a.sin = sin.data_ptr<float>();
  return a;
}

class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor out = torch::empty(x.sizes(), x.options().dtype(at::kFloat));
    const char* error = LaunchRopeForward(ArgsOf(x, cos, sin), out.data_ptr<float>(),
                                          c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(error == nullptr, "FusedRope: the forward kernel failed to launch: ", error);
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& cos = saved[0];
    const torch::Tensor& sin = saved[1];
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const std::vector<int64_t> sizes = ctx->saved_data["x_sizes"].toIntVector();
    const torch::Tensor g = grads[0].to(at::kFloat).contiguous();
    const c10::cuda::CUDAGuard guard(g.device());
    torch::Tensor grad_x = torch::empty(sizes, g.options().dtype(dtype));
    // The kernel reads only the sizes (g and grad_x are contiguous).
    const char* error =
        LaunchRopeBackward(ArgsOf(grad_x, cos, sin), g.data_ptr<float>(), grad_x.data_ptr(),
                           c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(error == nullptr, "FusedRope: the backward kernel failed to launch: ", error);
    return {grad_x, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace
#endif

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0,
              "FusedRope: x must be [B, H, T, D] with even D, got ", x.sizes());
  TORCH_CHECK(cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat &&
                  cos.is_contiguous() && sin.is_contiguous() && cos.size(0) == x.size(2) &&
                  cos.size(1) == x.size(3) / 2 && sin.sizes() == cos.sizes(),
              "FusedRope: cos and sin must be contiguous float32 [T, D/2] = [", x.size(2), ", ",
              x.size(3) / 2, "], got ", cos.scalar_type(), " ", cos.sizes());
#if BENCHD_WITH_CUDA
  TORCH_CHECK(x.is_cuda() && cos.device() == x.device() && sin.device() == x.device(),
              "FusedRope: x, cos and sin must be on one CUDA device, got ", x.device());
  return RopeFunction::apply(x, cos, sin);
#else
  TORCH_CHECK(false, "FusedRope: this build has no CUDA");
#endif
}

}  // namespace benchd::worker
