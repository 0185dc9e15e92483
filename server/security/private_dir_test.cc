#include "server/security/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_umask_ = umask(0);
    char tmpl[] = "/tmp/benchd-private-dir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    umask(old_umask_);
    ASSERT_EQ(std::system(("rm -rf " + root_).c_str()), 0);
  }
  static mode_t Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  std::string root_;
  mode_t old_umask_ = 0;
};

TEST_F(PrivateDirTest, MakesOrTightensA0700Folder) {
  const std::string made = root_ + "/logs";
  ASSERT_TRUE(MakePrivateDir(made).ok());
  EXPECT_EQ(Mode(made), 0700u);
  const std::string open = root_ + "/run";
  ASSERT_EQ(mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(Mode(open), 0777u);
  ASSERT_TRUE(MakePrivateDir(open).ok());
  EXPECT_EQ(Mode(open), 0700u);
}

TEST_F(PrivateDirTest, RefusesALinkAndDoesNotTouchItsTarget) {
  const std::string target = root_ + "/theirs";
  ASSERT_EQ(mkdir(target.c_str(), 0777), 0);
  const std::string link = root_ + "/run";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  absl::Status s = MakePrivateDir(link);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("symbolic link"));
  EXPECT_EQ(Mode(target), 0777u);
}

TEST_F(PrivateDirTest, TemporaryRunDirIsNewPrivateAndFits) {
  auto dir = MakeTemporaryRunDir({root_ + "/", "/tmp"}, 22);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_THAT(*dir, StartsWith(absl::StrCat(root_, "/benchd-run-", getuid(), "-", getpid(), "-")));
  EXPECT_EQ(Mode(*dir), 0700u);
  auto other = MakeTemporaryRunDir({root_}, 22);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*dir, *other);
  // A base too long for a socket path is skipped; a missing one is skipped.
  const std::string deep = root_ + "/" + std::string(100, 'd');
  ASSERT_EQ(mkdir(deep.c_str(), 0700), 0);
  auto fallback = MakeTemporaryRunDir({deep, root_ + "/missing", root_}, 22);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_THAT(*fallback, StartsWith(root_ + "/benchd-run-"));
  auto none = MakeTemporaryRunDir({deep}, 22);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("too long"));
}

}  // namespace
}  // namespace benchd::server
