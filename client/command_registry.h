// benchctl's one list of commands. Each command registers itself from its own
// file, client/commands/<name>.cc (`submit KIND`: commands/submit_<kind>.cc),
// with RegisterCommand: its words, its place among its siblings, its help
// and examples, and a setup that adds its flags and returns what it runs.
// BuildCli assembles the CLI11 tree from the registry; main, help, the typo
// suggestions (client/command_suggestion.h) and `benchctl completion`
// (client/completion.h) all read that one tree.
#ifndef BENCHD_CLIENT_COMMAND_REGISTRY_H_
#define BENCHD_CLIENT_COMMAND_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/commands.h"
#include "common/credentials.h"

namespace benchd::client {

// Where the daemon is and with which credentials (flag > environment > client
// config > default, common/credentials.h), resolved only by the commands that
// call one; its warnings are printed when it resolves.
using Connect = std::function<absl::StatusOr<GlobalOptions>()>;
// What a command does once the arguments were parsed and it was the one
// chosen; returns the exit code (client/exit_codes.h).
using CommandRun = std::function<int(const Connect& connect)>;

// The option group of the hidden aliases (client/commands/flags.h): left out
// of the help by BuildCli's formatter. Not CLI11's hidden group "", whose
// options lose their names in CLI11's own error messages.
inline constexpr const char* kAliasGroup = "Older spellings";

// Resolves the daemon's settings and runs `run` with them, or reports why
// they could not be resolved.
int WithDaemon(const Connect& connect, const std::function<int(const GlobalOptions&)>& run);

struct Cli;

struct Command {
  std::string path;  // its words after benchctl: "list", "submit benchmark", "groups create"
  int order = 0;     // its place among its siblings in help and completion, lowest first
  std::string description;
  // Whole command lines printed under its help ("Examples:"); each must parse
  // (command_registry_test.cc parses every one).
  std::vector<std::string> examples;
  // Adds its flags to `cmd` (it may set cmd's description too, when that is
  // derived from something not ready at registration, e.g. the proto's
  // kinds) and returns what runs when it is chosen: null for a command that
  // only groups subcommands (it then requires one). BuildCli owns cmd's
  // callback (the alias checks): checks across flags belong in the run.
  std::function<CommandRun(CLI::App* cmd, Cli& cli)> setup;
};

// Adds a command to the registry; every file calls it once per command from a
// namespace-scope initializer (`const bool kRegistered = RegisterCommand(...)`).
// Returns true so it can initialize that constant.
bool RegisterCommand(Command command);
// Every registered command, parents before their children, siblings by order.
std::vector<Command> RegisteredCommands();

// benchctl's whole command line, built from the registry.
struct Cli {
  CLI::App app{"benchctl: the command-line client of benchd, the GPU benchmarking daemon",
               "benchctl"};
  CredentialFlags creds;
  double timeout_seconds = 10;
  // Each command's CLI11 node and what it runs (null: a group of subcommands).
  std::vector<std::pair<const CLI::App*, CommandRun>> runs;
  // For completion: the values an option of a command takes, e.g. list's
  // --kind: the job kinds. Set by a command's setup through CompleteValues.
  std::map<std::pair<const CLI::App*, std::string>, std::vector<std::string>> values;
  // Options of a command whose values are paths (completed as files).
  std::map<std::pair<const CLI::App*, std::string>, bool> file_values;
  // Older spellings of flags, kept hidden (client/commands/flags.h): BuildCli
  // refuses one given with its canonical flag, and a `required` pair where
  // neither came ("--device is required", as CLI11 says it).
  struct Alias {
    const CLI::App* cmd;
    const CLI::Option* alias;
    const CLI::Option* canonical;
    bool required;
  };
  std::vector<Alias> aliases;

  void CompleteValues(const CLI::App* cmd, const std::string& flag,
                      std::vector<std::string> names) {
    values[{cmd, flag}] = std::move(names);
  }
  void CompleteFiles(const CLI::App* cmd, const std::string& flag) {
    file_values[{cmd, flag}] = true;
  }
};

// The global flags, then every registered command with its flags, help
// footer (its examples, the exit codes) and run.
std::unique_ptr<Cli> BuildCli();

// After cli.app.parse threw: prints the help (`benchctl`, `benchctl help
// [COMMAND...]`), the unknown command with the nearest ones, or CLI11's
// message, and returns the exit code (0 for --help and --version, else 2).
int ReportParseError(const Cli& cli, const CLI::ParseError& error,
                     const std::vector<std::string>& args);

// Runs the command the parse chose.
int RunChosen(const Cli& cli);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMMAND_REGISTRY_H_
