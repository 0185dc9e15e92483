#include "worker/model_cache.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/model_config.h"

namespace benchd::worker {
namespace {

int64_t ParameterBytes(const torch::nn::Module& module) {
  int64_t bytes = 0;
  for (const auto& p : module.parameters()) bytes += p.nbytes();
  return bytes;
}

std::string ConfigName(const v1::ModelConfig& m) {
  const bool default_theta = m.rope_theta() == 10000.0;
  for (const Preset& p : Presets()) {
    if (default_theta && p.vocab_size == m.vocab_size() && p.d_model == m.d_model() &&
        p.d_ff == m.d_ff() && p.num_layers == m.num_layers() && p.num_heads == m.num_heads()) {
      return p.name;
    }
  }
  std::string name = absl::StrCat("V", m.vocab_size(), "-d", m.d_model(), "-ff", m.d_ff(), "-L",
                                  m.num_layers(), "-H", m.num_heads());
  if (!default_theta) absl::StrAppend(&name, "-theta", m.rope_theta());
  return name;
}

}  // namespace

ModelCache::ModelCache(WorkerDevice device) : device_(std::move(device)) {}

std::string ModelCache::Key(const std::string& device_name, const v1::ModelConfig& resolved,
                            v1::Precision precision) {
  return absl::StrCat(device_name, "/", ConfigName(resolved), "/", PrecisionName(precision));
}

std::shared_ptr<ResidentModel> ModelCache::Acquire(const v1::ModelConfig& resolved,
                                                   v1::Precision precision, uint64_t seed,
                                                   bool* was_resident) {
  const std::string key = Key(device_.name, resolved, precision);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++it->second.uses;
      *was_resident = true;
      return it->second.model;
    }
  }
  // Built outside the lock: it can take seconds, and List must stay responsive.
  // Jobs are serialized by the caller, so no two builds race for one key.
  auto m = std::make_shared<ResidentModel>();
  m->key = key;
  m->config = resolved;
  m->precision = precision;
  const auto start = std::chrono::steady_clock::now();
  torch::manual_seed(seed);
  m->model =
      TransformerLM(resolved, torch::TensorOptions().dtype(torch::kFloat32).device(device_.device));
  m->optimizer = std::make_unique<AdamW>(m->model->parameters());
  Synchronize(device_);  // the init kernels are part of the build
  m->build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m->parameter_count = CountParameters(*m->model);
  // The module's real parameters must be what the daemon advertises.
  TORCH_CHECK(m->parameter_count == ParameterCount(resolved), "model ", key, " has ",
              m->parameter_count, " parameters, formula says ", ParameterCount(resolved));

  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = Entry{m, ParameterBytes(*m->model), 1};
  *was_resident = false;
  return m;
}

void ModelCache::UpdateBytes(const ResidentModel& model) {
  const int64_t bytes = ParameterBytes(*model.model) + model.optimizer->StateBytes();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(model.key);
  if (it != entries_.end() && it->second.model.get() == &model) it->second.bytes = bytes;
}

std::vector<v1::ResidentModel> ModelCache::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::ResidentModel> out;
  for (const auto& [key, e] : entries_) {
    v1::ResidentModel r;
    r.set_key(key);
    r.set_device(device_.name);
    *r.mutable_model() = e.model->config;
    r.set_precision(e.model->precision);
    r.set_parameter_count(e.model->parameter_count);
    r.set_bytes(e.bytes);
    r.set_build_seconds(e.model->build_seconds);
    r.set_uses(e.uses);
    out.push_back(std::move(r));
  }
  return out;
}

int ModelCache::Evict(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(entries_.erase(key));
}

int ModelCache::EvictAll() {
  std::lock_guard<std::mutex> lock(mu_);
  const int n = static_cast<int>(entries_.size());
  entries_.clear();
  return n;
}

}  // namespace benchd::worker
