// Data-parallel training is right when, after N steps, every rank holds the
// same parameters (bit for bit: every rank adds the same all-reduced sums)
// and they equal, to fp32 rounding, one process training on the global batch:
// the mean of the ranks' gradients of their local mean losses is the gradient
// of the global mean loss when the batch splits evenly. Real Gloo groups over
// a real TCPStore, one thread per rank, as the collective tests make them.
#include <gtest/gtest.h>

#include <thread>

#include "common/model_config.h"
#include "worker/adamw.h"
#include "worker/ddp/grad_ready_hooks.h"
#include "worker/ddp/gradient_sync.h"
#include "worker/ddp/reducer_sync.h"
#include "worker/ddp/sharded_adamw.h"
#include "worker/explicit_step.h"
#include "worker/process_groups.h"
#include "worker/transformer.h"

namespace benchd::worker::ddp {
namespace {

v1::ModelConfig SmallModel() {
  v1::ModelConfig in;
  in.set_vocab_size(97);
  in.set_d_model(32);
  in.set_d_ff(64);
  in.set_num_layers(3);
  in.set_num_heads(4);
  auto out = ResolveModelConfig(in);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

constexpr int kSteps = 3;
constexpr int64_t kGlobalBatch = 8;
constexpr int64_t kContext = 16;

struct Batch {
  torch::Tensor ids, targets;
};

std::vector<Batch> GlobalBatches() {
  torch::manual_seed(1234);
  std::vector<Batch> out;
  for (int s = 0; s < kSteps; ++s) {
    auto ids = torch::randint(0, 97, {kGlobalBatch, kContext + 1}, torch::kLong);
    out.push_back(
        {ids.narrow(1, 0, kContext).contiguous(), ids.narrow(1, 1, kContext).contiguous()});
  }
  return out;
}

TransformerLM Build(uint64_t seed, torch::Device device = torch::kCPU) {
  torch::manual_seed(seed);
  TransformerLM model(SmallModel(), torch::TensorOptions().dtype(torch::kFloat32));
  model->to(device);
  return model;
}

std::vector<torch::Tensor> Snapshot(const TransformerLM& model) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().to(torch::kCPU).clone());
  return out;
}

// One process on the whole batch: the reference.
std::vector<torch::Tensor> TrainAlone(const std::vector<Batch>& batches,
                                      torch::Device device = torch::kCPU) {
  TransformerLM model = Build(7, device);
  AdamW optimizer(model->parameters());
  ExplicitStep step(*model);
  for (const auto& b : batches) {
    model->zero_grad();
    step.Forward(b.ids.to(device), b.targets.to(device), /*keep_for_backward=*/true);
    step.Backward();
    optimizer.Step();
  }
  return Snapshot(model);
}

struct Variant {
  SyncVariant sync;
  int64_t bucket_bytes = 0;
  bool sharded = false;
  // The backward through the autograd engine, gradients known final from its
  // hooks (DdpSpec.step.autograd).
  bool autograd = false;
  // c10d's Reducer instead of `sync` (autograd; bucket_bytes its cap).
  bool reducer = false;
  // Each parameter's AdamW step as soon as Finish has its mean
  // (DDP_OPTIMIZER_ADAMW_OVERLAPPED).
  bool overlapped_optimizer = false;
  // Gradients travel as bf16 (DDP_GRADIENT_COMPRESSION_BF16).
  bool compress_bf16 = false;
};

std::string Name(const Variant& v) {
  std::string s = v.reducer ? "reducer" : SyncVariantName(v.sync);
  if (v.sync == SyncVariant::kBucketed || v.reducer) {
    s += "(" + std::to_string(v.bucket_bytes) + " B)";
  }
  if (v.sharded) s += "+sharded_optimizer";
  if (v.autograd) s += "+autograd";
  if (v.overlapped_optimizer) s += "+overlapped_optimizer";
  if (v.compress_bf16) s += "+bf16_gradients";
  return s;
}

// N members of one group in this process: Gloo on the CPU, or NCCL with rank
// r on cuda:r.
class DdpTest : public ::testing::Test {
 protected:
  WorkerDevice DeviceOf(int rank) const {
    if (backend_ != v1::COLLECTIVE_BACKEND_NCCL) return cpu_;
    return {"cuda:" + std::to_string(rank), torch::Device(torch::kCUDA, rank), "gpu"};
  }

