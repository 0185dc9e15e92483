// A data dir whose artifacts belong to another store: adopted beside a new,
// empty store (ids start above the old folders), refused beside a store with
// jobs of its own; never a new job served an old job's files.
#include "server/store/artifact_owner.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

class ArtifactOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "benchd-owner-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    artifacts_ = dir_ + "/artifacts";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::unique_ptr<Store> Open(const std::string& name = "benchd.sqlite3") {
    auto store = Store::Open(dir_ + "/" + name);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  void DeleteStore(const std::string& name = "benchd.sqlite3") {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(dir_ + "/" + name + suffix);
    }
  }
  static std::string InsertJob(Store& store) {
    v1::Job job;
    job.set_state(v1::JOB_STATE_SUCCEEDED);
    job.add_devices("cpu:0");
    return *store.Insert(job);
  }
  void MakeFolder(const std::string& id) {
    std::filesystem::create_directories(artifacts_ + "/" + id);
    std::ofstream(artifacts_ + "/" + id + "/trace.json") << "{}";
  }
  std::string Marker() {
    std::ifstream f(artifacts_ + "/" + kArtifactsOwnerFile);
    std::string id;
    f >> id;
    return id;
  }

  std::string dir_, artifacts_;
};

TEST_F(ArtifactOwnerTest, ANewDataDirIsMarkedAsThisStores) {
  auto store = Open();
  ASSERT_TRUE(ClaimArtifactsDir(*store, artifacts_).ok());
  EXPECT_EQ(Marker(), store->store_id());
  EXPECT_EQ(InsertJob(*store), "1");
  MakeFolder("1");
  EXPECT_TRUE(ClaimArtifactsDir(*store, artifacts_).ok());  // the next start
}

TEST_F(ArtifactOwnerTest, ADeletedStoreNeverLendsAnOldJobsIdToANewJob) {
  {
    auto old = Open();
    ASSERT_TRUE(ClaimArtifactsDir(*old, artifacts_).ok());
    for (int i = 0; i < 3; ++i) InsertJob(*old);
    MakeFolder("1");
    MakeFolder("3");
  }
  DeleteStore();
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto claimed = ClaimArtifactsDir(*store, artifacts_);
  ASSERT_TRUE(claimed.ok()) << claimed;
  EXPECT_EQ(Marker(), store->store_id());
  EXPECT_EQ(InsertJob(*store), "4");  // not 1: artifacts/1 is the old job 1's
}

TEST_F(ArtifactOwnerTest, AStoreWithJobsBesideAnotherStoresArtifactsIsRefusedSayingWhich) {
  std::string owner;
  {
    auto old = Open();
    ASSERT_TRUE(ClaimArtifactsDir(*old, artifacts_).ok());
    owner = old->store_id();
    InsertJob(*old);
    MakeFolder("1");
  }
  // Another daemon's store put in its place.
  DeleteStore();
  auto other = Open();
  InsertJob(*other);
  InsertJob(*other);
  auto claimed = ClaimArtifactsDir(*other, artifacts_);
  EXPECT_EQ(claimed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claimed.message(), HasSubstr(artifacts_));
  EXPECT_THAT(claimed.message(), HasSubstr(owner));
  EXPECT_THAT(claimed.message(), HasSubstr(other->store_id()));
  EXPECT_EQ(Marker(), owner);  // untouched
}

TEST_F(ArtifactOwnerTest, ADataDirFromBeforeTheMarkerIsAdoptedWhenItsFoldersAreTheStores) {
  auto store = Open();
  InsertJob(*store);
  InsertJob(*store);
  MakeFolder("2");
  ASSERT_TRUE(ClaimArtifactsDir(*store, artifacts_).ok());
  EXPECT_EQ(Marker(), store->store_id());
}

TEST_F(ArtifactOwnerTest, ADataDirFromBeforeTheMarkerWithForeignFoldersIsRefused) {
  auto store = Open();
  InsertJob(*store);
  MakeFolder("1");
  MakeFolder("7");  // a job this store never had
  auto claimed = ClaimArtifactsDir(*store, artifacts_);
  EXPECT_EQ(claimed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claimed.message(), HasSubstr("(7)"));
  EXPECT_THAT(claimed.message(), HasSubstr(artifacts_));
  EXPECT_EQ(Marker(), "");
}

}  // namespace
}  // namespace benchd::server
