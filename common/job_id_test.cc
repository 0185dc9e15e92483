#include "common/job_id.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

using ::testing::HasSubstr;

TEST(JobIdTest, AcceptsPositiveDecimalIntegers) {
  EXPECT_EQ(*ParseJobId("1"), 1);
  EXPECT_EQ(*ParseJobId("42"), 42);
  EXPECT_EQ(*ParseJobId("999999999999999999"), 999999999999999999);
}

TEST(JobIdTest, RefusesEverythingElseNamingTheField) {
  for (const std::string& bad :
       std::vector<std::string>{"", "0", "007", "-1", "+1", "1.0", "j1", " 1", "1 ", "../1", "1/2",
                                "abc", "1234567890123456789", std::string("1\0", 2)}) {
    const auto parsed = ParseJobId(bad, "ids[3]");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("ids[3]: ")) << bad;
  }
  EXPECT_EQ(CheckJobId("j1").message(),
            "job_id: 'j1' is not a job id; expected a positive integer such as 42");
  EXPECT_EQ(CheckJobId("").message(),
            "job_id: '' is not a job id; expected a positive integer such as 42");
  // Control bytes are escaped in the message, not echoed raw.
  EXPECT_THAT(CheckJobId("a\nb").message(), HasSubstr("'a\\nb'"));
}

}  // namespace
}  // namespace benchd
