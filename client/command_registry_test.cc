#include "client/command_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/command_suggestion.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace {

// ------------------------------------------------------------ one vocabulary

// Issue 38: one flag per idea across every command. An idea's other
// spellings may not appear on any command, visible or hidden, except the
// hidden aliases kept for what benchctl accepted before (kKeptAliases).
struct Idea {
  std::string canonical;
  std::vector<std::string> others;
};
const std::vector<Idea> kIdeas = {
    {"--device", {"--devices", "--gpu", "--gpus", "--ranks"}},
    {"--steps",
     {"--iters", "--iterations", "--passes", "--reps", "--repeats", "--measure-steps", "--runs"}},
    {"--warmup", {"--warmup-steps", "--warmup-iters", "--warmup-iterations", "--warmup-passes"}},
};
// (command, alias): the spellings benchctl took before the vocabulary was one.
const std::set<std::pair<std::string, std::string>> kKeptAliases = {
    {"submit benchmark", "--warmup-steps"}, {"submit profile", "--warmup-steps"},
    {"submit memory", "--warmup-steps"},    {"submit ddp", "--warmup-steps"},
    {"submit collective", "--iters"},       {"submit attention", "--passes"},
    {"submit collective", "--devices"},     {"submit ddp", "--devices"},
    {"groups create", "--devices"},
};

std::string PathOf(const CLI::App* app) {
  std::vector<std::string> words;
  for (const CLI::App* a = app; a->get_parent() != nullptr; a = a->get_parent()) {
    words.insert(words.begin(), a->get_name());
  }
  return absl::StrJoin(words, " ");
}

const Idea* IdeaSpelled(const std::string& flag) {
  for (const Idea& idea : kIdeas) {
    if (std::find(idea.others.begin(), idea.others.end(), flag) != idea.others.end()) return &idea;
  }
  return nullptr;
}

const Cli::Alias* AliasOf(const Cli& cli, const CLI::Option* opt) {
  for (const Cli::Alias& a : cli.aliases) {
    if (a.alias == opt) return &a;
  }
  return nullptr;
}

// Walks every command's flags; one line per flag that spells an idea otherwise.
void CollectViolations(const Cli& cli, const CLI::App* app, std::vector<std::string>& out) {
  const std::string path = PathOf(app);
  for (const CLI::Option* opt : app->get_options([](const CLI::Option*) { return true; })) {
    for (const std::string& l : opt->get_lnames()) {
      const std::string flag = "--" + l;
      const Idea* idea = IdeaSpelled(flag);
      if (idea == nullptr) continue;
      const bool hidden = opt->get_group() == kAliasGroup || opt->get_group().empty();
      const Cli::Alias* alias = AliasOf(cli, opt);
      if (hidden && kKeptAliases.count({path, flag}) > 0 && alias != nullptr &&
          alias->canonical->get_name() == idea->canonical) {
        continue;  // an older spelling kept, hidden, for the canonical flag
      }
      out.push_back(absl::StrCat("'", path, "' spells ", flag, " (", hidden ? "hidden" : "in help",
                                 "); the idea's one flag is ", idea->canonical));
    }
  }
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    CollectViolations(cli, sub, out);
  }
}

std::vector<std::string> Violations(const Cli& cli) {
  std::vector<std::string> out;
  CollectViolations(cli, &cli.app, out);
  return out;
}

TEST(VocabularyTest, EveryCommandSpellsEachIdeaOneWay) {
  std::unique_ptr<Cli> cli = BuildCli();
  const std::vector<std::string> violations = Violations(*cli);
  EXPECT_TRUE(violations.empty()) << absl::StrJoin(violations, "\n");
}

