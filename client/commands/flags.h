// Flags shared by several benchctl commands (client/commands/<name>.cc), and
// the one vocabulary they spell ideas in (issue 38): one flag per idea across
// every command, the older spellings kept as hidden aliases.
//
//   --device   where it runs: one device (benchmark, profile, memory,
//              attention, precision; the filter of list, models, evict), or
//              the ranks of a collective, a ddp job or a group, in rank order,
//              comma-separated or repeated as benchd's own --device is.
//              Hidden alias: --devices.
//   --steps    measured repetitions of the kind's unit: a training step, a
//              collective call per size, an attention forward+backward pass.
//              Hidden aliases: --iters (collective), --passes (attention).
//   --warmup   warm-up repetitions of that unit, timed but not in the
//              statistics (step kinds also take `auto`). Hidden alias:
//              --warmup-steps (benchmark, profile, memory, ddp).
//
// command_registry_test.cc walks every command's flags and fails when one
// spells these ideas otherwise, or adds an alias that did not exist before.
#ifndef BENCHD_CLIENT_COMMANDS_FLAGS_H_
#define BENCHD_CLIENT_COMMANDS_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "client/command_registry.h"
#include "client/commands.h"
#include "client/spec_builder.h"

namespace benchd::client {

// CLI11's range validators print the full double range; these say it plainly.
extern const CLI::Validator kNonNegative;
extern const CLI::Validator kAtLeastOne;  // a number of jobs, 1 or more

// The --pivot's --value help: the rule, and a benchmark's columns.
std::string PivotValueHelp();

// --json into `json`.
CLI::Option* AddJsonFlag(CLI::App* cmd, bool& json, const std::string& what);

// An older spelling of `canonical` (see the vocabulary above): accepted into
// `variable`, left out of the help, refused together with `canonical`
// (Cli::CheckAliases, run by BuildCli after the parse).
template <typename T>
CLI::Option* AddHiddenAlias(Cli& cli, CLI::App* cmd, const std::string& alias, T& variable,
                            CLI::Option* canonical) {
  CLI::Option* old =
      cmd->add_option(alias, variable, "the older spelling of " + canonical->get_name());
  old->group(kAliasGroup);
  cli.aliases.push_back({cmd, old, canonical, false});
  return old;
}

// --device as the ranks of a collective, a ddp job or a group: comma-separated
// or repeated, joined into `devices` as "cuda:0,cuda:1"; --devices its hidden
// alias. `required`: one of the two must be given.
CLI::Option* AddRankDevices(Cli& cli, CLI::App* cmd, std::string& devices, const std::string& help,
                            bool required = false);

// The model alone, preset and sizes: every step request, `estimate` and `submit ddp`.
void AddModelSizeFlags(CLI::App* cmd, BenchmarkOptions& o);
// The model and the step's shape: shared by every step request and `estimate`.
void AddModelFlags(CLI::App* cmd, BenchmarkOptions& o);
// What one step is: device, model, mode, precision, batch, warm-up and the
// speed options (`submit benchmark`, `profile` and `memory`).
void AddStepFlags(Cli& cli, CLI::App* cmd, BenchmarkOptions& o);

// A command on one job: JOB and --json (`json_help`), then
// run(daemon, job id, json). watch, cancel and artifacts list.
CommandRun AddJobCommand(CLI::App* cmd, const std::string& json_help,
                         int (*run)(const GlobalOptions&, const std::string&, bool));

// The flags every `submit KIND` has (client/commands.h SubmitFlags).
void AddSubmitFlags(CLI::App* cmd, SubmitFlags& flags);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_COMMANDS_FLAGS_H_
