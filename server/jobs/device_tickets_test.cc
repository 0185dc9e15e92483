#include "server/jobs/device_tickets.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

TEST(DeviceTicketsTest, GroupJobWaitsForEveryDeviceInOrder) {
  DeviceTickets t({"cpu:0", "cpu:1"});
  const uint64_t a = t.Acquire({"cpu:1"}, nullptr);  // a job on cpu:1 runs
  ASSERT_GT(a, 0u);
  std::atomic<bool> group_running{false};
  std::thread group([&] {
    const uint64_t g = t.Acquire({"cpu:0", "cpu:1"}, nullptr);
    group_running = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    group_running = false;
    t.Release(g);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(group_running);  // cpu:1 is busy
  // A later job on cpu:0 waits behind the group job (its ticket came first).
  std::atomic<bool> later_ran{false};
  std::thread later([&] {
    const uint64_t l = t.Acquire({"cpu:0"}, nullptr);
    EXPECT_FALSE(group_running);
    later_ran = true;
    t.Release(l);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(later_ran);
  t.Release(a);
  group.join();
  later.join();
  EXPECT_TRUE(later_ran);
}

TEST(DeviceTicketsTest, NoDeadlockBetweenOverlappingGroups) {
  DeviceTickets t({"cpu:0", "cpu:1", "cpu:2"});
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  const std::vector<std::vector<std::string>> sets = {{"cpu:0", "cpu:1"},
                                                      {"cpu:1", "cpu:2"},
                                                      {"cpu:2", "cpu:0"},
                                                      {"cpu:0"},
                                                      {"cpu:0", "cpu:1", "cpu:2"}};
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      const uint64_t k = t.Acquire(sets[i % sets.size()], nullptr);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      t.Release(k);
      ++done;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(done, 50);
}

TEST(DeviceTicketsTest, GivingUpLeavesNothingHeld) {
  DeviceTickets t({"cpu:0"});
  const uint64_t a = t.Acquire({"cpu:0"}, nullptr);
  EXPECT_EQ(t.Acquire({"cpu:0"}, [] { return true; }), 0u);
  t.Release(a);
  const uint64_t b = t.Acquire({"cpu:0"}, [] { return false; });
  EXPECT_GT(b, 0u);
  t.Release(b);
}

}  // namespace
}  // namespace benchd::server
