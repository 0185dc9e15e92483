// Models kept resident on the worker's device between jobs, with their AdamW
// state, so a benchmark measures steps rather than model construction.
#ifndef BENCHD_WORKER_MODEL_CACHE_H_
#define BENCHD_WORKER_MODEL_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"
#include "worker/adamw.h"
#include "worker/device.h"
#include "worker/transformer.h"

namespace benchd::worker {

struct ResidentModel {
  std::string key;
  v1::ModelConfig config;  // resolved
  v1::Precision precision;
  TransformerLM model{nullptr};  // fp32 parameters on the device
  std::unique_ptr<AdamW> optimizer;
  int64_t parameter_count = 0;
  double build_seconds = 0;
};

// Thread-safe. Entries are shared: evicting a model that a job is using
// removes it from the cache and frees it when the job lets go.
class ModelCache {
 public:
  explicit ModelCache(WorkerDevice device);

  // "cuda:0/small/fp32" when the config is exactly a preset's (theta 10000),
  // else "cuda:0/V1000-d64-ff256-L2-H4/fp32", with "-theta<θ>" when θ ≠ 10000.
  static std::string Key(const std::string& device_name, const v1::ModelConfig& resolved,
                         v1::Precision precision);

  // The resident model for (config, precision), built on a miss with weights
  // from `seed` (torch::manual_seed). Counts a use. Sets *was_resident.
  // Throws what LibTorch throws (c10::OutOfMemoryError, ...); nothing is cached then.
  std::shared_ptr<ResidentModel> Acquire(const v1::ModelConfig& resolved, v1::Precision precision,
                                         uint64_t seed, bool* was_resident);

  // Recomputes the entry's bytes (parameters + optimizer state) after a job.
  void UpdateBytes(const ResidentModel& model);

  std::vector<v1::ResidentModel> List() const;
  int Evict(const std::string& key);  // 0 or 1
  int EvictAll();

  const WorkerDevice& device() const { return device_; }

 private:
  struct Entry {
    std::shared_ptr<ResidentModel> model;
    int64_t bytes = 0;
    int64_t uses = 0;
  };
  const WorkerDevice device_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_MODEL_CACHE_H_
