#include "common/collective_math.h"

#include "gtest/gtest.h"

namespace benchd {
namespace {

TEST(CollectiveMathTest, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_ALL_REDUCE, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_ALL_REDUCE, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_ALL_REDUCE, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_ALL_GATHER, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_REDUCE_SCATTER, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_ALL_TO_ALL, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(v1::COLLECTIVE_OP_BROADCAST, 8), 1.0);
}

TEST(CollectiveMathTest, SweepSizes) {
  EXPECT_EQ(SweepSizes(1 << 20, 1 << 30, 2).size(), 11u);
  EXPECT_EQ(SweepSizes(1 << 20, 1 << 30, 2).back(), 1 << 30);
  EXPECT_EQ(SweepSizes(1000, 1000, 2), std::vector<int64_t>({1000}));
  // max not reached exactly: stops below it
  EXPECT_EQ(SweepSizes(3, 20, 4), std::vector<int64_t>({3, 12}));
  EXPECT_TRUE(SweepSizes(10, 5, 2).empty());
  // no overflow at the top of int64
  EXPECT_EQ(SweepSizes(int64_t{1} << 62, INT64_MAX, 2).size(), 1u);
}

TEST(CollectiveMathTest, ShapesFollowNcclTestsSizeConvention) {
  // all_reduce: the buffer is the size
  auto s = ShapeFor(v1::COLLECTIVE_OP_ALL_REDUCE, 1 << 20, 4, 4);
  EXPECT_EQ(s.count, 1 << 18);
  EXPECT_EQ(s.output_count, 1 << 18);
  EXPECT_EQ(s.size_bytes, 1 << 20);
  // all_gather: the output is the size, each rank sends size/world
  s = ShapeFor(v1::COLLECTIVE_OP_ALL_GATHER, 1 << 20, 4, 4);
  EXPECT_EQ(s.count, 1 << 16);
  EXPECT_EQ(s.output_count, 1 << 18);
  EXPECT_EQ(s.size_bytes, 1 << 20);
  // reduce_scatter: the input is the size
  s = ShapeFor(v1::COLLECTIVE_OP_REDUCE_SCATTER, 1 << 20, 2, 4);
  EXPECT_EQ(s.count, 1 << 19);
  EXPECT_EQ(s.output_count, 1 << 17);
  // rounded down to split evenly over 3 ranks: 1000 B of fp32 = 250 -> 249
  s = ShapeFor(v1::COLLECTIVE_OP_ALL_TO_ALL, 1000, 4, 3);
  EXPECT_EQ(s.count, 249);
  EXPECT_EQ(s.size_bytes, 996);
  // never empty
  s = ShapeFor(v1::COLLECTIVE_OP_ALL_GATHER, 1, 4, 8);
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(s.output_count, 8);
}

TEST(CollectiveMathTest, SlowestRankPerIteration) {
  auto out = SlowestRankPerIteration({{1, 5, 3}, {2, 4, 3.5}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, std::vector<double>({2, 5, 3.5}));
  EXPECT_FALSE(SlowestRankPerIteration({{1, 2}, {1}}).ok());
  EXPECT_FALSE(SlowestRankPerIteration({}).ok());
}

TEST(CollectiveMathTest, AggregateRowBandwidths) {
  // 1 GB all_reduce over 4 ranks, slowest rank 10 ms each iteration
  auto row = AggregateRow(
      v1::COLLECTIVE_OP_ALL_REDUCE, 1'000'000'000,
      {{0.010, 0.010, 0.010}, {0.008, 0.009, 0.010}, {0.005, 0.005, 0.005}, {0.001, 0.002, 0.003}});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->world_size(), 4);
  EXPECT_DOUBLE_EQ(row->duration().median(), 0.010);
  EXPECT_DOUBLE_EQ(row->algbw_gbps(), 100.0);
  EXPECT_DOUBLE_EQ(row->busbw_gbps(), 150.0);
  ASSERT_EQ(row->rank_median_seconds_size(), 4);
  EXPECT_DOUBLE_EQ(row->rank_median_seconds(1), 0.009);
  EXPECT_EQ(row->iteration_seconds_size(), 3);
  EXPECT_GT(row->duration().p99(), 0);
}

TEST(CollectiveMathTest, ParseNames) {
  EXPECT_EQ(*ParseCollectiveOp("all-reduce"), v1::COLLECTIVE_OP_ALL_REDUCE);
  EXPECT_EQ(*ParseCollectiveOp("alltoall"), v1::COLLECTIVE_OP_ALL_TO_ALL);
  auto bad = ParseCollectiveOp("reduce");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("all_reduce, all_gather"), std::string::npos);
  EXPECT_EQ(*ParseBackend("NCCL"), v1::COLLECTIVE_BACKEND_NCCL);
  EXPECT_FALSE(ParseBackend("mpi").ok());
  EXPECT_EQ(*ParseDtype("bf16"), v1::COLLECTIVE_DTYPE_BF16);
  EXPECT_EQ(DtypeBytes(v1::COLLECTIVE_DTYPE_BF16), 2);
  EXPECT_EQ(DtypeBytes(v1::COLLECTIVE_DTYPE_FP64), 8);
  EXPECT_EQ(CollectiveOpName(v1::COLLECTIVE_OP_REDUCE_SCATTER), "reduce_scatter");
}

TEST(CollectiveMathTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("1MiB", "f"), 1 << 20);
  EXPECT_EQ(*ParseByteSize("1 GiB", "f"), 1 << 30);
  EXPECT_EQ(*ParseByteSize("64k", "f"), 64 << 10);
  EXPECT_EQ(*ParseByteSize("4096", "f"), 4096);
  EXPECT_EQ(*ParseByteSize("1MB", "f"), 1000000);
  EXPECT_EQ(*ParseByteSize("0.5KiB", "f"), 512);
  EXPECT_FALSE(ParseByteSize("1.3", "f").ok());
  EXPECT_FALSE(ParseByteSize("MiB", "f").ok());
  auto bad = ParseByteSize("12 parsecs", "--min");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--min"), std::string::npos);
  EXPECT_EQ(FormatBytes(1 << 20), "1 MiB");
  EXPECT_EQ(FormatBytes(3 << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(100), "100 B");
}

}  // namespace
}  // namespace benchd
