#include "client/token_command.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "common/token_hash.h"

namespace benchd::client {
namespace {

TEST(TokenCommand, RolesAreReadSubmitAdmin) {
  EXPECT_TRUE(CheckTokenRole("read").ok());
  EXPECT_TRUE(CheckTokenRole("submit").ok());
  EXPECT_TRUE(CheckTokenRole("admin").ok());
  for (const char* bad : {"", "Admin", "root", "write", "read "}) {
    absl::Status s = CheckTokenRole(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--role"), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("read"), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("admin"), absl::string_view::npos) << s;
  }
}

TEST(TokenCommand, NamesAreShortAndSpaceFree) {
  for (const char* good : {"alice", "grafana", "ops.team-1_x@example.org", "a"}) {
    EXPECT_TRUE(CheckTokenName(good).ok()) << good;
  }
  EXPECT_TRUE(CheckTokenName(std::string(64, 'x')).ok());

  absl::Status too_long = CheckTokenName(std::string(65, 'x'));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("65 characters"), absl::string_view::npos) << too_long;
  EXPECT_NE(too_long.message().find("1 to 64"), absl::string_view::npos) << too_long;

  absl::Status empty = CheckTokenName("");
  EXPECT_NE(empty.message().find("--name is 0 characters"), absl::string_view::npos) << empty;

  absl::Status space = CheckTokenName("alice smith");
  EXPECT_EQ(space.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(space.message().find("' ' at position 5"), absl::string_view::npos) << space;

  absl::Status control = CheckTokenName("a\tb");
  EXPECT_NE(control.message().find("byte 0x09 at position 1"), absl::string_view::npos) << control;
  EXPECT_FALSE(CheckTokenName("ali\xc3\xa7").ok());  // non-ASCII letter
}

TEST(TokenCommand, AuthFileLineHoldsTheHashNotTheToken) {
  const std::string line = AuthFileLine("submit", "alice", "benchd_secret");
  EXPECT_EQ(line, "submit alice " + TokenHash("benchd_secret"));
  EXPECT_EQ(line.find("benchd_secret"), std::string::npos);
}

// Runs RunTokenHash on `input`; returns (exit code, stdout, stderr).
struct Ran {
  int code;
  std::string out, err;
};
Ran HashOf(const std::string& input) {
  FILE* in = fmemopen(const_cast<char*>(input.data()), input.size(), "r");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunTokenHash(in);
  Ran r{code, ::testing::internal::GetCapturedStdout(), ::testing::internal::GetCapturedStderr()};
  std::fclose(in);
  return r;
}

TEST(TokenCommand, HashReadsTheFirstLineOfStdin) {
  Ran r = HashOf("  benchd_abc  \nignored second line\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, TokenHash("benchd_abc") + "\n");
  EXPECT_EQ(r.err, "");

  Ran no_newline = HashOf("benchd_abc");
  EXPECT_EQ(no_newline.out, TokenHash("benchd_abc") + "\n");
}

TEST(TokenCommand, HashRefusesEmptyAndOddInput) {
  Ran empty = HashOf("");
  EXPECT_EQ(empty.code, 2);
  EXPECT_EQ(empty.out, "");
  EXPECT_NE(empty.err.find("stdin: the first line is empty"), std::string::npos) << empty.err;

  Ran spaced = HashOf("two words\n");
  EXPECT_EQ(spaced.code, 2);
  EXPECT_NE(spaced.err.find("byte 0x20 at position 3"), std::string::npos) << spaced.err;

  Ran huge = HashOf(std::string(10000, 'x'));
  EXPECT_EQ(huge.code, 2);
  EXPECT_NE(huge.err.find("over 4096 bytes"), std::string::npos) << huge.err;
}

TEST(TokenCommand, CreatePrintsTheTokenAloneAndTheLineOnStderr) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunTokenCreate("read", "grafana");
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(code, 0) << err;
  ASSERT_EQ(out.size(), std::string("benchd_").size() + 43 + 1) << out;
  EXPECT_EQ(out.rfind("benchd_", 0), 0u) << out;
  const std::string token = out.substr(0, out.size() - 1);
  EXPECT_NE(err.find("\nread grafana " + TokenHash(token) + "\n"), std::string::npos) << err;
  EXPECT_NE(err.find("--auth-file"), std::string::npos) << err;
  EXPECT_EQ(err.find(token), std::string::npos) << "the token must not be on stderr";
}

TEST(TokenCommand, CreateRefusesBadRoleOrNameBeforeMakingAToken) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunTokenCreate("superuser", "alice");
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 2);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("--role \"superuser\""), std::string::npos) << err;

  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunTokenCreate("admin", "bad name"), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("--name"), std::string::npos);
}

}  // namespace
}  // namespace benchd::client
