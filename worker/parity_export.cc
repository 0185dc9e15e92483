#include "worker/parity_export.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/model_config.h"

namespace benchd::worker {
namespace {

// POSIX rather than std::filesystem: libtorch.so exports std::filesystem
// symbols of its own, and calls from here can bind to them (remove_all
// crashed that way in a test).
std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A CPU copy that shares no storage with `t` (on a CPU device .to(kCPU) would
// return `t` itself, which the optimizer then updates in place).
torch::Tensor CpuCopy(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

}  // namespace

absl::StatusOr<std::string> ParityBundlePath(const std::string& artifacts_dir,
                                             const std::string& job_id) {
  auto dir = JobArtifactsDir(artifacts_dir, job_id, "benchmark.export_parity");
  // A refusal of the request's own field: INVALID_ARGUMENT, whatever the reason.
  if (!dir.ok()) return absl::InvalidArgumentError(dir.status().message());
  return absl::StrCat(*dir, "/parity.pt");
}

ParityBundle::ParityBundle(const v1::BenchmarkSpec& spec, const std::string& device_name,
                           const torch::nn::Module& model, const torch::Tensor& inputs,
                           const torch::Tensor& targets)
    : spec_(spec), device_name_(device_name) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    params_.insert(item.key(), CpuCopy(item.value()));
  }
  inputs_ = CpuCopy(inputs);
  targets_ = CpuCopy(targets);
}

void ParityBundle::Write(const std::string& path) const {
  TORCH_CHECK(logits_.defined(), "parity bundle: no logits recorded from the first forward");
  const v1::ModelConfig& m = spec_.model();
  c10::impl::GenericDict config(c10::StringType::get(), c10::AnyType::get());
  config.insert("preset", m.preset());
  config.insert("vocab_size", m.vocab_size());
  config.insert("d_model", m.d_model());
  config.insert("d_ff", m.d_ff());
  config.insert("num_layers", m.num_layers());
  config.insert("num_heads", m.num_heads());
  config.insert("rope_theta", m.rope_theta());
  config.insert("mode", ModeName(spec_.mode()));
  config.insert("precision", PrecisionName(spec_.precision()));
  config.insert("batch_size", spec_.batch_size());
  config.insert("context_length", spec_.context_length());
  config.insert("warmup_steps", spec_.warmup_steps());
  config.insert("measure_steps", spec_.measure_steps());
  config.insert("seed", static_cast<int64_t>(spec_.seed()));
  config.insert("device", device_name_);
  config.insert("spec", spec_.ShortDebugString());  // the whole resolved spec, for the record

  c10::impl::GenericDict bundle(c10::StringType::get(), c10::AnyType::get());
  bundle.insert("format", std::string(kParityBundleFormat));
  bundle.insert("config", config);
  bundle.insert("params", params_);
  bundle.insert("inputs", inputs_);
  bundle.insert("targets", targets_);
  bundle.insert("logits", CpuCopy(logits_.to(torch::kFloat32)));

  // What torch::pickle_save does, with two differences: the pickler does not
  // tag dicts with their TorchScript type (a torch.jit._pickle.restore_type_tag
  // call, which torch.load's default weights_only=True refuses), and the zip
  // goes straight to the file rather than through a second copy in memory.
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickle.insert(pickle.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(bundle);
  pickler.stop();

  if (absl::Status made = MakeDirs(Dirname(path)); !made.ok()) {
    TORCH_CHECK(false, "cannot write the parity bundle: ", made.message());
  }
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  try {
    caffe2::serialize::PyTorchStreamWriter writer(tmp);
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    TORCH_CHECK(false, "cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
}

}  // namespace benchd::worker
