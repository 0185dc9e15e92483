#include "common/ddp_spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/job_spec.h"
#include "common/limits.h"
#include "common/model_config.h"
#include "common/options.h"

namespace benchd {
namespace {

// An enum's values by their short names (the full name less `prefix`,
// lower case), the unspecified value left out: the one list per enum.
template <typename Enum>
std::vector<std::pair<std::string, Enum>> ShortNames(const google::protobuf::EnumDescriptor* d,
                                                     absl::string_view prefix) {
  std::vector<std::pair<std::string, Enum>> out;
  for (int i = 0; i < d->value_count(); ++i) {
    const auto* v = d->value(i);
    if (v->number() == 0) continue;
    out.emplace_back(absl::AsciiStrToLower(absl::StripPrefix(v->name(), prefix)),
                     static_cast<Enum>(v->number()));
  }
  return out;
}

template <typename Enum>
std::string NameOf(const std::vector<std::pair<std::string, Enum>>& names, Enum value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return absl::StrCat(static_cast<int>(value));
}

template <typename Enum>
std::string Choices(const std::vector<std::pair<std::string, Enum>>& names) {
  std::vector<std::string> list;
  for (const auto& [name, v] : names) list.push_back(name);
  if (list.size() < 2) return absl::StrJoin(list, "");
  const std::string last = list.back();
  list.pop_back();
  return absl::StrCat(absl::StrJoin(list, ", "), " or ", last);
}

template <typename Enum>
absl::StatusOr<Enum> Parse(const std::vector<std::pair<std::string, Enum>>& names,
                           absl::string_view prefix, absl::string_view what,
                           const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  const std::string full_prefix = absl::AsciiStrToLower(prefix);
  for (const auto& [name, v] : names) {
    if (lower == name || lower == full_prefix + name) return v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " ", QuotedForError(text), "; expected ", Choices(names)));
}

const std::vector<std::pair<std::string, v1::DdpVariant>>& VariantNames() {
  static const auto* names =
      new auto(ShortNames<v1::DdpVariant>(v1::DdpVariant_descriptor(), "DDP_VARIANT_"));
  return *names;
}

const std::vector<std::pair<std::string, v1::DdpOptimizer>>& OptimizerNames() {
  static const auto* names =
      new auto(ShortNames<v1::DdpOptimizer>(v1::DdpOptimizer_descriptor(), "DDP_OPTIMIZER_"));
  return *names;
}

const std::vector<std::pair<std::string, v1::DdpGradientCompression>>& CompressionNames() {
  static const auto* names = new auto(ShortNames<v1::DdpGradientCompression>(
      v1::DdpGradientCompression_descriptor(), "DDP_GRADIENT_COMPRESSION_"));
  return *names;
}

// The step's options that a data-parallel step does not run: it trains the
// course's model as written (the variants take its gradients as they become
// final, from benchd's explicit backward or, with autograd, from the
// engine's hooks) and times every step. optimizer_impl (faithful, foreach,
// fused) steps AdamW, or the sharded optimizer's shard, its way.
absl::Status CheckStepForDdp(const v1::BenchmarkSpec& in) {
  if (in.mode() != v1::BENCHMARK_MODE_UNSPECIFIED && in.mode() != v1::BENCHMARK_MODE_TRAIN_STEP) {
    return absl::InvalidArgumentError(
        absl::StrCat("ddp.step.mode: data-parallel training runs train_step, got ",
                     ModeName(in.mode()), "; leave it unset"));
  }
  auto not_the_model = [](absl::string_view field, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ddp.step.", field, ": ", what,
        " changes the model's ops; data-parallel training trains the course's model as written "
        "(explicit backward, or the autograd engine with ddp.step.autograd), so leave it unset"));
  };
  if (in.attention() != v1::ATTENTION_IMPL_UNSPECIFIED &&
      in.attention() != v1::ATTENTION_IMPL_FAITHFUL) {
    return not_the_model("attention", absl::StrCat("attention ", AttentionName(in.attention())));
  }
  if (in.fused_ops()) return not_the_model("fused_ops", "fused_ops");
  if (in.weight_copies()) return not_the_model("weight_copies", "weight_copies");
  if (in.cuda_graph()) {
    return absl::InvalidArgumentError(
        "ddp.step.cuda_graph: not supported by data-parallel training (the gradients' "
        "collectives run between the backward's layers, outside any graph)");
  }
  if (in.optimizer_overlap()) {
    return absl::InvalidArgumentError(
        "ddp.step.optimizer_overlap: not supported by data-parallel training (a parameter's "
        "update must wait for its all-reduce, not only its gradient); ddp.optimizers "
        "adamw_overlapped steps each parameter as soon as its mean is in place");
  }
  if (in.warmup_auto()) {
    return absl::InvalidArgumentError(
        "ddp.step.warmup_auto: not supported by data-parallel training; every rank must run "
        "the same number of steps, so give ddp.step.warmup_steps");
  }
  if (in.export_parity()) {
    return absl::InvalidArgumentError(
        "ddp.step.export_parity: only a benchmark request writes parity bundles");
  }
  return absl::OkStatus();
}

}  // namespace

