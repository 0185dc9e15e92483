#include "common/token_hash.h"

#include "gtest/gtest.h"

namespace benchd {
namespace {

TEST(TokenHash, IsSha256InLowercaseHex) {
  // sha256("abc"), FIPS 180-2 appendix B.1.
  EXPECT_EQ(TokenHash("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(TokenHash("abc"), TokenHash("abd"));
}

TEST(NewToken, IsRandomUrlSafeAndPrefixed) {
  auto a = NewToken();
  auto b = NewToken();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->rfind("benchd_", 0), 0u);
  EXPECT_EQ(a->size(), 7u + 43u);
  EXPECT_EQ(a->find_first_not_of(
                "benchd_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"),
            std::string::npos);
}

TEST(ConstantTimeEquals, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("sha256:ab", "sha256:ab"));
  EXPECT_FALSE(ConstantTimeEquals("sha256:ab", "sha256:ac"));
  EXPECT_FALSE(ConstantTimeEquals("sha256:ab", "sha256:a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace benchd