TEST(VocabularyTest, FailsWhenANewCommandAddsAnotherSpelling) {
  for (const bool hidden : {false, true}) {
    std::unique_ptr<Cli> cli = BuildCli();
    int iters = 0;
    CLI::Option* opt = cli->app.add_subcommand("newkind")->add_option("--iters", iters, "iters");
    if (hidden) opt->group(kAliasGroup);
    const std::vector<std::string> violations = Violations(*cli);
    ASSERT_EQ(violations.size(), 1u) << hidden;
    EXPECT_EQ(violations[0],
              absl::StrCat("'newkind' spells --iters (", hidden ? "hidden" : "in help",
                           "); the idea's one flag is --steps"));
  }
}

// Where an idea is, its canonical flag is in the help: every kind that
// measures repeats has --steps, every one with a warm-up has --warmup.
TEST(VocabularyTest, TheKeptAliasesStillParseAndTheirCanonicalFlagsAreShown) {
  for (const auto& [path, alias] : kKeptAliases) {
    std::unique_ptr<Cli> cli = BuildCli();
    const CLI::App* at = &cli->app;
    for (absl::string_view word : absl::StrSplit(path, ' '))
      at = SubcommandNamed(*at, std::string(word));
    ASSERT_NE(at, nullptr) << path;
    const CLI::Option* opt = at->get_option_no_throw(alias);
    ASSERT_NE(opt, nullptr) << path << " " << alias;
    EXPECT_EQ(opt->get_group(), kAliasGroup) << path << " " << alias;
    const std::string help = at->help();
    EXPECT_FALSE(absl::StrContains(help, alias + " ")) << path << ":\n" << help;
    const std::string canonical = IdeaSpelled(alias)->canonical;
    EXPECT_TRUE(absl::StrContains(help, canonical + " ")) << path << ":\n" << help;
  }
}

// ------------------------------------------------------------ parsing

// argv for `words` (a command line without quotes), cut at a redirection.
std::vector<std::string> Argv(const std::string& line) {
  std::vector<std::string> argv;
  for (absl::string_view w : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    if (w == ">" || w == "<" || w == ">>" || w == "|") break;
    argv.emplace_back(w);
  }
  return argv;
}

// Parses `line` with a fresh CLI; the chosen command's path, or the error.
std::string Parse(const std::string& line) {
  std::unique_ptr<Cli> cli = BuildCli();
  std::vector<std::string> argv = Argv(line);
  std::vector<const char*> raw;
  for (const std::string& a : argv) raw.push_back(a.c_str());
  try {
    cli->app.parse(static_cast<int>(raw.size()), raw.data());
  } catch (const CLI::ParseError& e) {
    return absl::StrCat("error: ", e.what());
  }
  std::string chosen;
  for (const auto& [app, run] : cli->runs) {
    if (app->parsed()) chosen = PathOf(app);
  }
  return chosen;
}

TEST(RegistryTest, EveryCommandHasExamplesThatParse) {
  for (const Command& command : RegisteredCommands()) {
    EXPECT_FALSE(command.examples.empty()) << command.path;
    for (const std::string& example : command.examples) {
      ASSERT_TRUE(absl::StartsWith(example, "benchctl ")) << example;
      EXPECT_FALSE(absl::StrContains(example, "\"") || absl::StrContains(example, "'"))
          << "no quoting in examples: " << example;
      const std::string chosen = Parse(example);
      EXPECT_FALSE(absl::StartsWith(chosen, "error")) << example << ": " << chosen;
      // A group's example may run one of its subcommands.
      EXPECT_TRUE(chosen == command.path || absl::StartsWith(chosen, command.path + " "))
          << example << " runs '" << chosen << "', not '" << command.path << "'";
    }
  }
}

TEST(RegistryTest, HelpShowsTheExamplesThenTheExitCodes) {
  std::unique_ptr<Cli> cli = BuildCli();
  const CLI::App* list = SubcommandNamed(cli->app, "list");
  ASSERT_NE(list, nullptr);
  const std::string help = list->help();
  const size_t examples = help.find("Examples:\n  benchctl list --limit 100");
  ASSERT_NE(examples, std::string::npos) << help;
  EXPECT_NE(help.find("Exit codes:", examples), std::string::npos) << help;
  // The top help keeps its footer alone.
  EXPECT_EQ(cli->app.help().find("Examples:"), std::string::npos);
}

