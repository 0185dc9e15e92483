#include "client/collective_view.h"

#include "gtest/gtest.h"

namespace benchd::client {
namespace {

TEST(CollectiveViewTest, SpecFromFlags) {
  CollectiveOptions o;
  o.devices = "cuda:0,cuda:1,cuda:2,cuda:3";
  o.backends = "nccl,gloo";
  o.world_sizes = "2,4";
  o.op = "all-gather";
  o.min = "1MiB";
  o.max = "1GiB";
  o.dtype = "bf16";
  o.iters = 7;
  auto spec = BuildCollectiveSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& c = spec->collective();
  EXPECT_EQ(c.devices_size(), 4);
  EXPECT_EQ(c.backends_size(), 2);
  EXPECT_EQ(c.world_sizes_size(), 2);
  EXPECT_EQ(c.op(), v1::COLLECTIVE_OP_ALL_GATHER);
  EXPECT_EQ(c.dtype(), v1::COLLECTIVE_DTYPE_BF16);
  EXPECT_EQ(c.min_bytes(), 1 << 20);
  EXPECT_EQ(c.max_bytes(), 1 << 30);
  EXPECT_EQ(c.iters(), 7);
  EXPECT_FALSE(c.has_warmup_iters());
}

TEST(CollectiveViewTest, BadFlagsNamed) {
  CollectiveOptions o;
  o.group = "g1";
  o.devices = "cpu:0,cpu:1";
  EXPECT_FALSE(BuildCollectiveSpec(o).ok());
  o.devices.clear();
  o.min = "lots";
  auto s = BuildCollectiveSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--min"), std::string::npos);
  o.min.clear();
  o.op = "reduce";
  s = BuildCollectiveSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--op"), std::string::npos);
  o.op = "all_reduce";
  o.world_sizes = "two";
  EXPECT_FALSE(BuildCollectiveSpec(o).ok());
}

TEST(CollectiveViewTest, TableAndGroups) {
  v1::CollectiveResult r;
  r.mutable_spec()->set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  auto* row = r.add_rows();
  row->set_size_bytes(1 << 20);
  row->set_world_size(2);
  row->set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  row->mutable_duration()->set_median(123.4e-6);
  row->set_busbw_gbps(8.5);
  auto* g = r.add_groups();
  g->set_group("g1");
  g->set_was_resident(true);
  const std::string view = CollectiveResultView(r);
  EXPECT_NE(view.find("1 MiB"), std::string::npos) << view;
  EXPECT_NE(view.find("123.4"), std::string::npos) << view;
  EXPECT_NE(view.find("8.500"), std::string::npos) << view;
  EXPECT_NE(view.find("resident, no set-up"), std::string::npos) << view;
  EXPECT_NE(view.find("wrong elements: 0"), std::string::npos) << view;
  v1::Group group;
  group.set_id("g2");
  group.set_state(v1::GROUP_STATE_BROKEN);
  group.set_broken_reason("the worker for cpu:1 died");
  group.add_devices("cpu:0");
  group.add_devices("node1/cpu:0");
  group.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  const std::string table = GroupsTable({group});
  EXPECT_NE(table.find("broken"), std::string::npos);
  EXPECT_NE(table.find("cpu:1 died"), std::string::npos);
  // How to make it again, under the table.
  EXPECT_NE(table.find("g2 is broken and does not re-form by itself: re-create it (benchctl "
                       "groups create --device cpu:0,node1/cpu:0 --backend gloo) and drop it "
                       "(benchctl groups destroy g2)\n"),
            std::string::npos)
      << table;
  group.set_state(v1::GROUP_STATE_READY);
  EXPECT_EQ(GroupsTable({group}).find("re-create"), std::string::npos);
  EXPECT_EQ(GroupsTable({}), "no process groups\n");
}

}  // namespace
}  // namespace benchd::client
