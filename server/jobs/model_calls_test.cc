#include "server/jobs/model_calls.h"

#include "common/limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The async call's answer, waited for (tests only; the service never waits).
template <typename T, typename Start>
absl::StatusOr<T> Await(Start start) {
  Gate done;
  absl::StatusOr<T> out = absl::UnknownError("no answer");
  start([&](absl::StatusOr<T> r) {
    out = std::move(r);
    done.Open();
  });
  EXPECT_TRUE(done.Wait());
  return out;
}

class ModelCallsTest : public ::testing::Test {
 protected:
  absl::StatusOr<v1::ListModelsResponse> List(const std::string& device) {
    return Await<v1::ListModelsResponse>(
        [&](auto done) { ListModelsOnWorkers(&workers_, devices_, device, done); });
  }
  absl::StatusOr<v1::EvictModelResponse> Evict(const v1::EvictModelRequest& req) {
    return Await<v1::EvictModelResponse>(
        [&](auto done) { EvictModelOnWorkers(&workers_, devices_, req, done); });
  }
  const std::vector<std::string> devices_ = {"cpu:0", "cpu:1"};
  FakeWorkers workers_{devices_};
};

// --worker-idle-exit: a call holds the workers it asks until they answer
// (none is parked under it), and a parked worker is neither asked nor started.
TEST_F(ModelCallsTest, ACallHoldsTheWorkersItAsksAndLeavesParkedOnesParked) {
  workers_.Up("cpu:0");
  workers_.Park("cpu:1", "parked after 60 s idle");
  int held_while_asked = -1;
  workers_.client("cpu:0")->list_models.Set(
      [&](const v1::ListModelsRequest&) -> absl::StatusOr<v1::ListModelsResponse> {
        held_while_asked = workers_.holds("cpu:0");
        return v1::ListModelsResponse();
      });
  auto all = List("");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(held_while_asked, 1);
  EXPECT_EQ(workers_.holds("cpu:0"), 0);
  EXPECT_EQ(workers_.wakes("cpu:1"), 0);
  EXPECT_EQ(workers_.Health("cpu:1").state, v1::WORKER_STATE_PARKED);
  v1::EvictModelRequest every;
  auto evicted = Evict(every);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(workers_.wakes("cpu:1"), 0);
}

TEST_F(ModelCallsTest, ListGathersUpWorkersAndSurfacesAMissedDeadline) {
  workers_.UpAll();
  v1::ListModelsResponse on1;
  on1.add_models()->set_key("cpu:1/tiny/fp32");
  workers_.client("cpu:1")->list_models.Return(on1);
  auto all = List("");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->models_size(), 1);
  EXPECT_EQ(all->models(0).key(), "cpu:1/tiny/fp32");
  EXPECT_THAT(workers_.client("cpu:1")->list_models.timeouts(),
              ElementsAre(std::chrono::milliseconds(kListModelsTimeout)));

  workers_.client("cpu:0")->list_models.MissDeadline();
  auto missed = List("");
  EXPECT_EQ(missed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(missed.status().message(), "the worker for cpu:0 did not answer: Deadline Exceeded");
  // Only the device asked about is asked.
  const size_t asked = workers_.client("cpu:0")->list_models.calls();
  auto one = List("cpu:1");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->models_size(), 1);
  EXPECT_EQ(workers_.client("cpu:0")->list_models.calls(), asked);
}

TEST_F(ModelCallsTest, DownWorkersHoldNothingAndAreNotAsked) {
  workers_.Up("cpu:0");
  auto none = List("");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->models_size(), 0);
  auto on_down = List("cpu:1");
  ASSERT_TRUE(on_down.ok()) << on_down.status();
  EXPECT_EQ(workers_.client("cpu:0")->list_models.calls(), 1u);
}

TEST_F(ModelCallsTest, EvictAsksTheKeysDeviceOnly) {
  workers_.UpAll();
  v1::EvictModelResponse one;
  one.set_evicted(1);
  workers_.client("cpu:1")->evict_model.Return(one);
  v1::EvictModelRequest req;
  req.set_key("cpu:1/tiny/fp32");
  auto evicted = Evict(req);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->evicted(), 1);
  EXPECT_EQ(workers_.client("cpu:0")->evict_model.calls(), 0u);
  ASSERT_EQ(workers_.client("cpu:1")->evict_model.requests().size(), 1u);
  EXPECT_EQ(workers_.client("cpu:1")->evict_model.requests()[0].key(), "cpu:1/tiny/fp32");

  req.set_key("cpu:0/none/fp32");
  EXPECT_EQ(Evict(req).status().code(), absl::StatusCode::kNotFound);

  workers_.client("cpu:0")->evict_model.MissDeadline();
  auto missed = Evict(v1::EvictModelRequest());
  EXPECT_EQ(missed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missed.status().message(), HasSubstr("the worker for cpu:0 did not answer"));
  EXPECT_EQ(workers_.client("cpu:0")->evict_model.timeouts().back(),
            std::chrono::milliseconds(kEvictModelTimeout));
}

// A key over the limit asks no worker; a long unknown key is quoted cut short.
TEST_F(ModelCallsTest, AnOverlongKeyIsRefusedAndKeysAreQuotedCutShort) {
  workers_.UpAll();
  v1::EvictModelRequest req;
  req.set_key("cpu:0/" + std::string(1 << 20, 'k'));
  auto huge = Evict(req);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(),
              HasSubstr("key: expected a key as ListModels gives it of at most 256 bytes, got "
                        "'cpu:0/kkkk"));
  EXPECT_THAT(huge.status().message(), HasSubstr("'... (1048582 bytes)"));
  EXPECT_LT(huge.status().message().size(), 300u);
  EXPECT_EQ(workers_.client("cpu:0")->evict_model.calls(), 0u);

  req.set_key("cpu:0/" + std::string(kMaxModelKeyBytes - 6, 'k'));  // at the limit: asked
  auto unknown = Evict(req);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'... (256 bytes); `benchctl models`"));
  EXPECT_EQ(workers_.client("cpu:0")->evict_model.calls(), 1u);
}

TEST_F(ModelCallsTest, AWorkerWithTooManyCallsInFlightIsNamedAsSuch) {
  workers_.UpAll();
  workers_.client("cpu:0")->list_models.Fail(
      absl::ResourceExhaustedError("the worker for cpu:0 (pid 1001) already has 16 calls"));
  auto refused = List("");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("already has 16 calls"));
}

}  // namespace
}  // namespace benchd::server
