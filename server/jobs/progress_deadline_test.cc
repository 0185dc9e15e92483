#include "server/jobs/progress_deadline.h"

#include <atomic>

#include "gtest/gtest.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {
namespace {

using std::chrono::milliseconds;

TEST(ProgressDeadlineTest, ExpiresOnceNamingWhatTheJobWasDoing) {
  Gate expired;
  std::string said;
  std::atomic<int> calls{0};
  ProgressDeadline deadline(milliseconds(200), "starting", [&](const std::string& doing) {
    said = doing;
    ++calls;
    expired.Open();
  });
  deadline.Progress("measured step 3 of 10");
  ASSERT_TRUE(expired.Wait());
  EXPECT_TRUE(deadline.expired());
  EXPECT_EQ(said, "measured step 3 of 10");
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(calls.load(), 1);
}

TEST(ProgressDeadlineTest, ProgressKeepsItAlive) {
  std::atomic<bool> expired{false};
  {
    ProgressDeadline deadline(milliseconds(300), "starting",
                              [&](const std::string&) { expired = true; });
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(milliseconds(100));
      deadline.Progress("step");  // 1 s in all, never 300 ms apart
    }
    EXPECT_FALSE(deadline.expired());
  }  // stopped: never fires after this
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_FALSE(expired.load());
}

}  // namespace
}  // namespace benchd::server
