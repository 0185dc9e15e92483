#include "worker/collective_run.h"

#include <thread>

#include "common/collective_math.h"
#include "gtest/gtest.h"
#include "worker/device.h"
#include "worker/process_groups.h"

namespace benchd::worker {
namespace {

const v1::CollectiveOp kOps[] = {v1::COLLECTIVE_OP_ALL_REDUCE, v1::COLLECTIVE_OP_ALL_GATHER,
                                 v1::COLLECTIVE_OP_REDUCE_SCATTER, v1::COLLECTIVE_OP_BROADCAST,
                                 v1::COLLECTIVE_OP_ALL_TO_ALL};

// What each op computes, written out from the inputs of all ranks: the check's
// expected outputs must be this.
torch::Tensor Simulate(v1::CollectiveOp op, int rank, int world, int64_t count) {
  std::vector<torch::Tensor> in;
  for (int r = 0; r < world; ++r) in.push_back(CheckInput(op, r, world, count));
  const int64_t k = count / world;
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return torch::stack(in).sum(0);
    case v1::COLLECTIVE_OP_BROADCAST:
      return in[0];
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return torch::cat(in);
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      return torch::stack(in).sum(0).narrow(0, rank * k, k);
    default: {
      std::vector<torch::Tensor> parts;
      for (int s = 0; s < world; ++s) parts.push_back(in[s].narrow(0, rank * k, k));
      return torch::cat(parts);
    }
  }
}

TEST(CollectiveCheckTest, ExpectedOutputsAreWhatTheOpsCompute) {
  for (auto op : kOps) {
    for (int world : {2, 3, 4, 8}) {
      const auto shape = ShapeFor(op, 4 * 1000, 4, world);
      for (int rank = 0; rank < world; ++rank) {
        const auto want = Simulate(op, rank, world, shape.count);
        const auto got = CheckExpected(op, rank, world, shape.count);
        ASSERT_EQ(got.numel(), shape.output_count) << CollectiveOpName(op);
        EXPECT_TRUE(torch::equal(got, want))
            << CollectiveOpName(op) << " world " << world << " rank " << rank;
      }
    }
  }
  // Exact in bf16 up to 16 ranks: every expected value is an integer <= 256.
  EXPECT_LE(CheckExpected(v1::COLLECTIVE_OP_ALL_REDUCE, 0, 16, 100).max().item<int64_t>(), 256);
}

// Two members of one Gloo group in this process, one thread each.
class GlooPairTest : public ::testing::Test {
 protected:
  void Create(const std::string& id, double timeout_seconds) {
    internal::PrepareGroupRequest prep;
    prep.set_group(id);
    prep.set_world_size(2);
    prep.set_timeout_seconds(timeout_seconds);
    auto p = groups_[0].Prepare(prep);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_GT(p->store_port(), 0);
    absl::Status st[2];
    std::thread t[2];
    for (int r = 0; r < 2; ++r) {
      t[r] = std::thread([&, r] {
        internal::JoinGroupRequest j;
        j.set_group(id);
        j.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
        j.set_rank(r);
        j.set_world_size(2);
        j.set_store_host(p->store_host());
        j.set_store_port(p->store_port());
        j.set_timeout_seconds(timeout_seconds);
        auto out = groups_[r].Join(j);
        st[r] = out.status();
        if (out.ok()) EXPECT_GT(out->setup_seconds(), 0);
      });
    }
    for (auto& x : t) x.join();
    ASSERT_TRUE(st[0].ok()) << st[0];
    ASSERT_TRUE(st[1].ok()) << st[1];
  }