std::string DdpVariantName(v1::DdpVariant v) { return NameOf(VariantNames(), v); }
absl::StatusOr<v1::DdpVariant> ParseDdpVariant(const std::string& name) {
  return Parse(VariantNames(), "DDP_VARIANT_", "variant", name);
}
std::string DdpVariantChoices() { return Choices(VariantNames()); }

std::string DdpOptimizerName(v1::DdpOptimizer o) { return NameOf(OptimizerNames(), o); }
absl::StatusOr<v1::DdpOptimizer> ParseDdpOptimizer(const std::string& name) {
  return Parse(OptimizerNames(), "DDP_OPTIMIZER_", "optimizer", name);
}
std::string DdpOptimizerChoices() { return Choices(OptimizerNames()); }

std::string DdpGradientCompressionName(v1::DdpGradientCompression c) {
  return NameOf(CompressionNames(), c);
}
absl::StatusOr<v1::DdpGradientCompression> ParseDdpGradientCompression(const std::string& name) {
  return Parse(CompressionNames(), "DDP_GRADIENT_COMPRESSION_", "gradient compression", name);
}
std::string DdpGradientCompressionChoices() { return Choices(CompressionNames()); }

bool DdpVariantTakesBuckets(v1::DdpVariant variant) {
  return variant == v1::DDP_VARIANT_BUCKETED || variant == v1::DDP_VARIANT_REDUCER;
}

std::string DdpRunLabel(const DdpRunSpec& run) {
  if (run.variant == v1::DDP_VARIANT_UNSPECIFIED) return "compute only";
  std::string label = DdpVariantName(run.variant);
  if (DdpVariantTakesBuckets(run.variant)) absl::StrAppend(&label, " ", run.bucket_mb, " MB");
  if (run.optimizer != v1::DDP_OPTIMIZER_ADAMW) {
    absl::StrAppend(&label, " + ", DdpOptimizerName(run.optimizer));
  }
  if (run.compression != v1::DDP_GRADIENT_COMPRESSION_NONE &&
      run.compression != v1::DDP_GRADIENT_COMPRESSION_UNSPECIFIED) {
    absl::StrAppend(&label, " + ", DdpGradientCompressionName(run.compression), " gradients");
  }
  return label;
}

DdpRunSpec DdpRunOf(const v1::DdpRow& row) {
  DdpRunSpec run{row.variant(), row.bucket_mb(), row.optimizer(), row.gradient_compression()};
  // Rows stored before gradient compressions existed carry none.
  if (run.compression == v1::DDP_GRADIENT_COMPRESSION_UNSPECIFIED) {
    run.compression = v1::DDP_GRADIENT_COMPRESSION_NONE;
  }
  return run;
}

