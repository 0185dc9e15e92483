// `benchctl completion bash|zsh`: shell completion scripts generated from the
// CLI that BuildCli assembles from the command registry
// (client/command_registry.h), so a new command, flag or job kind completes
// without touching a script. Hidden aliases (client/commands/flags.h) are
// never offered; their values are still skipped when the words are read.
#ifndef BENCHD_CLIENT_COMPLETION_H_
#define BENCHD_CLIENT_COMPLETION_H_

#include <string>
#include <vector>

#include "client/command_registry.h"

namespace benchd::client {

// One command of the tree as completion sees it.
struct CompletionNode {
  std::string path;  // "" for benchctl itself, "submit benchmark", ...
  // Subcommands: name and the first clause of its description.
  std::vector<std::pair<std::string, std::string>> commands;
  // Flags offered here (its own and, since global flags may come after a
  // command, its ancestors'): name and the first clause of its help.
  std::vector<std::pair<std::string, std::string>> flags;
  // Every flag here that takes a value, hidden aliases included.
  std::vector<std::string> value_flags;
  // Values offered after a flag (Cli::CompleteValues), and flags whose value
  // is a path (Cli::CompleteFiles).
  std::vector<std::pair<std::string, std::vector<std::string>>> values;
  std::vector<std::string> file_flags;
};

// Every command, benchctl itself first, parents before their children.
std::vector<CompletionNode> CompletionTree(const Cli& cli);

// Defines _benchctl_complete and `complete -F` it for benchctl
// (`source <(benchctl completion bash)`).
std::string BashCompletion(const Cli& cli);
// A #compdef benchctl function (`source <(benchctl completion zsh)`, or saved
// as _benchctl on $fpath).
std::string ZshCompletion(const Cli& cli);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMPLETION_H_
