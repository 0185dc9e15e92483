#include "server/security/auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "benchd/v1/bench.grpc.pb.h"
#include "common/token_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

TEST(AuthFileTest, ParsesTokensAndSubjectsWithRoles) {
  const std::string text = "# who may do what\n\n" + std::string("submit alice ") +
                           TokenHash("alice-token") + "\n" + "read   grafana\t" +
                           TokenHash("grafana-token") + "  \n" +
                           "admin ops subject:CN=ops,O=benchd test\n";
  auto file = AuthFile::Parse(text, "auth.txt");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 3u);
  auto alice = file->ForToken("alice-token");
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->role, v1::ROLE_SUBMIT);
  EXPECT_FALSE(file->ForToken("alice-token ").has_value());
  EXPECT_FALSE(file->ForToken("").has_value());
  auto ops = file->ForSubject("CN=ops,O=benchd test");
  ASSERT_TRUE(ops.has_value());
  EXPECT_EQ(ops->role, v1::ROLE_ADMIN);
  EXPECT_FALSE(file->ForSubject("CN=ops").has_value());
}

TEST(AuthFileTest, ATrailingCommentIsNotPartOfAHash) {
  // Comments are whole lines: a subject takes the rest of its line, so a
  // trailing "# ..." is refused rather than guessed at.
  auto file = AuthFile::Parse("read g " + TokenHash("t") + " # x\n", "f");
  ASSERT_FALSE(file.ok());  // "sha256:... # x" is not a hash: say so rather than guess
  EXPECT_THAT(file.status().message(), HasSubstr("f:1"));
}

TEST(AuthFileTest, BadLinesNameTheLineAndWhatIsWrong) {
  const std::string hash = TokenHash("x");
  struct Case {
    std::string text, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"write alice " + hash, "unknown role 'write'"},
           {"read alice", "three fields"},
           {"read al/ice " + hash, "name 'al/ice'"},
           {"read " + std::string(65, 'a') + " " + hash, "1..64"},
           {"read alice sha256:abc", "64 lowercase hex"},
           {"read alice sha256:" + std::string(64, 'A'), "64 lowercase hex"},
           {"read alice password", "neither 'sha256:' nor 'subject:'"},
           {"read alice subject:", "a subject is 1..1024"},
           {"read alice " + hash + "\nadmin bob " + hash, "already given to 'alice'"},
       }) {
    auto file = AuthFile::Parse("# header\n" + c.text + "\n", "/etc/benchd/auth");
    ASSERT_FALSE(file.ok()) << c.text;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(file.status().message(), HasSubstr("/etc/benchd/auth:")) << c.text;
  }
}

TEST(AuthFileTest, LoadRefusesAFileOthersMayWrite) {
  const std::string path = ::testing::TempDir() + "/auth-file-test";
  {
    std::ofstream out(path);
    out << "admin ops " << TokenHash("t") << "\n";
  }
  chmod(path.c_str(), 0600);
  EXPECT_TRUE(AuthFile::Load(path).ok());
  chmod(path.c_str(), 0666);
  auto loaded = AuthFile::Load(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("chmod go-w"));
  std::remove(path.c_str());
  EXPECT_EQ(AuthFile::Load(path).status().code(), absl::StatusCode::kNotFound);
}

// An empty file (comments only) or a directory would start a daemon that
// refuses every caller without a word: both are refused at load, saying why.
TEST(AuthFileTest, LoadRefusesAnEmptyFileAndADirectory) {
  const std::string path = ::testing::TempDir() + "/auth-file-empty";
  {
    std::ofstream out(path);
    out << "# nobody yet\n\n";
  }
  chmod(path.c_str(), 0600);
  auto empty = AuthFile::Load(path);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("has no entries, so every caller would be"));
  std::remove(path.c_str());
  const std::string dir = ::testing::TempDir() + "/auth-file-dir";
  mkdir(dir.c_str(), 0700);
  auto directory = AuthFile::Load(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(), HasSubstr("is a directory"));
  rmdir(dir.c_str());
}

TEST(RequiredRoleTest, EveryBenchMethodHasARole) {
  const auto* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("benchd.v1.Bench");
  ASSERT_NE(service, nullptr);
  ASSERT_GE(service->method_count(), 13);
  for (int i = 0; i < service->method_count(); ++i) {
    EXPECT_NE(RequiredRole(service->method(i)->name()), v1::ROLE_UNSPECIFIED)
        << service->method(i)->name() << " has no role in RequiredRole: add it";
  }
  EXPECT_EQ(RequiredRole("Submit"), v1::ROLE_SUBMIT);
  EXPECT_EQ(RequiredRole("GetJob"), v1::ROLE_READ);
  EXPECT_EQ(RequiredRole("DestroyGroup"), v1::ROLE_ADMIN);
  EXPECT_EQ(RequiredRole("Estimate"), v1::ROLE_READ);
  EXPECT_EQ(RequiredRole("NoSuchMethod"), v1::ROLE_UNSPECIFIED);
}

}  // namespace
}  // namespace benchd::server
