#include "client/options_view.h"

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd::client {
namespace {

std::string AttentionText(v1::AttentionImpl a) {
  switch (a) {
    case v1::ATTENTION_IMPL_FAITHFUL:
      return "faithful";
    case v1::ATTENTION_IMPL_SDPA:
      return "sdpa (PyTorch picks the kernel)";
    case v1::ATTENTION_IMPL_TILED:
      return "tiled (FlashAttention-2's algorithm in ATen ops)";
    case v1::ATTENTION_IMPL_FUSED:
      return "fused (benchd's FlashAttention-2 CUDA kernels)";
    default:
      return fmt::format("sdpa ({} only)", AttentionName(a));
  }
}

}  // namespace

std::vector<std::string> SpecOptionParts(const v1::BenchmarkSpec& b) {
  std::vector<std::string> parts;
  if (!IsFaithful(b.attention())) {
    parts.push_back("attention " + AttentionName(b.attention()));
  }
  if (!IsFaithful(b.optimizer_impl())) {
    parts.push_back("optimizer " + OptimizerImplName(b.optimizer_impl()));
  }
  if (b.allow_tf32()) parts.push_back("tf32");
  if (b.cuda_graph()) parts.push_back("cuda graph");
  if (b.weight_copies()) parts.push_back("weight copies");
  if (b.fused_ops()) parts.push_back("fused ops");
  if (b.optimizer_overlap()) parts.push_back("optimizer overlap");
  if (b.autograd()) parts.push_back("autograd");
  return parts;
}

std::string StepsLine(const v1::BenchmarkResult& result) {
  const v1::BenchmarkSpec& r = result.spec();
  std::string warmup = fmt::format("{} warm-up", result.warmup_steps_run());
  if (r.warmup_auto()) {
    warmup += fmt::format(
        " (auto: {}, cap {})",
        result.warmup_converged() ? "last 3 within 2% of their median" : "capped before converging",
        r.warmup_max_steps());
  }
  std::string line = fmt::format("{} + {} measured", warmup, r.measure_steps());
  if (r.cuda_graph()) {
    line +=
        fmt::format("; the first {} eager, then CUDA-graph replays", result.graph_eager_steps());
  }
  return line;
}

std::string OptionsLine(const v1::BenchmarkResult& result) {
  const v1::BenchmarkSpec& r = result.spec();
  std::vector<std::string> parts;
  if (!IsFaithful(r.attention())) {
    parts.push_back("attention " + AttentionText(r.attention()));
  }
  if (!IsFaithful(r.optimizer_impl())) {
    parts.push_back("optimizer " + OptimizerImplName(r.optimizer_impl()));
  }
  if (r.allow_tf32()) parts.push_back("tf32 matmuls");
  if (r.cuda_graph()) {
    const bool optimizer_after = r.mode() == v1::BENCHMARK_MODE_TRAIN_STEP &&
                                 r.optimizer_impl() != v1::OPTIMIZER_IMPL_FOREACH &&
                                 !r.optimizer_overlap();
    parts.push_back(optimizer_after
                        ? "cuda graph of forward+backward, optimizer eager after each replay"
                        : "cuda graph (phase times not measured)");
  }
  if (r.weight_copies()) {
    parts.push_back(
        fmt::format("{} weight copies kept between steps", PrecisionName(r.precision())));
  }
  if (r.fused_ops()) parts.push_back("fused RMSNorm, SiLU and RoPE");
  if (r.optimizer_overlap()) parts.push_back("AdamW beside the backward, parameter by parameter");
  const char* engine = r.autograd() ? "autograd engine" : "explicit backward";
  if (parts.empty()) {
    return fmt::format("faithful (course attention and AdamW, fp32 matmuls, eager, {})", engine);
  }
  parts.push_back(engine);
  return absl::StrJoin(parts, ", ");
}

}  // namespace benchd::client
