#include "common/artifacts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

TEST(ArtifactsTest, TheJobDirIsNamedByAJobIdOnly) {
  for (const char* bad : {"", "..", "../etc", "a/b", "job_a-1", "017"}) {
    EXPECT_EQ(JobArtifactsDir("/d", bad, "memory").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(JobArtifactsDir("/d/", "17", "memory").value(), "/d/17");
}

TEST(ArtifactsTest, AnotherMembersRunGoesUnderThatMembersFolder) {
  // Node.Run names the sending member (server/cluster/node_service.cc): its
  // run never writes into this node's own job folders.
  EXPECT_EQ(JobArtifactsDir("/d", "node0/17", "ddp").value(), "/d/node0/17");
  for (const char* bad :
       {"node0/", "/17", "node0/../1", "Node0/1", "0node/1", "node0/1/2", "a/b/17", "../17"}) {
    EXPECT_EQ(JobArtifactsDir("/d", bad, "ddp").status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ArtifactsTest, ArtifactNamesAreOneComponentNeverHidden) {
  EXPECT_TRUE(IsArtifactName("trace.json"));
  EXPECT_TRUE(IsArtifactName("memory-ctx128-train_step-fp32.pickle"));
  EXPECT_FALSE(IsArtifactName(""));
  EXPECT_FALSE(IsArtifactName("."));
  EXPECT_FALSE(IsArtifactName(".."));
  EXPECT_FALSE(IsArtifactName(".hidden"));
  EXPECT_FALSE(IsArtifactName("../17/trace.json"));
  EXPECT_FALSE(IsArtifactName("/etc/passwd"));
  EXPECT_FALSE(IsArtifactName(std::string("a\0b", 3)));
}

TEST(ArtifactsTest, ANameIsAtMostTheLimitAndARefusalQuotesItCutShort) {
  EXPECT_TRUE(IsArtifactName(std::string(kMaxArtifactNameBytes, 'a')));
  EXPECT_FALSE(IsArtifactName(std::string(kMaxArtifactNameBytes + 1, 'a')));
  EXPECT_TRUE(CheckArtifactName("trace.json").ok());
  const absl::Status huge = CheckArtifactName(std::string(1 << 20, 'a'), "name");
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      huge.message(),
      absl::StrCat("name: expected an artifact name as ListArtifacts gives it (one file name "
                   "of 1..255 letters, digits, '_', '-' and '.', not starting with '.'), got '",
                   std::string(kMaxQuotedBytes, 'a'), "'... (1048576 bytes)"));
  // Escaped, not echoed raw.
  EXPECT_NE(CheckArtifactName("a\nb").message().find("got 'a\\nb'"), std::string::npos);
}

TEST(ArtifactsTest, JobArtifactsDir) {
  EXPECT_EQ(*JobArtifactsDir("/data/artifacts/", "17", "profile"), "/data/artifacts/17");
  const auto none = JobArtifactsDir("", "17", "profile");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message().substr(0, 9), "profile: ");
  EXPECT_EQ(JobArtifactsDir("/d", "../x", "memory").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ArtifactsTest, WritesThroughATemporaryFileIntoNewDirectories) {
  char tmpl[] = "/tmp/benchd-artifacts-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/a/b";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(dir).ok());  // again: already there is fine
  const std::string path = dir + "/x.json";
  ASSERT_TRUE(WriteFileAtomically(path, std::string("{\"a\":\0}", 7)).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), std::string("{\"a\":\0}", 7));
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  EXPECT_FALSE(WriteFileAtomically(std::string(tmpl) + "/missing/x", "y").ok());
  ASSERT_EQ(std::system(("rm -rf " + std::string(tmpl)).c_str()), 0);
}

}  // namespace
}  // namespace benchd