absl::StatusOr<v1::DdpSpec> ResolveDdp(const v1::DdpSpec& in) {
  v1::DdpSpec out = in;
  // The target: a group, or devices with a backend.
  v1::CollectiveTarget* target = out.mutable_target();
  if (!target->group().empty()) {
    if (target->devices_size() > 0 || target->backend() != v1::COLLECTIVE_BACKEND_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("ddp.target: a group id or devices with a backend, not both (group ",
                       QuotedForError(target->group()), ")"));
    }
  } else {
    if (target->devices_size() == 0) {
      return absl::InvalidArgumentError(
          "ddp.target: nothing to train on; expected a group id (ddp.target.group) or 2 or "
          "more devices (ddp.target.devices, e.g. cuda:0,cuda:1)");
    }
    if (auto s = ResolveDevicesTarget("ddp.target", target); !s.ok()) return s;
    if (target->devices_size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ddp.target.devices: 1 device (", target->devices(0),
          "); data-parallel training needs 2 or more ranks (a benchmark runs one device)"));
    }
  }

  // The step: a train_step benchmark, checked as one.
  if (auto s = CheckStepForDdp(in.step()); !s.ok()) return s;
  v1::BenchmarkSpec step = in.step();
  step.set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  // Both may be given (a resolved spec has both); they must then agree,
  // which ResolveDdpBatch checks once the world size is known.
  const bool per_rank_given = step.has_batch_size();
  auto resolved = ResolveBenchmark(step);
  if (!resolved.ok()) {
    return absl::Status(
        resolved.status().code(),
        absl::StrCat("ddp.step.", absl::StripPrefix(resolved.status().message(), "benchmark.")));
  }
  // ResolveBenchmark's default per-rank batch stands only when none was given:
  // the global default decides then.
  if (!per_rank_given) {
    resolved->clear_batch_size();
    if (!out.has_global_batch_size()) out.set_global_batch_size(kDefaultDdpGlobalBatch);
  }
  *out.mutable_step() = *std::move(resolved);
  if (out.has_global_batch_size()) {
    if (auto s = CheckRange("ddp.global_batch_size", out.global_batch_size(), 1, kMaxBatch);
        !s.ok()) {
      return s;
    }
  }

  // The runs.
  std::set<int> seen;
  bool bucketed = false;
  for (int i = 0; i < in.variants_size(); ++i) {
    const int v = in.variants(i);
    if (!v1::DdpVariant_IsValid(v) || v == v1::DDP_VARIANT_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("ddp.variants[", i, "]: unknown value ", v,
                                                     "; expected ", DdpVariantChoices()));
    }
    if (!seen.insert(v).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ddp.variants[", i, "]: ", DdpVariantName(in.variants(i)),
                       " is listed twice; each variant runs once (bucket sizes in ddp.bucket_mb)"));
    }
    if (v == v1::DDP_VARIANT_REDUCER && !in.step().autograd()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ddp.variants[", i,
          "]: reducer (c10d's Reducer, PyTorch DDP's engine) learns that a gradient is final from "
          "the autograd engine's hooks; set ddp.step.autograd (benchctl --autograd) to run it"));
    }
    bucketed |= DdpVariantTakesBuckets(static_cast<v1::DdpVariant>(v));
  }
  if (in.variants_size() == 0) {
    for (const auto& [name, v] : VariantNames()) {
      if (v != v1::DDP_VARIANT_REDUCER || in.step().autograd()) out.add_variants(v);
    }
    bucketed = true;
  }
  std::set<double> sizes;
  for (int i = 0; i < in.bucket_mb_size(); ++i) {
    const double mb = in.bucket_mb(i);
    if (!(mb > 0 && mb <= kMaxDdpBucketMb)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ddp.bucket_mb[", i, "]: expected 0 < MB <= ", static_cast<int64_t>(kMaxDdpBucketMb),
          ", got ", mb));
    }
    if (!sizes.insert(mb).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ddp.bucket_mb[", i, "]: ", mb, " MB is listed twice"));
    }
  }
  if (!bucketed && in.bucket_mb_size() > 0) {
    return absl::InvalidArgumentError(
        "ddp.bucket_mb: bucket sizes are for the bucketed and reducer variants, which ddp.variants "
        "leaves out");
  }
  if (bucketed && in.bucket_mb_size() == 0) {
    for (double mb : kDefaultDdpBucketMb) out.add_bucket_mb(mb);
  }
  std::set<int> optimizers;
  for (int i = 0; i < in.optimizers_size(); ++i) {
    const int o = in.optimizers(i);
    if (!v1::DdpOptimizer_IsValid(o) || o == v1::DDP_OPTIMIZER_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("ddp.optimizers[", i, "]: unknown value ", o,
                                                     "; expected ", DdpOptimizerChoices()));
    }
    if (!optimizers.insert(o).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ddp.optimizers[", i, "]: ", DdpOptimizerName(in.optimizers(i)), " is listed twice"));
    }
  }
  if (in.optimizers_size() == 0) out.add_optimizers(v1::DDP_OPTIMIZER_ADAMW);
  if (optimizers.count(v1::DDP_OPTIMIZER_ADAMW_OVERLAPPED) > 0 &&
      std::find(out.variants().begin(), out.variants().end(), v1::DDP_VARIANT_REDUCER) !=
          out.variants().end()) {
    return absl::InvalidArgumentError(
        "ddp.optimizers: adamw_overlapped steps each parameter as its all-reduce ends, and the "
        "reducer variant ends its buckets inside the backward; leave one of them out");
  }

  std::set<int> compressions;
  for (int i = 0; i < in.gradient_compressions_size(); ++i) {
    const int c = in.gradient_compressions(i);
    if (!v1::DdpGradientCompression_IsValid(c) || c == v1::DDP_GRADIENT_COMPRESSION_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("ddp.gradient_compressions[", i,
                                                     "]: unknown value ", c, "; expected ",
                                                     DdpGradientCompressionChoices()));
    }
    if (!compressions.insert(c).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ddp.gradient_compressions[", i,
          "]: ", DdpGradientCompressionName(in.gradient_compressions(i)), " is listed twice"));
    }
  }
  if (in.gradient_compressions_size() == 0) {
    out.add_gradient_compressions(v1::DDP_GRADIENT_COMPRESSION_NONE);
  }
  // None first, whatever the order given: the compressed rows read against it.
  std::sort(out.mutable_gradient_compressions()->begin(),
            out.mutable_gradient_compressions()->end());
  if (compressions.count(v1::DDP_GRADIENT_COMPRESSION_BF16) > 0 &&
      std::find(out.variants().begin(), out.variants().end(), v1::DDP_VARIANT_REDUCER) !=
          out.variants().end()) {
    return absl::InvalidArgumentError(
        "ddp.gradient_compressions: bf16 compresses benchd's own variants' buffers; the reducer "
        "variant (c10d's Reducer) runs its buckets uncompressed here, so leave reducer out of "
        "ddp.variants or bf16 out of ddp.gradient_compressions");
  }

  auto timeout = ResolveTimeoutSeconds("ddp.timeout_seconds", in.timeout_seconds());
  if (!timeout.ok()) return timeout.status();
  out.set_timeout_seconds(*timeout);
  if (!in.has_traces()) out.set_traces(true);

  if (target->devices_size() > 0) {
    if (auto s = ResolveDdpBatch(target->devices_size(), &out); !s.ok()) return s;
  }
  return out;
}

