#include "common/options.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/warmup.h"

namespace benchd {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return c == '-' ? '_' : static_cast<char>(std::tolower(c));
  });
  return s;
}

constexpr char kOptimizerChoices[] = "faithful, foreach or fused";

}  // namespace

std::string AttentionName(v1::AttentionImpl a) {
  switch (a) {
    case v1::ATTENTION_IMPL_UNSPECIFIED:  // the default
    case v1::ATTENTION_IMPL_FAITHFUL:
      return "faithful";
    case v1::ATTENTION_IMPL_SDPA:
      return "sdpa";
    case v1::ATTENTION_IMPL_SDPA_FLASH:
      return "flash";
    case v1::ATTENTION_IMPL_SDPA_EFFICIENT:
      return "efficient";
    case v1::ATTENTION_IMPL_SDPA_CUDNN:
      return "cudnn";
    case v1::ATTENTION_IMPL_SDPA_MATH:
      return "math";
    case v1::ATTENTION_IMPL_TILED:
      return "tiled";
    case v1::ATTENTION_IMPL_FUSED:
      return "fused";
    default:
      return absl::StrCat("unknown(", static_cast<int>(a), ")");
  }
}

std::string AttentionChoices() {
  const auto* e = v1::AttentionImpl_descriptor();
  std::string out;
  for (int i = 0; i < e->value_count(); ++i) {
    const auto a = static_cast<v1::AttentionImpl>(e->value(i)->number());
    if (a == v1::ATTENTION_IMPL_UNSPECIFIED) continue;
    if (!out.empty()) out += i + 1 == e->value_count() ? " or " : ", ";
    out += AttentionName(a);
  }
  return out;
}

absl::StatusOr<v1::AttentionImpl> ParseAttention(const std::string& s) {
  std::string l = Lower(s);
  if (l.rfind("sdpa_", 0) == 0 && l.size() > 5) l = l.substr(5);
  if (l == "faithful" || l == "course") return v1::ATTENTION_IMPL_FAITHFUL;
  if (l == "sdpa" || l == "auto") return v1::ATTENTION_IMPL_SDPA;
  if (l == "flash" || l == "flash_attention") return v1::ATTENTION_IMPL_SDPA_FLASH;
  if (l == "efficient" || l == "mem_efficient" || l == "memory_efficient")
    return v1::ATTENTION_IMPL_SDPA_EFFICIENT;
  if (l == "cudnn") return v1::ATTENTION_IMPL_SDPA_CUDNN;
  if (l == "math") return v1::ATTENTION_IMPL_SDPA_MATH;
  if (l == "tiled" || l == "flash_attention_2") return v1::ATTENTION_IMPL_TILED;
  if (l == "fused") return v1::ATTENTION_IMPL_FUSED;
  return absl::InvalidArgumentError(
      absl::StrCat("attention: unknown attention '", s, "'; expected ", AttentionChoices()));
}

std::string OptimizerImplName(v1::OptimizerImpl o) {
  switch (o) {
    case v1::OPTIMIZER_IMPL_UNSPECIFIED:  // the default
    case v1::OPTIMIZER_IMPL_FAITHFUL:
      return "faithful";
    case v1::OPTIMIZER_IMPL_FOREACH:
      return "foreach";
    case v1::OPTIMIZER_IMPL_FUSED:
      return "fused";
    default:
      return absl::StrCat("unknown(", static_cast<int>(o), ")");
  }
}

absl::StatusOr<v1::OptimizerImpl> ParseOptimizerImpl(const std::string& s) {
  const std::string l = Lower(s);
  if (l == "faithful" || l == "course") return v1::OPTIMIZER_IMPL_FAITHFUL;
  if (l == "foreach") return v1::OPTIMIZER_IMPL_FOREACH;
  if (l == "fused") return v1::OPTIMIZER_IMPL_FUSED;
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer: unknown optimizer '", s, "'; expected ", kOptimizerChoices));
}

