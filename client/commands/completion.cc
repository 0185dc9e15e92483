// `benchctl completion bash|zsh`: the shell completion scripts, generated from
// the registry (client/completion.h).
#include <cstdio>

#include "client/completion.h"
#include "client/exit_codes.h"

namespace benchd::client {
namespace completion_command {

const bool kGroup = RegisterCommand({
    .path = "completion",
    .order = 140,
    .description = "print a shell completion script for benchctl's commands, flags and job kinds",
    .examples = {"benchctl completion bash > ~/.local/share/bash-completion/completions/benchctl",
                 "benchctl completion zsh > ~/.zfunc/_benchctl"},
});

CommandRun Printing(Cli& cli, std::string (*script)(const Cli&)) {
  const Cli* all = &cli;  // the whole tree: read when it runs, after every command was added
  return [all, script](const Connect&) {
    std::fputs(script(*all).c_str(), stdout);
    return static_cast<int>(kExitOk);
  };
}

const bool kBash = RegisterCommand({
    .path = "completion bash",
    .order = 1,
    .description = "bash: source <(benchctl completion bash)",
    .examples = {"benchctl completion bash > /etc/bash_completion.d/benchctl"},
    .setup = [](CLI::App*, Cli& cli) { return Printing(cli, BashCompletion); },
});

const bool kZsh = RegisterCommand({
    .path = "completion zsh",
    .order = 2,
    .description = "zsh: source <(benchctl completion zsh), or save it as _benchctl on $fpath",
    .examples = {"benchctl completion zsh > ~/.zfunc/_benchctl"},
    .setup = [](CLI::App*, Cli& cli) { return Printing(cli, ZshCompletion); },
});

}  // namespace completion_command
}  // namespace benchd::client
