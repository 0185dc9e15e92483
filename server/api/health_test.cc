#include "server/api/health.h"

#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(NodeHealthTest, NodeServesOnlyWhileEveryDeviceDoes) {
  std::vector<std::pair<std::string, bool>> published;
  NodeHealth health({"cuda:0", "cuda:1"}, [&](const std::string& name, bool serving) {
    published.emplace_back(name, serving);
  });
  EXPECT_THAT(published, ElementsAre(Pair("benchd.v1.Bench/cuda:0", false),
                                     Pair("benchd.v1.Bench/cuda:1", false), Pair("", false),
                                     Pair("benchd.v1.Bench", false)));
  published.clear();
  health.Set("cuda:0", true);
  EXPECT_THAT(published, ElementsAre(Pair("benchd.v1.Bench/cuda:0", true)));
  published.clear();
  health.Set("cuda:1", true);
  EXPECT_THAT(published, ElementsAre(Pair("benchd.v1.Bench/cuda:1", true), Pair("", true),
                                     Pair("benchd.v1.Bench", true)));
  published.clear();
  health.Set("cuda:1", true);   // no change, nothing published
  health.Set("cuda:9", false);  // not a device here
  EXPECT_TRUE(published.empty());
  health.Set("cuda:1", false);
  EXPECT_THAT(published, ElementsAre(Pair("benchd.v1.Bench/cuda:1", false), Pair("", false),
                                     Pair("benchd.v1.Bench", false)));
}

}  // namespace
}  // namespace benchd::server
