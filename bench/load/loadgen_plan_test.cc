#include "bench/load/loadgen_plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace benchd::loadgen {
namespace {

using ::testing::HasSubstr;

std::string Names(const std::vector<Kind>& cycle) {
  std::string s;
  for (Kind k : cycle) s += std::string(KindName(k)) + " ";
  return s;
}

TEST(LoadgenPlan, CycleMatchesClientsPy) {
  // clients.py's kind_cycle for 6:3:1 (python3 -c 'import clients; ...').
  auto mix = ParseMix("GetJob=6,ListJobs=3,GetNodeInfo=1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(Names(KindCycle(*mix)),
            "GetJob ListJobs GetJob GetJob GetNodeInfo ListJobs GetJob GetJob ListJobs GetJob ");
}

TEST(LoadgenPlan, OneKind) {
  auto mix = ParseMix("ListJobs=2");
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(Names(KindCycle(*mix)), "ListJobs ListJobs ");
}

TEST(LoadgenPlan, BadMixNamesWhatCame) {
  for (const char* bad : {"GetJob", "GetJob=0", "GetJob=x", "Watch=1", "GetJob=1,GetJob=2", ""}) {
    auto mix = ParseMix(bad);
    ASSERT_FALSE(mix.ok()) << bad;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(mix.status().message()), HasSubstr("--mix"));
    EXPECT_THAT(std::string(mix.status().message()), HasSubstr("GetNodeInfo"));
  }
}

TEST(LoadgenPlan, ReadLinesKeepsEmptyLines) {
  const std::string path = testing::TempDir() + "/loadgen_plan_lines.txt";
  std::ofstream(path) << "\nabc\n\nxyz\n";
  auto lines = ReadLines("--page-tokens", path);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(*lines, (std::vector<std::string>{"", "abc", "", "xyz"}));
  std::remove(path.c_str());
  auto missing = ReadLines("--page-tokens", path);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("--page-tokens"));
}

TEST(LoadgenPlan, PercentileIsReportPysNearestRank) {
  // report.percentile(list(range(1, 1001)), q) for q = 50, 90, 99, 100, 0.
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 500);
  EXPECT_EQ(Percentile(v, 90), 900);
  EXPECT_EQ(Percentile(v, 99), 990);
  EXPECT_EQ(Percentile(v, 100), 1000);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

}  // namespace
}  // namespace benchd::loadgen