TEST(RegistryTest, EveryJobKindIsASubmitCommandInTheProtosOrder) {
  std::unique_ptr<Cli> cli = BuildCli();
  const CLI::App* submit = SubcommandNamed(cli->app, "submit");
  ASSERT_NE(submit, nullptr);
  std::vector<std::string> kinds;
  for (const CLI::App* sub : submit->get_subcommands([](const CLI::App*) { return true; })) {
    kinds.push_back(sub->get_name());
  }
  EXPECT_EQ(kinds, JobKindNames());
}

TEST(RegistryTest, TypoSuggestionsReadTheRegistry) {
  std::unique_ptr<Cli> cli = BuildCli();
  auto unknown = FindUnknownCommand(cli->app, {"completoin", "bash"});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->message,
            "unknown command 'completoin' for 'benchctl'; did you mean 'completion'?");
  unknown = FindUnknownCommand(cli->app, {"groups", "craete", "--device", "cpu:0"});
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->message,
            "unknown command 'craete' for 'benchctl groups'; did you mean 'create'?");
}

TEST(RegistryTest, AnAliasWithItsCanonicalFlagIsRefused) {
  EXPECT_EQ(Parse("benchctl submit collective --group g1 --iters 5"), "submit collective");
  EXPECT_EQ(Parse("benchctl submit attention --passes 5"), "submit attention");
  EXPECT_EQ(Parse("benchctl submit ddp --devices cpu:0,cpu:1 --warmup-steps 1"), "submit ddp");
  EXPECT_EQ(Parse("benchctl submit collective --group g1 --iters 5 --steps 6"),
            "error: --iters and --steps: one flag given twice (--iters is the older spelling of "
            "--steps); give --steps once");
  EXPECT_EQ(Parse("benchctl submit benchmark --warmup 2 --warmup-steps 3"),
            "error: --warmup-steps and --warmup: one flag given twice (--warmup-steps is the older "
            "spelling of --warmup); give --warmup once");
}

TEST(RegistryTest, RankDevicesAreCommaSeparatedOrRepeated) {
  for (const std::string& line : {"benchctl groups create --device cpu:0,cpu:1",
                                  "benchctl groups create --device cpu:0 "
                                  "--device cpu:1",
                                  "benchctl groups create --devices cpu:0,cpu:1"}) {
    std::unique_ptr<Cli> cli = BuildCli();
    std::vector<std::string> argv = Argv(line);
    std::vector<const char*> raw;
    for (const std::string& a : argv) raw.push_back(a.c_str());
    ASSERT_NO_THROW(cli->app.parse(static_cast<int>(raw.size()), raw.data())) << line;
    const CLI::App* create = SubcommandNamed(*SubcommandNamed(cli->app, "groups"), "create");
    const bool old = absl::StrContains(line, "--devices");
    EXPECT_EQ(create->get_option(old ? "--devices" : "--device")->as<std::string>(), "cpu:0,cpu:1")
        << line;
  }
  EXPECT_EQ(Parse("benchctl groups create --backend gloo"), "error: --device is required");
}

TEST(RegistryTest, EvictStillNeedsATarget) {
  // Checked when it runs, before any connection is resolved.
  std::unique_ptr<Cli> cli = BuildCli();
  std::vector<const char*> raw = {"benchctl", "evict"};
  cli->app.parse(static_cast<int>(raw.size()), raw.data());
  bool connected = false;
  for (const auto& [app, run] : cli->runs) {
    if (app->parsed() && run) {
      EXPECT_EQ(run([&]() -> absl::StatusOr<GlobalOptions> {
                  connected = true;
                  return GlobalOptions();
                }),
                2);
    }
  }
  EXPECT_FALSE(connected);
}

}  // namespace
}  // namespace benchd::client
