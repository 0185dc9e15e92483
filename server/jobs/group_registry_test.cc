// GroupRegistry over fake workers: how a group is made (PrepareGroup on rank
// 0, JoinGroup on every member at once), undone, broken and dropped.
#include "server/jobs/group_registry.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/number_fields_test_util.h"
#include "common/size_fields_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/workers/fake_worker_client.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GroupRegistryTest : public ::testing::Test {
 protected:
  GroupRegistryTest() : workers_({"cpu:0", "cpu:1", "cpu:2"}) {
    workers_.UpAll();
    groups_ = std::make_unique<GroupRegistry>(&workers_, nullptr,
                                              std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"});
    workers_.SetExitListener(
        [this](const std::string& device, uint64_t generation, pid_t pid, const std::string& how) {
          groups_->OnWorkerExit(device, generation, pid, how);
        });
  }

  absl::StatusOr<v1::Group> Create(std::vector<std::string> devices) {
    v1::CreateGroupRequest req;
    for (auto& d : devices) req.add_devices(d);
    req.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
    return groups_->Create(req);
  }

  std::shared_ptr<FakeWorkerClient> W(const std::string& device) { return workers_.client(device); }

  FakeWorkers workers_;
  std::unique_ptr<GroupRegistry> groups_;
};

TEST_F(GroupRegistryTest, CreatePreparesOnRankZeroAndJoinsEveryMemberAtOnce) {
  internal::PrepareGroupResponse store;
  store.set_store_host("127.0.0.1");
  store.set_store_port(41234);
  W("cpu:2")->prepare_group.Return(store);
  // A rendezvous: neither join answers before the other has been asked, so
  // joins made one after the other would never finish.
  auto rendezvous = [this](const std::string& me, const std::string& other) {
    return
        [this, me, other](
            const internal::JoinGroupRequest& req) -> absl::StatusOr<internal::JoinGroupResponse> {
          if (!W(other)->join_group.WaitForCalls(1)) {
            return absl::DeadlineExceededError(me + " waited for " + other + " in vain");
          }
          internal::JoinGroupResponse joined;
          joined.set_pid(W(me)->pid());
          joined.set_setup_seconds(0.5 + req.rank());
          return joined;
        };
  };
  W("cpu:2")->join_group.Set(rendezvous("cpu:2", "cpu:0"));
  W("cpu:0")->join_group.Set(rendezvous("cpu:0", "cpu:2"));

  auto group = Create({"cpu:2", "cpu:0"});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->id(), "g1");
  EXPECT_EQ(group->state(), v1::GROUP_STATE_READY);
  EXPECT_THAT(group->devices(), ElementsAre("cpu:2", "cpu:0"));
  EXPECT_EQ(group->timeout_seconds(), 300);  // the default
  ASSERT_EQ(group->ranks_size(), 2);
  EXPECT_EQ(group->ranks(0).worker_pid(), W("cpu:2")->pid());
  EXPECT_EQ(group->ranks(1).worker_pid(), W("cpu:0")->pid());
  EXPECT_EQ(group->ranks(1).setup_seconds(), 1.5);

  // Rank 0 (cpu:2) hosts the store; nobody else prepares.
  ASSERT_EQ(W("cpu:2")->prepare_group.calls(), 1u);
  const auto prepare = W("cpu:2")->prepare_group.requests()[0];
  EXPECT_EQ(prepare.group(), "g1");
  EXPECT_EQ(prepare.world_size(), 2);
  EXPECT_EQ(prepare.timeout_seconds(), 300);
  EXPECT_EQ(W("cpu:2")->prepare_group.timeouts()[0],
            std::chrono::milliseconds(kPrepareGroupTimeout));
  EXPECT_EQ(W("cpu:0")->prepare_group.calls(), 0u);
  // Every member joins the store rank 0 started, with its own rank.
  for (const auto& [device, rank] : {std::pair{"cpu:2", 0}, std::pair{"cpu:0", 1}}) {
    const auto joins = W(device)->join_group.requests();
    ASSERT_EQ(joins.size(), 1u) << device;
    EXPECT_EQ(joins[0].rank(), rank);
    EXPECT_EQ(joins[0].world_size(), 2);
    EXPECT_EQ(joins[0].store_port(), 41234);
    EXPECT_EQ(joins[0].backend(), v1::COLLECTIVE_BACKEND_GLOO);
    // The members' rendezvous timeout ends a join before the call's deadline.
    EXPECT_EQ(W(device)->join_group.timeouts()[0],
              std::chrono::milliseconds(std::chrono::seconds(300) + kJoinGroupSlack));
  }
  EXPECT_EQ(W("cpu:1")->join_group.calls(), 0u);
  EXPECT_THAT(groups_->Generations("g1"), ElementsAre(1u, 1u));
}

