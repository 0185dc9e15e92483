#include "worker/precision_run.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "worker/autocast_guard.h"
#include "worker/device_info.h"

namespace benchd::worker {
namespace {

// How many additions run between two polls of the cancellation hook.
constexpr int64_t kAdditionsPerPoll = 4096;

// The write-up's ToyModel sizes (PrecisionAutocastRun): fc1 in -> 10, fc2
// 10 -> out, a batch of random inputs.
constexpr int64_t kToyIn = 20;
constexpr int64_t kToyHidden = 10;
constexpr int64_t kToyOut = 5;
constexpr int64_t kToyBatch = 8;

// One of the write-up's accumulation loops.
struct Loop {
  const char* name;
  at::ScalarType accumulator;
  at::ScalarType addend;
  bool cast;  // x.type(accumulator dtype) before the add
};
constexpr Loop kLoops[] = {
    {"fp32", at::kFloat, at::kFloat, false},
    {"fp16", at::kHalf, at::kHalf, false},
    {"mixed", at::kFloat, at::kHalf, false},
    {"mixed_cast", at::kFloat, at::kHalf, true},
};

// class ToyModel(nn.Module): fc1 = nn.Linear(in_features, 10, bias=False);
// ln = nn.LayerNorm(10); fc2 = nn.Linear(10, out_features, bias=False);
// relu = nn.ReLU(); forward: fc2(ln(relu(fc1(x)))).
struct ToyModelImpl : torch::nn::Module {
  ToyModelImpl(int64_t in_features, int64_t out_features)
      : fc1(register_module(
            "fc1",
            torch::nn::Linear(torch::nn::LinearOptions(in_features, kToyHidden).bias(false)))),
        ln(register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kToyHidden})))),
        fc2(register_module(
            "fc2",
            torch::nn::Linear(torch::nn::LinearOptions(kToyHidden, out_features).bias(false)))),
        relu(register_module("relu", torch::nn::ReLU())) {}

  torch::nn::Linear fc1;
  torch::nn::LayerNorm ln;
  torch::nn::Linear fc2;
  torch::nn::ReLU relu;
};
TORCH_MODULE(ToyModel);

class PrecisionRun {
 public:
  PrecisionRun(const v1::PrecisionSpec& spec, const WorkerDevice& dev, const PrecisionHooks& hooks)
      : spec_(spec), dev_(dev), hooks_(hooks) {}

  absl::StatusOr<v1::PrecisionResult> Run() {
    v1::PrecisionResult result;
    *result.mutable_spec() = spec_;
    result.set_device(dev_.name);
    result.set_device_name(dev_.description);
    for (int e : spec_.experiments()) {
      if (e == v1::PRECISION_EXPERIMENT_ACCUMULATION) {
        for (const Loop& loop : kLoops) {
          if (Cancelled()) return absl::CancelledError("precision: cancelled");
          auto row = Accumulate(loop);
          if (!row.ok()) return row.status();
          Log(absl::StrCat("accumulation ", row->name(), " (", row->accumulator_dtype(),
                           " += ", row->addend_dtype(), row->addend_cast() ? " cast" : "",
                           "): ", absl::StrFormat("%.9g", row->result()), " after ", spec_.count(),
                           " additions of ", spec_.addend()));
          *result.add_accumulation() = *std::move(row);
        }
      } else if (e == v1::PRECISION_EXPERIMENT_AUTOCAST) {
        for (int p : spec_.autocast_dtypes()) {
          if (Cancelled()) return absl::CancelledError("precision: cancelled");
          v1::PrecisionAutocastRun run = Autocast(static_cast<v1::Precision>(p));
          std::vector<std::string> parts;
          for (const v1::PrecisionTensorDtype& t : run.tensors())
            parts.push_back(absl::StrCat(t.tensor(), " ", t.dtype()));
          Log(absl::StrCat("autocast ", PrecisionName(run.autocast_dtype()), " (",
                           run.autocast_device_type(), "): ", absl::StrJoin(parts, ", ")));
          *result.add_autocast() = std::move(run);
        }
      }
    }
    *result.mutable_versions() = WorkerVersions();
    return result;
  }

 private:
  bool Cancelled() const { return hooks_.cancelled && hooks_.cancelled(); }
  void Log(const std::string& line) const {
    if (hooks_.log) hooks_.log(line);
  }

