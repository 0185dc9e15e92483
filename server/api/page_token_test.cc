#include "server/api/page_token.h"

#include <limits>
#include <string>
#include <vector>

#include "common/limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

TEST(PageTokenTest, RoundTripsWithTheSameFilters) {
  JobFilter f;
  f.state = v1::JOB_STATE_FAILED;
  f.device = "cuda:1";
  const std::string token = EncodePageToken(f, 4242);
  EXPECT_EQ(*DecodePageToken(token, f), 4242);
  EXPECT_EQ(*DecodePageToken("", f), 0);
  // A device name with the separator in it still round-trips.
  f.device = "a|b";
  EXPECT_EQ(*DecodePageToken(EncodePageToken(f, 7), f), 7);
}

// Every token we give fits the limit, with the longest device name and id;
// one over it is refused naming the limit, without quoting it back.
TEST(PageTokenTest, TokensFitTheLimitAndLongerOnesAreRefused) {
  JobFilter f;
  f.state = v1::JOB_STATE_INTERRUPTED;
  f.kind = v1::JOB_KIND_COLLECTIVE;
  f.device = std::string(kMaxDeviceNameBytes, 'c');
  const std::string longest = EncodePageToken(f, std::numeric_limits<int64_t>::max());
  EXPECT_LE(longest.size(), kMaxPageTokenBytes);
  EXPECT_EQ(*DecodePageToken(longest, f), std::numeric_limits<int64_t>::max());
  const auto huge = DecodePageToken(std::string(1 << 20, 'A'), f);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(huge.status().message(),
            "page_token: expected a ListJobs reply's next_page_token (at most 256 bytes), got "
            "1048576 bytes");
  EXPECT_EQ(DecodePageToken(std::string(kMaxPageTokenBytes + 1, 'A'), f).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PageTokenTest, RefusesOtherFiltersAndForgeries) {
  JobFilter f;
  f.kind = v1::JOB_KIND_PROFILE;
  const std::string token = EncodePageToken(f, 10);
  JobFilter other = f;
  other.kind = v1::JOB_KIND_MEMORY;
  EXPECT_THAT(DecodePageToken(token, other).status().message(), HasSubstr("other filters"));
  for (const std::string& bad :
       std::vector<std::string>{"x", "!!!", "MXwwfDB8MHw", EncodePageToken(f, 0)}) {
    const auto decoded = DecodePageToken(bad, f);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr("page_token: "));
  }
}

}  // namespace
}  // namespace benchd::server
