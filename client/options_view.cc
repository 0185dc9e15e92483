#include "client/options_view.h"

#include <fmt/format.h>

#include "absl/strings/str_join.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd::client {
namespace {

std::string AttentionText(v1::AttentionImpl a) {
  switch (a) {
    case v1::ATTENTION_FAITHFUL:
      return "faithful";
    case v1::ATTENTION_SDPA:
      return "sdpa (PyTorch picks the kernel)";
    default:
      return fmt::format("sdpa ({} only)", AttentionName(a));
  }
}

}  // namespace

std::vector<std::string> SpecOptionParts(const v1::BenchmarkSpec& b) {
  std::vector<std::string> parts;
  if (b.attention() != v1::ATTENTION_FAITHFUL) {
    parts.push_back("attention " + AttentionName(b.attention()));
  }
  if (b.optimizer_impl() != v1::OPTIMIZER_FAITHFUL) {
    parts.push_back("optimizer " + OptimizerImplName(b.optimizer_impl()));
  }
  if (b.allow_tf32()) parts.push_back("tf32");
  if (b.cuda_graph()) parts.push_back("cuda graph");
  if (b.weight_copies()) parts.push_back("weight copies");
  if (b.fused_ops()) parts.push_back("fused ops");
  if (b.autograd()) parts.push_back("autograd");
  return parts;
}

std::string StepsLine(const v1::BenchmarkResult& r) {
  std::string warmup = fmt::format("{} warm-up", r.warmup_steps());
  if (r.warmup_auto()) {
    warmup += fmt::format(
        " (auto: {}, cap {})",
        r.warmup_converged() ? "last 3 within 2% of their median" : "capped before converging",
        r.warmup_max_steps());
  }
  std::string line = fmt::format("{} + {} measured", warmup, r.measure_steps());
  if (r.cuda_graph()) {
    line += fmt::format("; the first {} eager, then CUDA-graph replays", r.graph_eager_steps());
  }
  return line;
}

std::string OptionsLine(const v1::BenchmarkResult& r) {
  std::vector<std::string> parts;
  if (r.attention() != v1::ATTENTION_FAITHFUL) {
    parts.push_back("attention " + AttentionText(r.attention()));
  }
  if (r.optimizer_impl() != v1::OPTIMIZER_FAITHFUL) {
    parts.push_back("optimizer " + OptimizerImplName(r.optimizer_impl()));
  }
  if (r.allow_tf32()) parts.push_back("tf32 matmuls");
  if (r.cuda_graph()) {
    const bool optimizer_after =
        r.mode() == v1::MODE_TRAIN_STEP && r.optimizer_impl() != v1::OPTIMIZER_FOREACH;
    parts.push_back(optimizer_after
                        ? "cuda graph of forward+backward, optimizer eager after each replay"
                        : "cuda graph (phase times not measured)");
  }
  if (r.weight_copies()) {
    parts.push_back(
        fmt::format("{} weight copies kept between steps", PrecisionName(r.precision())));
  }
  if (r.fused_ops()) parts.push_back("fused RMSNorm, SiLU and RoPE");
  const char* engine = r.autograd() ? "autograd engine" : "explicit backward";
  if (parts.empty()) {
    return fmt::format("faithful (course attention and AdamW, fp32 matmuls, eager, {})", engine);
  }
  parts.push_back(engine);
  return absl::StrJoin(parts, ", ");
}

}  // namespace benchd::client
