#include "server/store/artifact_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

class ArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/benchd-artifact-store-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_EQ(mkdir((root_ + "/7").c_str(), 0755), 0);
    std::ofstream(root_ + "/7/trace.json") << std::string(2500, 'x');
    std::ofstream(root_ + "/7/b.svg") << "<svg/>";
    std::ofstream(root_ + "/7/half.json.tmp") << "{";
    std::ofstream(root_ + "/secret") << "no";
    ASSERT_EQ(symlink((root_ + "/secret").c_str(), (root_ + "/7/link.txt").c_str()), 0);
    ASSERT_EQ(mkdir((root_ + "/7/sub").c_str(), 0755), 0);
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf " + root_).c_str()), 0); }
  std::string root_;
};

TEST_F(ArtifactStoreTest, ListsRegularFilesByNameWithSizes) {
  ArtifactStore store(root_);
  auto list = store.List("7");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);  // not the .tmp, the link or the folder
  EXPECT_EQ((*list)[0].name(), "b.svg");
  EXPECT_EQ((*list)[0].size_bytes(), 6);
  EXPECT_EQ((*list)[1].name(), "trace.json");
  EXPECT_EQ((*list)[1].size_bytes(), 2500);
  auto none = store.List("8");  // a job that wrote nothing
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(store.List("../7").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.List("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ArtifactStoreTest, ReadsInChunksToTheEnd) {
  ArtifactStore store(root_);
  auto reader = store.Open("7", "trace.json");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), 2500);
  std::string all;
  int chunks = 0;
  while (!(*reader)->done()) {
    auto chunk = (*reader)->Next(1000);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    EXPECT_LE(chunk->size(), 1000u);
    all += *chunk;
    ++chunks;
  }
  EXPECT_EQ(chunks, 3);
  EXPECT_EQ(all, std::string(2500, 'x'));
}

TEST_F(ArtifactStoreTest, RefusesPathsAndNamesWhatTheJobHas) {
  ArtifactStore store(root_);
  for (const char* bad : {"../secret", "/etc/passwd", "..", ".hidden", "sub/x", ""}) {
    EXPECT_EQ(store.Open("7", bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto missing = store.Open("7", "nope.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("has b.svg, trace.json"));
  EXPECT_EQ(store.Open("7", "link.txt").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Open("7", "sub").status().code(), absl::StatusCode::kNotFound);
  // Half written (found by fuzz/artifact_name_fuzzer): not listed, so not served either.
  EXPECT_EQ(store.Open("7", "half.json.tmp").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(store.Open("9", "trace.json").status().message()), HasSubstr("none"));
}

// A job folder that is a symbolic link (here to a folder of files outside the
// artifacts root) is neither listed nor served, and neither is a link inside it.
TEST_F(ArtifactStoreTest, DoesNotFollowALinkedJobFolder) {
  ASSERT_EQ(mkdir((root_ + "/elsewhere").c_str(), 0755), 0);
  std::ofstream(root_ + "/elsewhere/passwd") << "root:x:0:0";
  ASSERT_EQ(mkdir((root_ + "/artifacts").c_str(), 0755), 0);
  ASSERT_EQ(symlink((root_ + "/elsewhere").c_str(), (root_ + "/artifacts/8").c_str()), 0);
  ArtifactStore store(root_ + "/artifacts");
  auto list = store.List("8");
  if (list.ok()) {
    EXPECT_TRUE(list->empty());
  } else {
    EXPECT_EQ(list.status().code(), absl::StatusCode::kFailedPrecondition) << list.status();
    EXPECT_THAT(std::string(list.status().message()), HasSubstr("not a folder"));
  }
  auto opened = store.Open("8", "passwd");
  EXPECT_FALSE(opened.ok());
  // A link to the linked folder's file from a real job folder: refused too.
  ASSERT_EQ(mkdir((root_ + "/artifacts/9").c_str(), 0755), 0);
  ASSERT_EQ(symlink((root_ + "/elsewhere/passwd").c_str(), (root_ + "/artifacts/9/p.txt").c_str()),
            0);
  EXPECT_EQ(store.Open("9", "p.txt").status().code(), absl::StatusCode::kNotFound);
  auto list9 = store.List("9");
  ASSERT_TRUE(list9.ok()) << list9.status();
  EXPECT_TRUE(list9->empty());
}

}  // namespace
}  // namespace benchd::server
