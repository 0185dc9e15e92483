#include "client/completion.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace {

// Runs `command` under /bin/sh; its stdout, and its exit status in `status`.
std::string Shell(const std::string& command, int* status) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int rc = pclose(pipe);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

bool Installed(const std::string& program) {
  int status = 0;
  Shell("command -v " + program + " >/dev/null 2>&1", &status);
  return status == 0;
}

std::string WriteTemp(const std::string& text, const std::string& suffix) {
  std::string path = absl::StrCat(::testing::TempDir(), "benchctl-completion-", getpid(), suffix);
  std::ofstream(path) << text;
  return path;
}

class BashCompletionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cli_ = BuildCli().release();
    script_ = new std::string(WriteTemp(BashCompletion(*cli_), ".bash"));
  }
  static void TearDownTestSuite() {
    std::remove(script_->c_str());
    delete script_;
    delete cli_;
  }

  // What bash offers for the last of `words` (split as bash splits a line,
  // ':' and '=' words of their own), sorted as compgen prints them.
  static std::vector<std::string> Complete(const std::vector<std::string>& words) {
    std::vector<std::string> quoted;
    for (const std::string& w : words) quoted.push_back(absl::StrCat("'", w, "'"));
    const std::string script =
        absl::StrCat("source ", *script_, "\nCOMP_WORDS=(", absl::StrJoin(quoted, " "),
                     ")\nCOMP_CWORD=", words.size() - 1,
                     "\n_benchctl_complete\nprintf '%s\\n' \"${COMPREPLY[@]}\" | LC_ALL=C sort\n"
                     "complete -p benchctl >/dev/null\n");
    const std::string driver = WriteTemp(script, ".driver");
    int status = 0;
    const std::string out = Shell("bash --norc --noprofile " + driver, &status);
    std::remove(driver.c_str());
    EXPECT_EQ(status, 0) << script;
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    return lines;
  }

  static std::vector<std::string> Sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  }

  static Cli* cli_;
  static std::string* script_;
};
Cli* BashCompletionTest::cli_ = nullptr;
std::string* BashCompletionTest::script_ = nullptr;

TEST_F(BashCompletionTest, ACommand) {
  ASSERT_TRUE(Installed("bash"));
  EXPECT_EQ(Complete({"benchctl", "su"}), (std::vector<std::string>{"submit"}));
  EXPECT_EQ(Complete({"benchctl", "groups", "c"}), (std::vector<std::string>{"create"}));
  // After global flags and their values, split at ':' as bash does.
  EXPECT_EQ(Complete({"benchctl", "--address", "127.0.0.1", ":", "7531", "--json", "gr"}),
            (std::vector<std::string>{"groups"}));
}

TEST_F(BashCompletionTest, TheJobKindsFromTheProto) {
  EXPECT_EQ(Complete({"benchctl", "submit", ""}), Sorted(JobKindNames()));
  EXPECT_EQ(Complete({"benchctl", "list", "--kind", ""}), Sorted(JobKindNames()));
  EXPECT_EQ(Complete({"benchctl", "list", "--kind", "=", "b"}),
            (std::vector<std::string>{"benchmark"}));
  EXPECT_EQ(Complete({"benchctl", "list", "--state", "s"}),
            (std::vector<std::string>{"succeeded"}));
}

TEST_F(BashCompletionTest, AFlagOfTheCommandNotItsHiddenAliases) {
  EXPECT_EQ(Complete({"benchctl", "submit", "collective", "--st"}),
            (std::vector<std::string>{"--steps"}));
  EXPECT_EQ(Complete({"benchctl", "submit", "benchmark", "--warm"}),
            (std::vector<std::string>{"--warmup", "--warmup-max-steps"}));
  EXPECT_EQ(Complete({"benchctl", "submit", "ddp", "--dev"}),
            (std::vector<std::string>{"--device"}));
  // Global flags follow a command too; a hidden alias's value is skipped.
  EXPECT_EQ(Complete({"benchctl", "submit", "attention", "--passes", "5", "--addr"}),
            (std::vector<std::string>{"--address"}));
  // A command with no subcommands offers its flags at once.
  const std::vector<std::string> flags = Complete({"benchctl", "cancel", ""});
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--json"), flags.end());
}

TEST_F(BashCompletionTest, AFlagsValue) {
  // A flag with no listed values offers nothing; a path flag offers files.
  EXPECT_TRUE(Complete({"benchctl", "submit", "benchmark", "--preset", ""}).empty());
  const std::string dir = ::testing::TempDir();
  const std::string file = WriteTemp("x", ".trace-target");
  const std::vector<std::string> files =
      Complete({"benchctl", "submit", "profile", "--trace", file.substr(0, file.size() - 3)});
  EXPECT_EQ(files, (std::vector<std::string>{file})) << dir;
  std::remove(file.c_str());
}