absl::Status ResolveBenchmarkOptions(const v1::BenchmarkSpec& in, v1::BenchmarkSpec& b) {
  // Warm-up auto.
  if (in.warmup_auto() && in.has_warmup_steps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.warmup_auto: contradicts the explicit benchmark.warmup_steps ",
        in.warmup_steps(),
        "; give one or the other (warm-up auto decides the count, up to warmup_max_steps)"));
  }
  if (!in.warmup_auto() && in.has_warmup_max_steps()) {
    return absl::InvalidArgumentError(
        absl::StrCat("benchmark.warmup_max_steps: applies only with warmup_auto, got ",
                     in.warmup_max_steps(), " without it"));
  }
  if (b.warmup_auto()) {
    if (!b.has_warmup_max_steps()) b.set_warmup_max_steps(kDefaultWarmupMaxSteps);
    if (b.warmup_max_steps() < kWarmupWindow || b.warmup_max_steps() > kMaxSteps) {
      return absl::InvalidArgumentError(
          absl::StrCat("benchmark.warmup_max_steps: expected ", kWarmupWindow, "..", kMaxSteps,
                       ", got ", b.warmup_max_steps(), " (warm-up auto compares the last ",
                       kWarmupWindow, " steps, so it needs at least that many)"));
    }
  }

  if (!v1::AttentionImpl_IsValid(b.attention())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.attention: unknown value ", b.attention(), "; expected ", AttentionChoices()));
  }
  if (!v1::OptimizerImpl_IsValid(b.optimizer_impl())) {
    return absl::InvalidArgumentError(absl::StrCat("benchmark.optimizer_impl: unknown value ",
                                                   b.optimizer_impl(), "; expected ",
                                                   kOptimizerChoices));
  }
  // Unspecified is the default: written out as faithful (attention always,
  // the optimizer in train_step, the only mode with an optimizer step).
  if (b.attention() == v1::ATTENTION_IMPL_UNSPECIFIED) b.set_attention(v1::ATTENTION_IMPL_FAITHFUL);
  if (b.mode() == v1::BENCHMARK_MODE_TRAIN_STEP &&
      b.optimizer_impl() == v1::OPTIMIZER_IMPL_UNSPECIFIED) {
    b.set_optimizer_impl(v1::OPTIMIZER_IMPL_FAITHFUL);
  }
  if (b.mode() != v1::BENCHMARK_MODE_TRAIN_STEP &&
      b.optimizer_impl() == v1::OPTIMIZER_IMPL_FAITHFUL) {
    b.clear_optimizer_impl();
  }
  if (b.optimizer_impl() != v1::OPTIMIZER_IMPL_UNSPECIFIED &&
      b.mode() != v1::BENCHMARK_MODE_TRAIN_STEP) {
    return absl::InvalidArgumentError(absl::StrCat(
        "benchmark.optimizer_impl: ", OptimizerImplName(b.optimizer_impl()),
        " changes the AdamW step, which only mode train_step runs; mode is ", ModeName(b.mode())));
  }

  if (b.weight_copies()) {
    if (b.precision() != v1::PRECISION_BF16 && b.precision() != v1::PRECISION_FP16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "benchmark.weight_copies: keeps the matmul weights in the autocast dtype, so it needs "
          "precision bf16 or fp16; precision is ",
          PrecisionName(b.precision())));
    }
    if (b.mode() == v1::BENCHMARK_MODE_TRAIN_STEP &&
        b.optimizer_impl() != v1::OPTIMIZER_IMPL_FUSED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "benchmark.weight_copies: in train_step the fp32 weights are updated from the copies' "
          "gradients by the fused optimizer only; set optimizer_impl fused (got ",
          OptimizerImplName(b.optimizer_impl()), ")"));
    }
  }

  if (b.optimizer_overlap()) {
    if (b.mode() != v1::BENCHMARK_MODE_TRAIN_STEP ||
        b.optimizer_impl() != v1::OPTIMIZER_IMPL_FUSED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "benchmark.optimizer_overlap: runs the fused AdamW step beside the backward, so it "
          "needs mode train_step and optimizer_impl fused; got mode ",
          ModeName(b.mode()), ", optimizer ", OptimizerImplName(b.optimizer_impl())));
    }
    if (b.cuda_graph() && !b.weight_copies()) {
      return absl::InvalidArgumentError(
          "benchmark.optimizer_overlap: inside a CUDA graph the update must read its step count "
          "on the device, which benchd's kernel for weight copies does and torch's fused kernel "
          "(fp32 weights without copies) does not; add weight_copies or drop cuda_graph");
    }
  }

  if (b.cuda_graph()) {
    if (!b.warmup_auto() && b.warmup_steps() < kGraphEagerSteps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "benchmark.warmup_steps: cuda_graph needs at least ", kGraphEagerSteps,
          " warm-up steps (they run eagerly before the capture), got ", b.warmup_steps()));
    }
    if (b.warmup_auto() && b.warmup_max_steps() < kGraphEagerSteps + kWarmupWindow) {
      return absl::InvalidArgumentError(
          absl::StrCat("benchmark.warmup_max_steps: with cuda_graph the first ", kGraphEagerSteps,
                       " warm-up steps run eagerly and warm-up auto judges the next ",
                       kWarmupWindow, " replays at least, so the cap must be at least ",
                       kGraphEagerSteps + kWarmupWindow, ", got ", b.warmup_max_steps()));
    }
    // train_step: foreach is captured in the graph (its capturable form); the
    // faithful loop and the fused kernel take host numbers that change every
    // step, so they run eagerly after each replay of forward+backward.
  }
  return absl::OkStatus();
}

}  // namespace benchd
