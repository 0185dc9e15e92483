#include "client/format.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

TEST(FormatThousands, GroupsOfThree) {
  EXPECT_EQ(FormatThousands(0), "0");
  EXPECT_EQ(FormatThousands(999), "999");
  EXPECT_EQ(FormatThousands(1000), "1,000");
  EXPECT_EQ(FormatThousands(128625408), "128,625,408");
  EXPECT_EQ(FormatThousands(-1234567), "-1,234,567");
  EXPECT_EQ(FormatThousands(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
}

TEST(FormatMs, SecondsToMillisecondsWithThreeDecimals) {
  EXPECT_EQ(FormatMs(0.0123456), "12.346");
  EXPECT_EQ(FormatMs(0), "0.000");
  EXPECT_EQ(FormatMs(1.5), "1500.000");
  EXPECT_EQ(FormatMs(0.0000004), "0.000");
}

TEST(FormatOthers, GiBPercentSeconds) {
  EXPECT_EQ(FormatGiB(int64_t{5} << 30), "5.00");
  EXPECT_EQ(FormatGiB(int64_t{3} << 29), "1.50");
  EXPECT_EQ(FormatPercent(0.0123), "1.23%");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3640320), "3.47 MiB");
  EXPECT_EQ(FormatBytes(int64_t{80} << 30), "80.00 GiB");
  EXPECT_EQ(FormatSeconds(1.234), "1.23 s");
}

TEST(FormatRate, SignificantDigitsThenThousands) {
  EXPECT_EQ(FormatRate(0), "0");
  EXPECT_EQ(FormatRate(0.00123), "0.00123");
  EXPECT_EQ(FormatRate(1.5), "1.50");
  EXPECT_EQ(FormatRate(98.72), "98.7");
  EXPECT_EQ(FormatRate(40960.4), "40,960");
}

TEST(FormatTime, UtcOrDash) {
  google::protobuf::Timestamp t;
  EXPECT_EQ(FormatTime(t), "-");
  t.set_seconds(1795000000);
  EXPECT_EQ(FormatTime(t), "2026-11-18 11:06:40");
}

TEST(SecondsBetween, NegativeWhenUnset) {
  google::protobuf::Timestamp a, b;
  EXPECT_LT(SecondsBetween(a, b), 0);
  a.set_seconds(10);
  b.set_seconds(12);
  b.set_nanos(500000000);
  EXPECT_DOUBLE_EQ(SecondsBetween(a, b), 2.5);
}

TEST(Names, CodesStatesVersions) {
  EXPECT_EQ(CodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(CodeName(0), "OK");
  EXPECT_EQ(CodeName(99), "CODE_99");
  EXPECT_EQ(StateName(v1::JOB_STATE_SUCCEEDED), "SUCCEEDED");
  EXPECT_EQ(StateName(v1::JOB_STATE_UNSPECIFIED), "UNKNOWN");
  v1::Versions v;
  EXPECT_EQ(FormatVersions(v), "-");
  v.set_benchd("0.1.0");
  v.set_torch("2.11.0");
  v.set_cuda_runtime("13.0");
  v.set_cuda_driver("13.0");
  v.set_nccl("2.28.3");
  EXPECT_EQ(FormatVersions(v), "benchd 0.1.0, torch 2.11.0, CUDA 13.0 (driver 13.0), NCCL 2.28.3");
}

TEST(ChoicesText, CommasThenOr) {
  EXPECT_EQ(ChoicesText({}), "");
  EXPECT_EQ(ChoicesText({"a"}), "a");
  EXPECT_EQ(ChoicesText({"a", "b"}), "a or b");
  EXPECT_EQ(ChoicesText({"a", "b", "c"}), "a, b or c");
}

}  // namespace
}  // namespace benchd::client
