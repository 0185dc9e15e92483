#include "worker/model_cache.h"

#include <gtest/gtest.h>

#include "common/model_config.h"

namespace benchd::worker {
namespace {

v1::ModelConfig Resolved(v1::ModelConfig in) {
  auto out = ResolveModelConfig(in);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

v1::ModelConfig Preset(const std::string& name) {
  v1::ModelConfig in;
  in.set_preset(name);
  return Resolved(in);
}

WorkerDevice Cpu() { return *ParseWorkerDevice("cpu:0"); }

TEST(ModelCacheTest, KeysNamePresetsOrSizes) {
  EXPECT_EQ(ModelCache::Key("cpu:0", Preset("small"), v1::PRECISION_FP32), "cpu:0/small/fp32");
  EXPECT_EQ(ModelCache::Key("cuda:1", Preset("2.7B"), v1::PRECISION_BF16), "cuda:1/2.7B/bf16");
  v1::ModelConfig explicit_sizes;
  explicit_sizes.set_vocab_size(1000);
  explicit_sizes.set_d_model(64);
  explicit_sizes.set_d_ff(256);
  explicit_sizes.set_num_layers(2);
  explicit_sizes.set_num_heads(4);
  // The same sizes as "tiny" are the tiny model.
  EXPECT_EQ(ModelCache::Key("cpu:0", Resolved(explicit_sizes), v1::PRECISION_FP16),
            "cpu:0/tiny/fp16");
  explicit_sizes.set_num_layers(3);
  EXPECT_EQ(ModelCache::Key("cpu:0", Resolved(explicit_sizes), v1::PRECISION_FP32),
            "cpu:0/V1000-d64-ff256-L3-H4/fp32");
  explicit_sizes.set_rope_theta(500000);
  EXPECT_EQ(ModelCache::Key("cpu:0", Resolved(explicit_sizes), v1::PRECISION_FP32),
            "cpu:0/V1000-d64-ff256-L3-H4-theta500000/fp32");
  // A preset with a changed size is not the preset.
  v1::ModelConfig small_wide;
  small_wide.set_preset("small");
  small_wide.set_d_ff(4096);
  EXPECT_EQ(ModelCache::Key("cpu:0", Resolved(small_wide), v1::PRECISION_FP32),
            "cpu:0/V10000-d768-ff4096-L12-H12/fp32");
}

TEST(ModelCacheTest, BuildsOnceThenServesTheResidentModel) {
  ModelCache cache(Cpu());
  bool resident = true;
  auto first = cache.Acquire(Preset("tiny"), v1::PRECISION_FP32, 0, &resident);
  EXPECT_FALSE(resident);
  EXPECT_GT(first->build_seconds, 0);
  EXPECT_EQ(first->parameter_count, ParameterCount(Preset("tiny")));
  auto again = cache.Acquire(Preset("tiny"), v1::PRECISION_FP32, 0, &resident);
  EXPECT_TRUE(resident);
  EXPECT_EQ(first.get(), again.get());
  // Another precision is another entry.
  cache.Acquire(Preset("tiny"), v1::PRECISION_BF16, 0, &resident);
  EXPECT_FALSE(resident);

  const auto list = cache.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].key(), "cpu:0/tiny/bf16");
  EXPECT_EQ(list[1].key(), "cpu:0/tiny/fp32");
  EXPECT_EQ(list[1].uses(), 2);
  EXPECT_EQ(list[1].device(), "cpu:0");
  EXPECT_EQ(list[1].parameter_count(), ParameterCount(Preset("tiny")));
  EXPECT_EQ(list[1].bytes(), 4 * ParameterCount(Preset("tiny")));
}

TEST(ModelCacheTest, BytesIncludeOptimizerStateOnceItExists) {
  ModelCache cache(Cpu());
  bool resident = false;
  auto m = cache.Acquire(Preset("tiny"), v1::PRECISION_FP32, 0, &resident);
  for (auto& p : m->model->parameters()) p.mutable_grad() = torch::zeros_like(p);
  m->optimizer->Step();
  cache.UpdateBytes(*m);
  EXPECT_EQ(cache.List()[0].bytes(), 3 * 4 * ParameterCount(Preset("tiny")));  // p, m, v
}

TEST(ModelCacheTest, Evicts) {
  ModelCache cache(Cpu());
  bool resident = false;
  auto held = cache.Acquire(Preset("tiny"), v1::PRECISION_FP32, 0, &resident);
  cache.Acquire(Preset("tiny"), v1::PRECISION_FP16, 0, &resident);
  EXPECT_EQ(cache.Evict("cpu:0/tiny/bf16"), 0);
  EXPECT_EQ(cache.Evict("cpu:0/tiny/fp32"), 1);
  // A job still holding an evicted model keeps a working model.
  EXPECT_EQ(held->model->forward(torch::zeros({1, 2}, torch::kInt64)).size(2), 1000);
  cache.Acquire(Preset("tiny"), v1::PRECISION_FP32, 0, &resident);
  EXPECT_FALSE(resident);
  EXPECT_EQ(cache.EvictAll(), 2);
  EXPECT_TRUE(cache.List().empty());
}

}  // namespace
}  // namespace benchd::worker