  WorkerDevice cpu_{"cpu:0", torch::Device(torch::kCPU), "cpu"};
  ProcessGroups groups_[2] = {ProcessGroups(cpu_), ProcessGroups(cpu_)};
};

TEST_F(GlooPairTest, EveryOpRunsTimedAndChecked) {
  Create("t1", 60);
  for (auto op : kOps) {
    for (bool in_place : {false, true}) {
      if (op == v1::COLLECTIVE_OP_ALL_TO_ALL && in_place) continue;
      internal::CollectiveRun run;
      run.set_group("t1");
      run.set_op(op);
      run.set_dtype(v1::COLLECTIVE_DTYPE_FP32);
      run.add_sizes_bytes(4096);
      run.add_sizes_bytes(1 << 16);
      run.set_warmup_iters(1);
      run.set_iters(3);
      run.set_in_place(in_place);
      std::vector<internal::CollectiveRankSize> sizes[2];
      absl::Status st[2];
      std::thread t[2];
      for (int r = 0; r < 2; ++r) {
        t[r] = std::thread([&, r] {
          CollectiveHooks hooks;
          hooks.on_size = [&](const internal::CollectiveRankSize& s) { sizes[r].push_back(s); };
          bool broken = false;
          st[r] = RunCollective(run, *groups_[r].Get("t1"), hooks, &broken);
          EXPECT_FALSE(broken);
        });
      }
      for (auto& x : t) x.join();
      for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(st[r].ok()) << CollectiveOpName(op) << ": " << st[r];
        ASSERT_EQ(sizes[r].size(), 2u);
        for (const auto& s : sizes[r]) {
          EXPECT_EQ(s.rank(), r);
          EXPECT_EQ(s.iteration_seconds_size(), 3);
          EXPECT_EQ(s.wrong_elements(), 0) << CollectiveOpName(op) << (in_place ? " in place" : "");
          EXPECT_GT(s.checked_elements(), 0);
          EXPECT_EQ(s.timer(), "host_steady_clock");
          for (double x : s.iteration_seconds()) EXPECT_GT(x, 0);
        }
        EXPECT_EQ(sizes[r][0].size_bytes(), 4096);
      }
    }
  }
  EXPECT_TRUE(groups_[0].Leave("t1", false));
  EXPECT_TRUE(groups_[1].Leave("t1", false));
  EXPECT_FALSE(groups_[0].Leave("t1", false));
}

TEST_F(GlooPairTest, AMissingPeerTimesOutAndBreaksTheGroup) {
  Create("t2", 2);
  internal::CollectiveRun run;
  run.set_group("t2");
  run.set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  run.add_sizes_bytes(4096);
  run.set_iters(1);
  bool broken = false;
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 never calls: rank 0 must not wait forever.
  const absl::Status st = RunCollective(run, *groups_[0].Get("t2"), {}, &broken);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("group t2"), std::string::npos) << st;
  EXPECT_TRUE(broken);
  EXPECT_LT(waited, 30);
  groups_[0].Leave("t2", true);
  groups_[1].Leave("t2", true);
}

TEST(ProcessGroupsTest, BadRequestsRefused) {
  WorkerDevice cpu{"cpu:0", torch::Device(torch::kCPU), "cpu"};
  ProcessGroups groups(cpu);
  internal::PrepareGroupRequest prep;
  prep.set_group("x");
  prep.set_world_size(1);
  EXPECT_EQ(groups.Prepare(prep).status().code(), absl::StatusCode::kInvalidArgument);
  internal::JoinGroupRequest j;
  j.set_group("x");
  j.set_backend(v1::COLLECTIVE_BACKEND_NCCL);
  j.set_rank(0);
  j.set_world_size(2);
  const auto st = groups.Join(j).status();
  EXPECT_TRUE(st.code() == absl::StatusCode::kInvalidArgument ||
              st.code() == absl::StatusCode::kFailedPrecondition)
      << st;
  j.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  EXPECT_EQ(groups.Join(j).status().code(), absl::StatusCode::kFailedPrecondition);  // no Prepare
  EXPECT_EQ(groups.Get("x"), nullptr);
}

}  // namespace
}  // namespace benchd::worker
