#include "common/job_id.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
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

// A megabyte of id is refused quoting kMaxQuotedBytes of it and its length.
TEST(JobIdTest, AHugeIdIsQuotedCutShort) {
  const std::string huge(1 << 20, '7');
  const std::string message(CheckJobId(huge).message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat("'", std::string(kMaxQuotedBytes, '7'), "'... (",
                                              1 << 20, " bytes) is not a job id")));
  EXPECT_LT(message.size(), 200u);
  // The longest id accepted is kMaxJobIdBytes digits, one more is refused.
  EXPECT_TRUE(ParseJobId(std::string(kMaxJobIdBytes, '9')).ok());
  EXPECT_FALSE(ParseJobId(std::string(kMaxJobIdBytes + 1, '1')).ok());
}

}  // namespace
}  // namespace benchd