  std::vector<std::unique_ptr<ProcessGroups>> Group(const std::string& id, int world) {
    // One process group object per simulated worker.
    std::vector<std::unique_ptr<ProcessGroups>> groups;
    for (int r = 0; r < world; ++r) groups.push_back(std::make_unique<ProcessGroups>(DeviceOf(r)));
    internal::PrepareGroupRequest prep;
    prep.set_group(id);
    prep.set_world_size(world);
    prep.set_timeout_seconds(120);
    auto p = groups[0]->Prepare(prep);
    EXPECT_TRUE(p.ok()) << p.status();
    std::vector<absl::Status> st(world);
    std::vector<std::thread> t;
    for (int r = 0; r < world; ++r) {
      t.emplace_back([&, r] {
        internal::JoinGroupRequest j;
        j.set_group(id);
        j.set_backend(backend_);
        j.set_rank(r);
        j.set_world_size(world);
        j.set_store_host(p->store_host());
        j.set_store_port(p->store_port());
        j.set_timeout_seconds(120);
        st[r] = groups[r]->Join(j).status();
      });
    }
    for (auto& x : t) x.join();
    for (int r = 0; r < world; ++r) EXPECT_TRUE(st[r].ok()) << st[r];
    return groups;
  }

  // Trains on `world` ranks with `variant`; returns each rank's parameters
  // and the stats of its last step.
  void Train(int world, const Variant& variant, std::vector<std::vector<torch::Tensor>>* params,
             std::vector<SyncStats>* stats, std::vector<int64_t>* state_bytes = nullptr) {
    const auto batches = GlobalBatches();
    const std::string id = "ddp-" + std::to_string(world) + "-" + Name(variant);
    auto groups = Group(id, world);
    params->assign(world, {});
    stats->assign(world, {});
    if (state_bytes) state_bytes->assign(world, 0);
    // Built here, one after another: torch::manual_seed is process-wide.
    // Rank 0 has the reference's weights; the others start elsewhere and get
    // rank 0's by broadcast.
    std::vector<TransformerLM> models;
    for (int r = 0; r < world; ++r) {
      models.push_back(Build(r == 0 ? 7 : 100 + r, DeviceOf(r).device));
    }
    std::vector<std::thread> t;
    for (int r = 0; r < world; ++r) {
      t.emplace_back([&, r] {
        auto member = groups[r]->Get(id);
        ASSERT_TRUE(member);
        const torch::Device device = DeviceOf(r).device;
        c10::DeviceGuard on_device(device);
        TransformerLM& model = models[r];
        BroadcastFromRankZero(model->parameters(), *member->pg);
        const std::vector<torch::Tensor> parameters = model->parameters();
        GradientSync sync(variant.sync, parameters, member->pg, variant.bucket_bytes,
                          variant.compress_bf16);
        std::unique_ptr<ReducerSync> reducer;
        std::unique_ptr<GradReadyHooks> hooks;
        if (variant.reducer) {
          reducer = std::make_unique<ReducerSync>(parameters, *member, variant.bucket_bytes);
        } else if (variant.autograd) {
          hooks = std::make_unique<GradReadyHooks>(
              parameters, [&sync](const torch::Tensor& p) { sync.GradsReady({p}); });
        }
        std::unique_ptr<AdamW> plain;
        std::unique_ptr<ShardedAdamW> sharded;
        std::vector<std::unique_ptr<AdamW>> per_param;
        GradientSync::Averaged step_averaged;
        if (variant.overlapped_optimizer) {
          for (const auto& p : parameters) {
            per_param.push_back(std::make_unique<AdamW>(std::vector<torch::Tensor>{p}));
          }
          step_averaged = [&per_param](const std::vector<size_t>& averaged) {
            for (size_t i : averaged) per_param[i]->Step();
          };
        } else if (variant.sharded) {
          sharded = std::make_unique<ShardedAdamW>(model->parameters(), member->pg);
        } else {
          plain = std::make_unique<AdamW>(model->parameters());
        }
        ExplicitStep step(*model);
        const int64_t local = kGlobalBatch / world;
        for (const auto& b : batches) {
          model->zero_grad();
          const auto ids = b.ids.narrow(0, r * local, local).to(device);
          const auto targets = b.targets.narrow(0, r * local, local).to(device);
          if (reducer) {
            reducer->BeforeForward();
            const auto loss = CrossEntropy(model->forward(ids), targets);
            reducer->BeforeBackward();
            loss.backward();
          } else if (variant.autograd) {
            sync.BeginStep();
            CrossEntropy(model->forward(ids), targets).backward();
            sync.Finish(step_averaged);
          } else {
            sync.BeginStep();
            step.Forward(ids, targets, /*keep_for_backward=*/true);
            step.Backward(
                [&sync](const std::vector<torch::Tensor>& ready) { sync.GradsReady(ready); });
            sync.Finish(step_averaged);
          }
          if (sharded) {
            sharded->Step();
          } else if (plain) {
            plain->Step();
          }
        }
        (*params)[r] = Snapshot(model);
        (*stats)[r] = sync.stats();
        if (reducer) {
          (*stats)[r].calls = reducer->Buckets();
          (*stats)[r].bytes = reducer->Bytes();
        }
        if (state_bytes && !per_param.empty()) {
          for (const auto& o : per_param) (*state_bytes)[r] += o->StateBytes();
        } else if (state_bytes) {
          (*state_bytes)[r] = sharded ? sharded->StateBytes() : plain->StateBytes();
        }
      });
    }
    for (auto& x : t) x.join();
  }