TEST_F(GroupRegistryTest, JoinFailureMakesEveryMemberLeave) {
  W("cpu:1")->join_group.Fail(absl::DeadlineExceededError("rendezvous timed out"));
  auto group = Create({"cpu:0", "cpu:1"});
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(group.status().message(),
            "creating a gloo group on [cpu:0, cpu:1]: rank 1 (cpu:1): rendezvous timed out");
  for (const char* d : {"cpu:0", "cpu:1"}) {
    const auto left = W(d)->leave_group.requests();
    ASSERT_EQ(left.size(), 1u) << d;
    EXPECT_EQ(left[0].group(), "g1");
    EXPECT_TRUE(left[0].abort());
  }
  EXPECT_EQ(W("cpu:2")->leave_group.calls(), 0u);
  EXPECT_TRUE(groups_->List().empty());
}

TEST_F(GroupRegistryTest, PrepareFailureIsRankZerosAndNobodyJoins) {
  W("cpu:0")->prepare_group.Fail(absl::UnavailableError("connection refused"));
  auto group = Create({"cpu:0", "cpu:1"});
  EXPECT_EQ(group.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(group.status().message(), "the worker for cpu:0 (rank 0): connection refused");
  EXPECT_EQ(W("cpu:0")->join_group.calls(), 0u);
  EXPECT_EQ(W("cpu:1")->join_group.calls(), 0u);
}

TEST_F(GroupRegistryTest, WorkerExitBreaksItsGroupsOnlyAndTheOthersLeave) {
  auto g1 = Create({"cpu:0", "cpu:1"});
  auto g2 = Create({"cpu:0", "cpu:2"});
  ASSERT_TRUE(g1.ok() && g2.ok());
  const pid_t pid = W("cpu:1")->pid();
  auto survivor = W("cpu:0");
  workers_.Exit("cpu:1", fake::kKilledExit);

  auto broken = groups_->Get("g1");
  ASSERT_TRUE(broken.ok());
  EXPECT_EQ(broken->state(), v1::GROUP_STATE_BROKEN);
  EXPECT_EQ(broken->broken_reason(),
            absl::StrCat("the worker for cpu:1 (rank 1, pid ", pid, ") ", fake::kKilledExit));
  EXPECT_EQ(groups_->Get("g2")->state(), v1::GROUP_STATE_READY);
  // cpu:0 drops g1 (off the supervisor's thread), and nothing else.
  ASSERT_TRUE(survivor->leave_group.WaitForCalls(1));
  EXPECT_EQ(survivor->leave_group.requests()[0].group(), "g1");
  EXPECT_TRUE(survivor->leave_group.requests()[0].abort());
  EXPECT_EQ(W("cpu:2")->leave_group.calls(), 0u);

  auto acquired = groups_->Acquire("g1");
  EXPECT_EQ(acquired.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(acquired.status().message(), HasSubstr(fake::kKilledExit));
  EXPECT_FALSE(groups_->FindReady({"cpu:0", "cpu:1"}, v1::COLLECTIVE_BACKEND_GLOO).has_value());
}

TEST_F(GroupRegistryTest, ExitOfAnEarlierIncarnationBreaksNothing) {
  workers_.Exit("cpu:1", fake::kKilledExit);
  workers_.Up("cpu:1");  // generation 2
  auto group = Create({"cpu:1", "cpu:2"});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_THAT(groups_->Generations(group->id()), ElementsAre(2u, 1u));
  groups_->OnWorkerExit("cpu:1", 1, 1102, fake::kKilledExit);
  EXPECT_EQ(groups_->Get(group->id())->state(), v1::GROUP_STATE_READY);
}

TEST_F(GroupRegistryTest, MemberThatEndsWhileTheGroupIsMadeLeavesItBroken) {
  // cpu:1's worker dies as it joins: the exit comes before the group exists.
  W("cpu:1")->join_group.Set(
      [this](const internal::JoinGroupRequest&) -> absl::StatusOr<internal::JoinGroupResponse> {
        workers_.Exit("cpu:1", fake::kKilledExit);
        internal::JoinGroupResponse joined;
        joined.set_pid(4321);
        return joined;
      });
  auto group = Create({"cpu:0", "cpu:1"});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->state(), v1::GROUP_STATE_BROKEN);
  EXPECT_THAT(group->broken_reason(), HasSubstr("cpu:1 (rank 1, pid 4321)"));
  EXPECT_EQ(W("cpu:0")->leave_group.calls(), 1u);
}

// --worker-idle-exit: a READY group holds its members' workers (never
// parked), a broken or destroyed one lets them go.
TEST_F(GroupRegistryTest, AReadyGroupHoldsItsMembersUntilDestroyedOrBroken) {
  ASSERT_TRUE(Create({"cpu:0", "cpu:1"}).ok());
  EXPECT_EQ(workers_.holds("cpu:0"), 1);
  EXPECT_EQ(workers_.holds("cpu:1"), 1);
  EXPECT_EQ(workers_.holds("cpu:2"), 0);
  ASSERT_TRUE(groups_->Destroy("g1").ok());
  EXPECT_EQ(workers_.holds("cpu:0"), 0);
  EXPECT_EQ(workers_.holds("cpu:1"), 0);

  ASSERT_TRUE(Create({"cpu:1", "cpu:2"}).ok());
  EXPECT_EQ(workers_.holds("cpu:2"), 1);
  workers_.Exit("cpu:1", "exited with code 1");  // breaks g2
  EXPECT_EQ(groups_->Get("g2")->state(), v1::GROUP_STATE_BROKEN);
  EXPECT_EQ(workers_.holds("cpu:1"), 0);
  EXPECT_EQ(workers_.holds("cpu:2"), 0);
}

TEST_F(GroupRegistryTest, CreatingAGroupStartsAParkedMember) {
  workers_.Park("cpu:1", "parked after 60 s idle");
  auto group = Create({"cpu:0", "cpu:1"});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(workers_.wakes("cpu:1"), 1);
  EXPECT_EQ(group->state(), v1::GROUP_STATE_READY);
}

TEST_F(GroupRegistryTest, DestroyWhileInUseIsRefused) {
  auto group = Create({"cpu:0", "cpu:1"});
  ASSERT_TRUE(group.ok());
  ASSERT_TRUE(groups_->Acquire("g1").ok());
  auto refused = groups_->Destroy("g1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "group g1 is in use by a running job; destroy it after the job ends");
  EXPECT_EQ(W("cpu:0")->leave_group.calls(), 0u);
  EXPECT_EQ(groups_->Get("g1")->state(), v1::GROUP_STATE_READY);

  groups_->Release("g1");
  auto destroyed = groups_->Destroy("g1");
  ASSERT_TRUE(destroyed.ok()) << destroyed.status();
  EXPECT_EQ(destroyed->jobs_run(), 1);
  for (const char* d : {"cpu:0", "cpu:1"}) {
    const auto left = W(d)->leave_group.requests();
    ASSERT_EQ(left.size(), 1u) << d;
    EXPECT_FALSE(left[0].abort());  // a ready group is left in order
  }
  EXPECT_EQ(groups_->Get("g1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(groups_->Destroy("g1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GroupRegistryTest, BadMembersAreRefusedNamingTheField) {
  auto one = Create({"cpu:0"});
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  auto twice = Create({"cpu:1", "cpu:1"});
  EXPECT_THAT(twice.status().message(), HasSubstr("appears twice"));
  auto unserved = Create({"cpu:0", "cpu:7"});
  EXPECT_EQ(unserved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(W("cpu:0")->prepare_group.calls(), 0u);
}

TEST_F(GroupRegistryTest, TimeoutOutOfRangeIsRefusedNeverReplaced) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [timeout, message] : std::vector<std::pair<double, std::string>>{
           {-1, "timeout_seconds: expected 0 (= 300) or 1..86400, got -1"},
           {0.5, "timeout_seconds: expected 0 (= 300) or 1..86400, got 0.5"},
           {86401, "timeout_seconds: expected 0 (= 300) or 1..86400, got 86401"},
           {nan, "timeout_seconds: expected a finite number, got nan"},
           {-inf, "timeout_seconds: expected a finite number, got -inf"}}) {
    v1::CreateGroupRequest req;
    req.add_devices("cpu:0");
    req.add_devices("cpu:1");
    req.set_timeout_seconds(timeout);
    auto group = groups_->Create(req);
    EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument) << timeout;
    EXPECT_EQ(group.status().message(), message);
  }
  EXPECT_EQ(W("cpu:0")->prepare_group.calls(), 0u);  // nothing was started
  v1::CreateGroupRequest req;
  req.add_devices("cpu:0");
  req.add_devices("cpu:1");
  auto checked = groups_->CheckRequest(req);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->timeout_seconds(), 300);  // 0 = the default, written out
  EXPECT_EQ(checked->backend(), v1::COLLECTIVE_BACKEND_GLOO);
  req.set_timeout_seconds(42);
  EXPECT_EQ(groups_->CheckRequest(req)->timeout_seconds(), 42);
}

// Every string and list of the request (found through its descriptor: a
// field added later too) one over its limit is refused by CheckRequest naming
// it, before any worker is asked; a megabyte device name is quoted cut short.
TEST_F(GroupRegistryTest, EveryStringAndListOverItsLimitIsRefusedNamingIt) {
  const auto paths = testing::SizeFieldPaths(v1::CreateGroupRequest::descriptor());
  ASSERT_FALSE(paths.empty());
  for (const auto& path : paths) {
    const google::protobuf::FieldDescriptor* f = path.back();
    v1::CreateGroupRequest req;
    std::string field;
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      const FieldLimit* limit = FindFieldLimit(kStringLimits, f->full_name());
      ASSERT_NE(limit, nullptr) << f->full_name();
      field = testing::SetStringAt(&req, path, 1 << 20);
      auto checked = groups_->CheckRequest(req);
      EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument) << field;
      EXPECT_THAT(checked.status().message(),
                  HasSubstr(absl::StrCat(field, ": expected ", limit->what, " of at most ",
                                         limit->max, " bytes, got 'xxxx")));
      EXPECT_LT(checked.status().message().size(), 300u) << field;
    }
    if (f->is_repeated()) {
      const FieldLimit* limit = FindFieldLimit(kListLimits, f->full_name());
      ASSERT_NE(limit, nullptr) << f->full_name();
      v1::CreateGroupRequest many;
      field = testing::AddEntriesAt(&many, path, static_cast<int>(limit->max) + 1);
      auto checked = groups_->CheckRequest(many);
      EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument) << field;
      EXPECT_EQ(checked.status().message(),
                absl::StrCat(field, ": expected at most ", limit->max, " entries (", limit->what,
                             "), got ", limit->max + 1));
    }
  }
  // Through Create too, and nothing was started.
  v1::CreateGroupRequest req;
  req.add_devices("cpu:0");
  req.add_devices(std::string(1 << 20, 'c'));
  auto group = groups_->Create(req);
  EXPECT_EQ(group.status().message(),
            absl::StrCat("devices[1]: expected a device name such as cuda:0 of at most 32 bytes, "
                         "got '",
                         std::string(kMaxQuotedBytes, 'c'), "'... (1048576 bytes)"));
  EXPECT_EQ(W("cpu:0")->prepare_group.calls(), 0u);
}

