// What benchctl says when a command is not one it knows (clig.dev: say what
// was not understood and suggest the nearest): CLI11 alone reports
// "A subcommand is required" for `benchctl lsit`.
#ifndef BENCHD_CLIENT_COMMAND_SUGGESTION_H_
#define BENCHD_CLIENT_COMMAND_SUGGESTION_H_

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace benchd::client {

// Edits between two words: insertions, deletions, substitutions and swaps of
// neighbours (optimal string alignment), so "lsit" is 1 from "list".
int EditDistance(const std::string& a, const std::string& b);

// The names within a typo of `word` (one edit, two for words of six letters
// or more; or the word a prefix of the name), nearest first.
std::vector<std::string> NearestNames(const std::string& word,
                                      const std::vector<std::string>& names);

// The subcommand of `app` with this name, or null.
const CLI::App* SubcommandNamed(const CLI::App& app, const std::string& name);

// Walks `args` (argv without the program) down `app`'s subcommands, skipping
// flags and the values of options that take one, to the first word where a
// subcommand is expected and none has that name. nullopt when every word
// where a command belongs names one.
struct UnknownCommand {
  std::string word;  // "lsit"
  std::string path;  // the commands before it: "benchctl", "benchctl submit"
  // "unknown command 'lsit' for 'benchctl'; did you mean 'list'?" (or the
  // commands there when none is near).
  std::string message;
};
std::optional<UnknownCommand> FindUnknownCommand(const CLI::App& app,
                                                 const std::vector<std::string>& args);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMMAND_SUGGESTION_H_
