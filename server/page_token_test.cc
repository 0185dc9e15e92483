#include "server/page_token.h"

#include <string>
#include <vector>

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
