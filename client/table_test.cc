#include "client/table.h"

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

TEST(Table, AlignsColumnsAndTrimsTrailingSpace) {
  Table t({{"NAME"}, {"N", Table::Align::kRight}, {"NOTE"}});
  t.AddRow({"a", "1", ""});
  t.AddRow({"longer", "1,000", "x"});
  EXPECT_EQ(t.Render(),
            "NAME        N  NOTE\n"
            "a           1\n"
            "longer  1,000  x\n");
}

TEST(Table, IndentAndMissingCells) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render("  "), "  A  B\n  x\n");
}

TEST(Table, CountsUtf8CodePointsAsOneColumn) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"4×4", "y"});
  EXPECT_EQ(t.Render(), "A    B\n4×4  y\n");
}

TEST(KeyValues, AlignsValues) {
  EXPECT_EQ(KeyValues({{"Job", "j1"}, {"State", "QUEUED"}, {"Error", ""}}),
            "Job    j1\nState  QUEUED\nError\n");
}

}  // namespace
}  // namespace benchd::client