  WorkerDevice cpu_{"cpu:0", torch::Device(torch::kCPU), "cpu"};
  v1::CollectiveBackend backend_ = v1::COLLECTIVE_BACKEND_GLOO;

 public:
  // Train, for checks shared by the CPU and the CUDA fixtures.
  void TrainFor(int world, const Variant& variant, std::vector<std::vector<torch::Tensor>>* params,
                std::vector<SyncStats>* stats) {
    Train(world, variant, params, stats);
  }
};

// The same on two GPUs with NCCL, against one GPU on the global batch
// (skipped without two GPUs; on a 2-GPU machine: source .gpu-debs/unpack.sh &&
// source scripts/gpu-lib.sh && gpu_setup && gpu_ctest ddp "" Ddp).
class CudaDdpTest : public DdpTest {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available() || torch::cuda::device_count() < 2 ||
        !BackendAvailable(v1::COLLECTIVE_BACKEND_NCCL)) {
      GTEST_SKIP() << "needs two GPUs and NCCL";
    }
    backend_ = v1::COLLECTIVE_BACKEND_NCCL;
  }
};

void ExpectSameAsAlone(const std::vector<std::vector<torch::Tensor>>& ranks,
                       const std::vector<torch::Tensor>& alone, const std::string& what) {
  ASSERT_FALSE(ranks.empty());
  for (size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_EQ(ranks[r].size(), alone.size()) << what;
    for (size_t i = 0; i < alone.size(); ++i) {
      EXPECT_TRUE(torch::equal(ranks[r][i], ranks[0][i]))
          << what << ": rank " << r << " parameter " << i << " differs from rank 0's";
    }
  }
  // fp32: the ranks sum gradients in another order than one process does;
  // after 3 AdamW steps (lr 1e-3) that moves a parameter by well under 1e-5.
  for (size_t i = 0; i < alone.size(); ++i) {
    const double diff = (ranks[0][i] - alone[i]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << what << ": parameter " << i << " off the one-process training by "
                          << diff;
  }
}

TEST(AssignShardsTest, BalancedByBytesLargestFirst) {
  const std::vector<int64_t> bytes = {40, 10, 30, 20, 100};
  // 100 -> rank 0; then 40, 30, 20 and 10 each to rank 1, which holds less
  // than 100 until the last (40, 70, 90, 100).
  EXPECT_EQ(AssignShards(bytes, 2), (std::vector<int>{1, 1, 1, 1, 0}));
  const auto three = AssignShards(bytes, 3);
  EXPECT_EQ(three[4], 0);
  EXPECT_EQ(three[0], 1);
  EXPECT_EQ(three[2], 2);
}

TEST_F(DdpTest, EveryVariantTrainsAsOneProcessOnTheGlobalBatch) {
  const auto alone = TrainAlone(GlobalBatches());
  const std::vector<Variant> variants = {
      {SyncVariant::kNaive},
      {SyncVariant::kFlat},
      {SyncVariant::kOverlap},
      {SyncVariant::kBucketed, 1 << 10},    // many buckets
      {SyncVariant::kBucketed, 64 << 10},   // a few
      {SyncVariant::kBucketed, 100 << 20},  // one
      {SyncVariant::kNaive, 0, true},
      {SyncVariant::kBucketed, 16 << 10, true},
      // Each parameter stepped as its mean arrives: the same training.
      {SyncVariant::kNaive, 0, false, false, false, /*overlapped_optimizer=*/true},
      {SyncVariant::kFlat, 0, false, false, false, true},
      {SyncVariant::kOverlap, 0, false, false, false, true},
      {SyncVariant::kBucketed, 16 << 10, false, false, false, true},
  };
  for (int world : {2, 4}) {
    for (const auto& v : variants) {
      std::vector<std::vector<torch::Tensor>> params;
      std::vector<SyncStats> stats;
      Train(world, v, &params, &stats);
      ExpectSameAsAlone(params, alone, Name(v) + " on " + std::to_string(world) + " ranks");
      // Every rank moved every gradient byte once per step.
      int64_t grad_bytes = 0;
      for (const auto& p : alone) grad_bytes += p.numel() * 4;
      for (const auto& s : stats) {
        EXPECT_EQ(s.bytes, grad_bytes) << Name(v);
        EXPECT_GT(s.host_seconds, 0) << Name(v);
      }
      const int64_t n_params = static_cast<int64_t>(alone.size());
      if (v.sync == SyncVariant::kNaive || v.sync == SyncVariant::kOverlap) {
        EXPECT_EQ(stats[0].calls, n_params) << Name(v);
      } else if (v.sync == SyncVariant::kFlat) {
        EXPECT_EQ(stats[0].calls, 1) << Name(v);
      }
    }
  }
}

// Through the autograd engine: the variants fed by its hooks, and c10d's
// Reducer (PyTorch DDP's engine) as the reference, train as one process does.
TEST_F(DdpTest, AutogradVariantsAndTheReducerTrainAsOneProcessOnTheGlobalBatch) {
  const auto alone = TrainAlone(GlobalBatches());
  int64_t grad_bytes = 0;
  for (const auto& p : alone) grad_bytes += p.numel() * 4;
  const std::vector<Variant> variants = {
      {SyncVariant::kOverlap, 0, false, /*autograd=*/true},
      {SyncVariant::kBucketed, 16 << 10, false, /*autograd=*/true},
      {SyncVariant::kNaive, 0, true, /*autograd=*/true},
      {SyncVariant::kNaive, 1 << 10, false, true, /*reducer=*/true},
      {SyncVariant::kNaive, 64 << 10, true, true, /*reducer=*/true},
  };
  for (int world : {2, 4}) {
    for (const auto& v : variants) {
      std::vector<std::vector<torch::Tensor>> params;
      std::vector<SyncStats> stats;
      Train(world, v, &params, &stats);
      ExpectSameAsAlone(params, alone, Name(v) + " on " + std::to_string(world) + " ranks");
      for (const auto& s : stats) EXPECT_EQ(s.bytes, grad_bytes) << Name(v);
      if (v.sync == SyncVariant::kOverlap) {
        EXPECT_EQ(stats[0].calls, static_cast<int64_t>(alone.size())) << Name(v);
      }
      if (v.reducer) {
        // Rebuilt after the first step into buckets of at most the cap (a
        // larger parameter alone): 1 KiB makes one per parameter but the
        // smallest; 64 KiB a few.
        EXPECT_GT(stats[0].calls, 1) << Name(v);
        EXPECT_LT(stats[0].calls, static_cast<int64_t>(alone.size()) + 1) << Name(v);
      }
    }
  }
}

TEST_F(CudaDdpTest, EveryVariantOnTwoGpusTrainsAsOneGpuOnTheGlobalBatch) {
  const auto alone = TrainAlone(GlobalBatches(), torch::Device(torch::kCUDA, 0));
  for (const Variant& v : std::vector<Variant>{{SyncVariant::kNaive},
                                               {SyncVariant::kFlat},
                                               {SyncVariant::kOverlap},
                                               {SyncVariant::kBucketed, 16 << 10},
                                               {SyncVariant::kBucketed, 16 << 10, true},
                                               {SyncVariant::kOverlap, 0, false, true},
                                               {SyncVariant::kNaive, 16 << 10, false, true,
                                                /*reducer=*/true},
                                               {SyncVariant::kBucketed, 16 << 10, false, false,
                                                false, /*overlapped_optimizer=*/true}}) {
    std::vector<std::vector<torch::Tensor>> params;
    std::vector<SyncStats> stats;
    Train(2, v, &params, &stats);
    ExpectSameAsAlone(params, alone, Name(v) + " on 2 GPUs (NCCL)");
  }
}

// bf16 gradient compression (bf16_compress_hook): half the bytes, ranks
// still bit-identical, and the training one process does on the global
// batch to bf16's rounding of the mean gradient, not fp32's.
void ExpectBf16NearAlone(DdpTest& test, const std::vector<int>& worlds, torch::Device device) {
  const auto alone = TrainAlone(GlobalBatches(), device);
  int64_t grad_bytes = 0, numel = 0;
  for (const auto& p : alone) {
    grad_bytes += p.numel() * 4;
    numel += p.numel();
  }
  // Rank 0's mean and largest distance from one process, over every element.
  auto distance = [&](const std::vector<std::vector<torch::Tensor>>& params) {
    double sum = 0, largest = 0;
    for (size_t i = 0; i < alone.size(); ++i) {
      const auto d = (params[0][i] - alone[i]).abs();
      sum += d.sum().item<double>();
      largest = std::max(largest, d.max().item<double>());
    }
    return std::pair<double, double>{sum / numel, largest};
  };
  auto bf16 = [](Variant v) {
    v.compress_bf16 = true;
    return v;
  };
  for (int world : worlds) {
    std::vector<std::vector<torch::Tensor>> params;
    std::vector<SyncStats> stats;
    test.TrainFor(world, {SyncVariant::kFlat}, &params, &stats);
    const double fp32_mean = distance(params).first;
    for (const Variant& v : std::vector<Variant>{
             bf16({SyncVariant::kNaive}), bf16({SyncVariant::kFlat}), bf16({SyncVariant::kOverlap}),
             bf16({SyncVariant::kBucketed, 16 << 10}),
             bf16({SyncVariant::kBucketed, 16 << 10, /*sharded=*/true}),
             bf16({SyncVariant::kOverlap, 0, false, false, false, /*overlapped_optimizer=*/true}),
             bf16({SyncVariant::kBucketed, 16 << 10, false, /*autograd=*/true})}) {
      const std::string what = Name(v) + " on " + std::to_string(world) + " ranks";
      test.TrainFor(world, v, &params, &stats);
      for (const auto& s : stats) EXPECT_EQ(s.bytes, grad_bytes / 2) << what;
      for (size_t r = 0; r < params.size(); ++r) {
        ASSERT_EQ(params[r].size(), alone.size()) << what;
        for (size_t i = 0; i < alone.size(); ++i) {
          EXPECT_TRUE(torch::equal(params[r][i], params[0][i]))
              << what << ": rank " << r << " parameter " << i << " differs from rank 0's";
        }
      }
      // Seen: mean 4e-6..6e-6 (fp32: under 1e-8). bf16's 2^-8 rounding of
      // each rank's share can flip the sign of a mean that nearly cancels,
      // and AdamW's first steps move by about lr = 1e-3 whatever the size,
      // so single elements may end up to 2 x 3 steps x lr away.
      const auto [mean, largest] = distance(params);
      EXPECT_LT(mean, 2e-5) << what;
      EXPECT_GT(mean, 10 * fp32_mean) << what << ": no trace of bf16's rounding";
      EXPECT_LE(largest, 2 * kSteps * 1e-3 + 1e-6) << what;
    }
  }
}

TEST_F(DdpTest, Bf16GradientsHalveTheBytesAndTrainNearOneProcess) {
  ExpectBf16NearAlone(*this, {2, 4}, torch::kCPU);
}

TEST_F(CudaDdpTest, Bf16GradientsOnTwoGpusHalveTheBytesAndTrainNearOneGpu) {
  ExpectBf16NearAlone(*this, {2}, torch::Device(torch::kCUDA, 0));
}

TEST_F(DdpTest, ShardedOptimizerHoldsItsShardOfTheState) {
  std::vector<std::vector<torch::Tensor>> params;
  std::vector<SyncStats> stats;
  std::vector<int64_t> sharded_state, full_state;
  Train(2, {SyncVariant::kFlat, 0, true}, &params, &stats, &sharded_state);
  Train(2, {SyncVariant::kFlat, 0, false}, &params, &stats, &full_state);
  ASSERT_GT(full_state[0], 0);
  EXPECT_EQ(full_state[0], full_state[1]);
  EXPECT_EQ(sharded_state[0] + sharded_state[1], full_state[0]);
  // Balanced: no rank holds more than the largest parameter above half.
  for (int64_t s : sharded_state) EXPECT_LT(s, full_state[0] * 0.75);
}

TEST(GradientSyncTest, RefusesABucketSizeOfZero) {
  // No group is needed to see the refusal: the check comes first.
  try {
    GradientSync(SyncVariant::kBucketed, {}, c10::intrusive_ptr<c10d::Backend>(), 0);
    ADD_FAILURE() << "a bucket size of 0 was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket size must be > 0 bytes, got 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace benchd::worker::ddp