absl::Status ResolveDdpBatch(int world, v1::DdpSpec* spec) {
  v1::BenchmarkSpec* step = spec->mutable_step();
  if (world < 1) return absl::InternalError("ResolveDdpBatch: no ranks");
  if (step->has_batch_size() && !spec->has_global_batch_size()) {
    spec->set_global_batch_size(step->batch_size() * world);
    return CheckRange("ddp.global_batch_size", spec->global_batch_size(), 1, kMaxBatch);
  }
  const int64_t global = spec->global_batch_size();
  if (global % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ddp.global_batch_size: ", global,
                                                   " does not split evenly over ", world,
                                                   " ranks; expected a multiple of ", world,
                                                   " (or give ddp.step.batch_size, "
                                                   "the batch of each rank)"));
  }
  if (step->has_batch_size() && step->batch_size() != global / world) {
    return absl::InvalidArgumentError(absl::StrCat("ddp.step.batch_size: ", step->batch_size(),
                                                   " per rank x ", world,
                                                   " ranks is not ddp.global_batch_size ", global));
  }
  step->set_batch_size(global / world);
  return absl::OkStatus();
}

std::vector<DdpRunSpec> DdpRuns(const v1::DdpSpec& resolved) {
  std::vector<DdpRunSpec> runs;
  // A spec resolved before gradient compressions existed (a queued job kept
  // across an upgrade) has none: it meant none.
  std::vector<int> compressions(resolved.gradient_compressions().begin(),
                                resolved.gradient_compressions().end());
  if (compressions.empty()) compressions.push_back(v1::DDP_GRADIENT_COMPRESSION_NONE);
  for (int v : resolved.variants()) {
    const auto variant = static_cast<v1::DdpVariant>(v);
    std::vector<double> sizes = {0};
    if (DdpVariantTakesBuckets(variant)) {
      sizes.assign(resolved.bucket_mb().begin(), resolved.bucket_mb().end());
    }
    for (double mb : sizes) {
      for (int o : resolved.optimizers()) {
        for (int c : compressions) {
          runs.push_back({variant, mb, static_cast<v1::DdpOptimizer>(o),
                          static_cast<v1::DdpGradientCompression>(c)});
        }
      }
    }
  }
  return runs;
}

}  // namespace benchd