TEST_F(GroupRegistryTest, UnknownFieldsAreRefused) {
  v1::CreateGroupRequest req;
  req.add_devices("cpu:0");
  req.add_devices("cpu:1");
  req.GetReflection()->MutableUnknownFields(&req)->AddVarint(12, 1);
  auto checked = groups_->CheckRequest(req);
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checked.status().message(),
              HasSubstr("CreateGroupRequest: field number 12 is not a field of "
                        "benchd.v1.CreateGroupRequest"));
}

// Every float and double of the request, found through its descriptor (a
// field added later too), refuses NaN and +-inf naming the field.
TEST_F(GroupRegistryTest, EveryNumberFieldOfTheRequestRefusesNanAndInf) {
  const auto paths = testing::NumberFieldPaths(v1::CreateGroupRequest::descriptor());
  ASSERT_FALSE(paths.empty());
  for (const auto& path : paths) {
    for (double v :
         {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity()}) {
      v1::CreateGroupRequest req;
      req.add_devices("cpu:0");
      req.add_devices("cpu:1");
      const std::string field = testing::SetNumberAt(&req, path, v);
      auto checked = groups_->CheckRequest(req);
      EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument) << field;
      EXPECT_THAT(checked.status().message(),
                  HasSubstr(absl::StrCat(field, ": expected a finite number, got ")));
    }
  }
}

}  // namespace
}  // namespace benchd::server
