#include "server/jobs/event_hub.h"

#include <thread>

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

v1::JobEvent Log(const std::string& job, const std::string& text) {
  v1::JobEvent e;
  e.set_job_id(job);
  e.set_log(text);
  return e;
}

v1::JobEvent Done(const std::string& job) {
  v1::JobEvent e;
  e.set_job_id(job);
  e.mutable_result()->set_id(job);
  return e;
}

TEST(EventHubTest, SubscriberGetsHistoryThenLiveEvents) {
  EventHub hub;
  hub.Publish(Log("1", "a"));
  hub.Publish(Log("1", "b"));
  std::vector<std::string> live;
  auto sub = hub.Subscribe("1", [&](const v1::JobEvent& e) { live.push_back(e.log()); });
  ASSERT_NE(sub.id, 0u);
  ASSERT_EQ(sub.history.size(), 2u);
  EXPECT_EQ(sub.history[0].log(), "a");
  hub.Publish(Log("1", "c"));
  hub.Publish(Log("2", "other job"));
  EXPECT_EQ(live, std::vector<std::string>{"c"});
  hub.Unsubscribe("1", sub.id);
  hub.Publish(Log("1", "d"));
  EXPECT_EQ(live.size(), 1u);
}

TEST(EventHubTest, UnknownJobHasNoSubscription) {
  EventHub hub;
  EXPECT_EQ(hub.Subscribe("42", [](const v1::JobEvent&) {}).id, 0u);
}

TEST(EventHubTest, NothingFollowsATerminalEvent) {
  EventHub hub;
  hub.Publish(Log("1", "a"));
  hub.Publish(Done("1"));
  hub.Publish(Log("1", "late"));
  auto sub =
      hub.Subscribe("1", [](const v1::JobEvent&) { FAIL() << "no live events after the end"; });
  ASSERT_EQ(sub.history.size(), 2u);
  EXPECT_TRUE(IsTerminal(sub.history.back()));
}

TEST(EventHubTest, OldFinishedHistoriesAreDropped) {
  EventHub hub(/*max_finished=*/2);
  for (const char* id : {"1", "2", "3"}) hub.Publish(Done(id));
  EXPECT_EQ(hub.Subscribe("1", [](const v1::JobEvent&) {}).id, 0u);
  EXPECT_NE(hub.Subscribe("3", [](const v1::JobEvent&) {}).id, 0u);
}

// A 100,000-step job's events (and its result, in the terminal event) must
// not stay in memory once it has ended: Watch answers from the store then.
TEST(EventHubTest, ALongHistoryIsDroppedAtItsEnd) {
  EventHub hub(/*max_finished=*/256, /*max_finished_bytes=*/1 << 20,
               /*max_history_bytes=*/64 << 10);
  for (int i = 0; i < 10000; ++i) hub.Publish(Log("1", "a step of a long run"));
  hub.Publish(Log("2", "still running"));
  EXPECT_EQ(hub.HeldEvents(), 10001u);
  hub.Publish(Done("1"));
  EXPECT_EQ(hub.HeldEvents(), 1u);  // job 2's
  EXPECT_EQ(hub.Subscribe("1", [](const v1::JobEvent&) {}).id, 0u);
  EXPECT_NE(hub.Subscribe("2", [](const v1::JobEvent&) {}).id, 0u);
}

// Short histories stay for late watchers, but never more than the byte budget.
TEST(EventHubTest, FinishedHistoriesStayWithinTheirByteBudget) {
  EventHub hub(/*max_finished=*/1000, /*max_finished_bytes=*/64 << 10,
               /*max_history_bytes=*/16 << 10);
  const std::string line(1000, 'x');
  for (int job = 1; job <= 100; ++job) {
    const std::string id = std::to_string(job);
    for (int i = 0; i < 10; ++i) hub.Publish(Log(id, line));  // ~10 KB each
    hub.Publish(Done(id));
  }
  EXPECT_LE(hub.HeldEvents(), 11u * 6);  // six 10 KB histories fit in 64 KB
  EXPECT_GT(hub.HeldEvents(), 0u);
  EXPECT_EQ(hub.Subscribe("100", [](const v1::JobEvent&) {}).history.size(), 11u);
  EXPECT_EQ(hub.Subscribe("1", [](const v1::JobEvent&) {}).id, 0u);
}

TEST(EventHubTest, ConcurrentPublishAndSubscribeLoseNothing) {
  EventHub hub;
  constexpr int kEvents = 2000;
  // A job exists in the hub from its first event ('queued', published before
  // Submit returns its id); watchers come after that.
  hub.Publish(Log("1", "0"));
  std::thread publisher([&] {
    for (int i = 1; i < kEvents; ++i) hub.Publish(Log("1", std::to_string(i)));
  });
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::vector<v1::JobEvent> seen;
  std::mutex mu;
  auto sub = hub.Subscribe("1", [&](const v1::JobEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(e);
  });
  publisher.join();
  ASSERT_NE(sub.id, 0u);
  hub.Publish(Done("1"));  // after the join: a watcher that came late reads the store
  std::lock_guard<std::mutex> lock(mu);
  std::vector<v1::JobEvent> all = sub.history;
  all.insert(all.end(), seen.begin(), seen.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kEvents + 1));
  for (int i = 0; i < kEvents; ++i) EXPECT_EQ(all[i].log(), std::to_string(i));
  EXPECT_TRUE(IsTerminal(all.back()));
}

}  // namespace
}  // namespace benchd::server
