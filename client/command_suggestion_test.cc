#include "client/command_suggestion.h"

#include <gtest/gtest.h>

namespace benchd::client {
namespace {

TEST(EditDistance, InsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("list", "list"), 0);
  EXPECT_EQ(EditDistance("lsit", "list"), 1);  // a swap
  EXPECT_EQ(EditDistance("sumbit", "submit"), 1);
  EXPECT_EQ(EditDistance("benchmrk", "benchmark"), 1);
  EXPECT_EQ(EditDistance("", "get"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(NearestNames, WithinATypoOrAPrefixNearestFirst) {
  const std::vector<std::string> names = {"submit", "list", "get", "watch", "cancel", "groups"};
  EXPECT_EQ(NearestNames("lsit", names), (std::vector<std::string>{"list"}));
  EXPECT_EQ(NearestNames("gro", names), (std::vector<std::string>{"groups"}));
  EXPECT_EQ(NearestNames("gte", names), (std::vector<std::string>{"get"}));
  EXPECT_TRUE(NearestNames("frobnicate", names).empty());
}

// A small benchctl: global --address (takes a value), submit with kinds, list.
// The message of FindUnknownCommand, or nullopt.
std::optional<std::string> UnknownCommandMessage(const CLI::App& app,
                                                 const std::vector<std::string>& args) {
  auto found = FindUnknownCommand(app, args);
  if (!found) return std::nullopt;
  return found->message;
}

class UnknownCommandTest : public ::testing::Test {
 protected:
  UnknownCommandTest() : app_("test", "benchctl") {
    app_.add_option("--address", address_);
    app_.add_flag("--json", json_);
    CLI::App* submit = app_.add_subcommand("submit");
    submit->add_subcommand("benchmark")->add_option("--steps", steps_);
    submit->add_subcommand("attention");
    app_.add_subcommand("list");
    app_.add_subcommand("get")->add_option("JOB", job_);
  }
  CLI::App app_;
  std::string address_, job_;
  bool json_ = false;
  int steps_ = 0;
};

TEST_F(UnknownCommandTest, TheWordThatIsNoCommandAndTheNearest) {
  EXPECT_EQ(UnknownCommandMessage(app_, {"lsit"}),
            "unknown command 'lsit' for 'benchctl'; did you mean 'list'?");
  EXPECT_EQ(UnknownCommandMessage(app_, {"sumbit", "benchmark"}),
            "unknown command 'sumbit' for 'benchctl'; did you mean 'submit'?");
  EXPECT_EQ(UnknownCommandMessage(app_, {"submit", "benchmrk", "--steps", "3"}),
            "unknown command 'benchmrk' for 'benchctl submit'; did you mean 'benchmark'?");
  // An option's value is not a command; a flag takes none.
  EXPECT_EQ(UnknownCommandMessage(app_, {"--address", "h:1", "--json", "lsit"}),
            "unknown command 'lsit' for 'benchctl'; did you mean 'list'?");
  EXPECT_EQ(UnknownCommandMessage(app_, {"--address=h:1", "frob"}),
            "unknown command 'frob' for 'benchctl'; expected submit, list or get");
}

TEST_F(UnknownCommandTest, TheWordAndWhereItStands) {
  auto found = FindUnknownCommand(app_, {"submit", "benchmrk"});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->word, "benchmrk");
  EXPECT_EQ(found->path, "benchctl submit");
}

TEST_F(UnknownCommandTest, KnownCommandsAndTheirArgumentsAreNotFlagged) {
  EXPECT_EQ(UnknownCommandMessage(app_, {"get", "42"}), std::nullopt);
  EXPECT_EQ(UnknownCommandMessage(app_, {"submit", "benchmark", "--steps", "3"}), std::nullopt);
  EXPECT_EQ(UnknownCommandMessage(app_, {"--address", "list", "get", "7"}), std::nullopt);
  EXPECT_EQ(UnknownCommandMessage(app_, {}), std::nullopt);
}

}  // namespace
}  // namespace benchd::client