  // s = torch.tensor(0, dtype=acc); for i in range(count):
  //   x = torch.tensor(addend, dtype=add); s += x  (or x.type(acc))
  absl::StatusOr<v1::PrecisionAccumulationRow> Accumulate(const Loop& loop) {
    const auto on = torch::TensorOptions().device(dev_.device);
    torch::Tensor s = torch::zeros({}, on.dtype(loop.accumulator));
    torch::Tensor x;
    for (int64_t i = 0; i < spec_.count(); ++i) {
      if (i % kAdditionsPerPoll == kAdditionsPerPoll - 1 && Cancelled())
        return absl::CancelledError("precision: cancelled");
      x = torch::scalar_tensor(spec_.addend(), on.dtype(loop.addend));
      if (loop.cast) {
        s += x.to(loop.accumulator);
      } else {
        s += x;
      }
    }
    v1::PrecisionAccumulationRow row;
    row.set_name(loop.name);
    row.set_accumulator_dtype(TorchDtypeName(s.scalar_type()));
    row.set_addend_dtype(TorchDtypeName(x.scalar_type()));
    row.set_addend_cast(loop.cast);
    row.set_addend_value(x.item<double>());
    row.set_result(s.item<double>());
    const double exact = static_cast<double>(spec_.count()) * spec_.addend();
    row.set_exact(exact);
    row.set_absolute_error(std::abs(row.result() - exact));
    row.set_relative_error(row.absolute_error() / std::abs(exact));
    return row;
  }

  v1::PrecisionAutocastRun Autocast(v1::Precision precision) {
    v1::PrecisionAutocastRun run;
    run.set_autocast_dtype(precision);
    const c10::DeviceType type = dev_.device.type();
    run.set_autocast_device_type(c10::DeviceTypeName(type, /*lower_case=*/true));
    auto add = [&](const std::string& tensor, const char* role, const torch::Tensor& t) {
      v1::PrecisionTensorDtype* d = run.add_tensors();
      d->set_tensor(tensor);
      d->set_role(role);
      d->set_dtype(TorchDtypeName(t.scalar_type()));
    };

    // Drawn on the CPU from the seed and moved over, so a seed names the same
    // model and batch on every device (and leaves torch's global generator
    // alone). nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in));
    // nn.LayerNorm's: weight 1, bias 0 (as constructed).
    auto gen = at::make_generator<at::CPUGeneratorImpl>(spec_.seed());
    ToyModel model(kToyIn, kToyOut);
    {
      torch::NoGradGuard no_grad;
      for (torch::nn::Linear* fc : {&model->fc1, &model->fc2}) {
        const double bound = 1.0 / std::sqrt(static_cast<double>((*fc)->options.in_features()));
        (*fc)->weight.uniform_(-bound, bound, gen);
      }
    }
    model->to(dev_.device);
    const torch::Tensor x = torch::randn({kToyBatch, kToyIn}, gen, torch::kFloat).to(dev_.device);
    const torch::Tensor y =
        torch::randint(0, kToyOut, {kToyBatch}, gen, torch::kLong).to(dev_.device);

    torch::Tensor loss;
    {
      AutocastGuard autocast(type, AutocastDtype(precision));
      for (const auto& p : model->named_parameters()) add(p.key(), "parameter", p.value());
      const torch::Tensor fc1 = model->fc1(x);
      add("fc1", "activation", fc1);
      const torch::Tensor relu = model->relu(fc1);
      add("relu", "activation", relu);
      const torch::Tensor ln = model->ln(relu);
      add("ln", "activation", ln);
      const torch::Tensor logits = model->fc2(ln);
      add("fc2", "logits", logits);
      loss = torch::nn::functional::cross_entropy(logits, y);
      add("loss", "loss", loss);
    }
    loss.backward();  // outside the region, as the course's code does
    for (const auto& p : model->named_parameters())
      add(p.key() + ".grad", "gradient", p.value().grad());
    run.set_loss(loss.item<double>());
    return run;
  }

  const v1::PrecisionSpec& spec_;
  const WorkerDevice& dev_;
  const PrecisionHooks& hooks_;
};

}  // namespace

std::string TorchDtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kBool:
      return "bool";
    default:
      return absl::AsciiStrToLower(c10::toString(dtype));
  }
}

absl::StatusOr<v1::PrecisionResult> RunPrecision(const v1::PrecisionSpec& spec,
                                                 const WorkerDevice& dev,
                                                 const PrecisionHooks& hooks) {
  return PrecisionRun(spec, dev, hooks).Run();
}

}  // namespace benchd::worker
