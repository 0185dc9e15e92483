// The host cost of one eager op, in C++ (LibTorch, as benchd's worker issues
// them). bench/op_overhead/op_overhead.py runs this and the same ops in Python
// on the same device and prints the ratio: in a step bound by its own launch
// overhead, that ratio is how much faster a C++ loop of the same ops can be.
//
//   op_overhead --device cuda:0 [--iters 2000] [--repeats 7]   (one JSON line per case)
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void Sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

struct Case {
  std::string name;
  int ops_per_iter;  // eager ops issued by one call of `body`
  std::function<void()> body;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu";
  int iters = 2000, repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--device")
      device_name = argv[i + 1];
    else if (flag == "--iters")
      iters = std::stoi(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "op_overhead: unknown flag %s (expected --device, --iters, --repeats)\n",
                   flag.c_str());
      return 2;
    }
  }
  const torch::Device device(device_name);
  const auto on = torch::TensorOptions().device(device);
  // Tiny tensors: the GPU finishes each kernel long before the host issues the
  // next, so the loop measures the host's cost per op.
  const torch::Tensor a = torch::randn({256}, on), b = torch::randn({256}, on);
  const torch::Tensor ag = torch::randn({256}, on).requires_grad_();
  torch::Tensor inplace = torch::randn({256}, on);
  const torch::Tensor x = torch::randn({16, 64}, on);
  const torch::Tensor w = torch::randn({64, 64}, on).requires_grad_();
  const torch::Tensor wc = torch::randn({256}, on).requires_grad_();

  std::vector<Case> cases = {
      {"add", 1, [&] { (void)(a + b); }},
      {"add_autograd", 1, [&] { (void)(ag + b); }},
      {"mul_inplace", 1,
       [&] {
         torch::NoGradGuard g;
         inplace.mul_(0.999);
       }},
      {"linear_autograd", 1, [&] { (void)torch::linear(x, w); }},
      // 16 forward ops (mul, add) + sum, then backward: about 2x as many
      // kernels again; counted as the forward ops issued (17).
      {"chain_fwd_bwd", 17,
       [&] {
         torch::Tensor y = a;
         for (int i = 0; i < 8; ++i) y = y * wc + b;
         y.sum().backward();
       }},
      // The same forward and the same 24 backward kernels as chain_fwd_bwd,
      // issued directly below autograd, as benchd's ExplicitStep issues the
      // model's: what is left of the step's host cost without the engine.
      {"chain_fwd_bwd_explicit", 17,
       [&] {
         at::AutoDispatchBelowADInplaceOrView below_autograd;
         torch::Tensor ys[8];
         torch::Tensor y = a;
         for (int i = 0; i < 8; ++i) {
           ys[i] = y;
           y = y * wc + b;
         }
         const torch::Tensor sum = y.sum();
         // The engine's order: the seed, then MulBackward0 from the last
         // multiply down, wc's contributions summed as they come.
         torch::Tensor g = at::ones_like(sum).expand(y.sizes()), g_wc;
         for (int i = 7; i >= 0; --i) {
           const torch::Tensor contribution = g * ys[i];
           g_wc = g_wc.defined() ? g_wc + contribution : contribution;
           if (i > 0) g = g * wc;
         }
         torch::Tensor& grad = wc.mutable_grad();
         if (grad.defined()) {
           grad.add_(g_wc);
         } else {
           grad = g_wc;
         }
       }},
  };

  for (auto& c : cases) {
    for (int i = 0; i < 200; ++i) c.body();  // warm-up: allocator, lazy module loading
    Sync(device);
    std::vector<double> issue_us, total_us;
    for (int r = 0; r < repeats; ++r) {
      Sync(device);
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) c.body();
      const auto t1 = Clock::now();
      Sync(device);
      const auto t2 = Clock::now();
      const double ops = static_cast<double>(iters) * c.ops_per_iter;
      issue_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / ops);
      total_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() / ops);
    }
    std::printf(
        "{\"case\": \"%s\", \"lang\": \"cpp\", \"issue_us_median\": %.4f, \"issue_us_min\": %.4f, "
        "\"issue_us_max\": %.4f, \"total_us_median\": %.4f}\n",
        c.name.c_str(), Median(issue_us), *std::min_element(issue_us.begin(), issue_us.end()),
        *std::max_element(issue_us.begin(), issue_us.end()), Median(total_us));
  }
  return 0;
}
