#include "server/jobs/job_queue.h"

#include <thread>

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

TEST(JobQueueTest, PopsInSubmissionOrderPerDevice) {
  JobQueue q({"cpu:0", "cuda:0"});
  ASSERT_TRUE(q.Push("cpu:0", "1"));
  ASSERT_TRUE(q.Push("cuda:0", "2"));
  ASSERT_TRUE(q.Push("cpu:0", "3"));
  EXPECT_EQ(q.Depth("cpu:0"), 2u);
  EXPECT_EQ(q.Pop("cpu:0"), "1");
  EXPECT_EQ(q.Pop("cpu:0"), "3");
  EXPECT_EQ(q.Pop("cuda:0"), "2");
  EXPECT_EQ(q.Depth("cpu:0"), 0u);
}

TEST(JobQueueTest, UnknownDeviceIsRefused) {
  JobQueue q({"cpu:0"});
  EXPECT_FALSE(q.Push("cuda:7", "1"));
  EXPECT_EQ(q.Pop("cuda:7"), std::nullopt);
}

TEST(JobQueueTest, RemoveTakesOutOnlyQueuedJobs) {
  JobQueue q({"cpu:0"});
  q.Push("cpu:0", "1");
  q.Push("cpu:0", "2");
  q.Push("cpu:0", "3");
  EXPECT_TRUE(q.Remove("2"));
  EXPECT_FALSE(q.Remove("2"));
  EXPECT_FALSE(q.Remove("99"));
  EXPECT_EQ(q.Pop("cpu:0"), "1");
  EXPECT_FALSE(q.Remove("1"));  // already taken by the dispatcher
  EXPECT_EQ(q.Pop("cpu:0"), "3");
}

TEST(JobQueueTest, PopBlocksUntilPushOrClose) {
  JobQueue q({"cpu:0"});
  std::optional<std::string> got;
  std::thread t([&] { got = q.Pop("cpu:0"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.Push("cpu:0", "7");
  t.join();
  EXPECT_EQ(got, "7");

  std::thread waiter([&] { got = q.Pop("cpu:0"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.Close();
  waiter.join();
  EXPECT_EQ(got, std::nullopt);
  EXPECT_FALSE(q.Push("cpu:0", "8"));
}

}  // namespace
}  // namespace benchd::server