// zsh is not on every machine: its script is checked by zsh where it is,
// and everywhere for being made from the same tree as bash's.
TEST(ZshCompletionTest, GeneratedFromTheRegistry) {
  std::unique_ptr<Cli> cli = BuildCli();
  const std::string zsh = ZshCompletion(*cli);
  ASSERT_TRUE(absl::StartsWith(zsh, "#compdef benchctl\n"));
  int commands = 0, flags = 0;
  for (const CompletionNode& node : CompletionTree(*cli)) {
    for (const auto& [name, help] : node.commands) {
      EXPECT_TRUE(absl::StrContains(zsh, absl::StrCat("'", name, ":"))) << node.path << " " << name;
      ++commands;
    }
    for (const auto& [name, help] : node.flags) {
      EXPECT_TRUE(absl::StrContains(zsh, absl::StrCat("'", name, ":"))) << node.path << " " << name;
      ++flags;
    }
    EXPECT_TRUE(absl::StrContains(zsh, absl::StrCat("    '", node.path, "') reply=(")))
        << node.path;
  }
  EXPECT_GT(commands, 20);
  EXPECT_GT(flags, 100);
  for (const std::string& kind : JobKindNames()) {
    EXPECT_TRUE(absl::StrContains(zsh, absl::StrCat("'", kind, ":"))) << kind;
  }
  // Hidden aliases are skipped with their values, never offered.
  EXPECT_TRUE(absl::StrContains(zsh, "'--iters'"));
  EXPECT_FALSE(absl::StrContains(zsh, "'--iters:"));
  if (Installed("zsh")) {
    const std::string path = WriteTemp(zsh, ".zsh");
    int status = 0;
    Shell("zsh -n " + path, &status);
    EXPECT_EQ(status, 0);
    std::remove(path.c_str());
  }
}

// Where zsh is installed: the zsh script offers what the bash one does, its
// completion builtins replaced by stubs that print what they were given.
TEST(ZshCompletionTest, OffersWhatBashOffersWhereZshIs) {
  if (!Installed("zsh")) GTEST_SKIP() << "zsh is not installed";
  std::unique_ptr<Cli> cli = BuildCli();
  const std::string script = WriteTemp(ZshCompletion(*cli), ".zsh");
  const std::string driver = WriteTemp(absl::StrCat(R"zsh(compdef() { :; }
source )zsh",
                                                    script, R"zsh(
_describe() { local -a items; items=("${(@P)4}"); print -l -- "${items[@]%%:*}"; }
compadd() { [[ $1 == -a ]] && print -l -- "${(@P)2}"; }
_files() { print -- FILES; }
words=("$@"); CURRENT=$#words; PREFIX=${words[-1]}
_benchctl | grep -e "^$PREFIX" -e '^FILES$' | LC_ALL=C sort
)zsh"),
                                       ".driver.zsh");
  auto offered = [&](const std::string& words) {
    int status = 0;
    const std::string out = Shell("zsh -f " + driver + " " + words, &status);
    EXPECT_EQ(status, 0) << words;
    return std::vector<std::string>(absl::StrSplit(out, '\n', absl::SkipEmpty()));
  };
  std::vector<std::string> kinds = JobKindNames();
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(offered("benchctl su"), (std::vector<std::string>{"submit"}));
  EXPECT_EQ(offered("benchctl submit ''"), kinds);
  EXPECT_EQ(offered("benchctl list --kind ''"), kinds);
  EXPECT_EQ(offered("benchctl submit collective --st"), (std::vector<std::string>{"--steps"}));
  EXPECT_EQ(offered("benchctl submit benchmark --warm"),
            (std::vector<std::string>{"--warmup", "--warmup-max-steps"}));
  EXPECT_EQ(offered("benchctl --address 127.0.0.1:7531 gro"), (std::vector<std::string>{"groups"}));
  EXPECT_EQ(offered("benchctl submit attention --passes 5 --addr"),
            (std::vector<std::string>{"--address"}));
  EXPECT_EQ(offered("benchctl submit profile --trace ''"), (std::vector<std::string>{"FILES"}));
  std::remove(script.c_str());
  std::remove(driver.c_str());
}

TEST(CompletionTreeTest, GlobalFlagsAtEveryCommandAliasesOnlyAsValueFlags) {
  std::unique_ptr<Cli> cli = BuildCli();
  for (const CompletionNode& node : CompletionTree(*cli)) {
    std::vector<std::string> names;
    for (const auto& [name, help] : node.flags) names.push_back(name);
    EXPECT_NE(std::find(names.begin(), names.end(), "--address"), names.end()) << node.path;
    EXPECT_EQ(std::find(names.begin(), names.end(), "--devices"), names.end()) << node.path;
    if (node.path == "submit collective") {
      EXPECT_NE(std::find(node.value_flags.begin(), node.value_flags.end(), "--devices"),
                node.value_flags.end());
    }
  }
}

}  // namespace
}  // namespace benchd::client
