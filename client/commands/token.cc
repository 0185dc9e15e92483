// `benchctl token create|hash`: bearer tokens, made here with no daemon involved
// (client/token_command.h).
#include <cstdio>
#include <memory>
#include <string>

#include "client/commands/flags.h"
#include "client/token_command.h"

namespace benchd::client {
namespace token_command {

struct State {
  std::string role, name;
};

const bool kGroup = RegisterCommand({
    .path = "token",
    .order = 120,
    .description = "bearer tokens for the daemon's --auth-file (made here; no daemon needed)",
    .examples = {"benchctl token create --role submit --name alice > alice.token",
                 "benchctl token hash < alice.token"},
});

const bool kCreate = RegisterCommand({
    .path = "token create",
    .order = 1,
    .description = "print a new token on stdout (alone: `> NAME.token` keeps it) and, on stderr, "
                   "the line to add to the daemon's --auth-file",
    .examples = {"benchctl token create --role submit --name alice > alice.token",
                 "benchctl token create --role read --name grafana > grafana.token"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("--role", s->role, "read|submit|admin")->required();
      cmd->add_option("--name", s->name,
                      "who holds the token: 1-64 letters, digits, '.', '_', '-', '@'")
          ->required();
      cli.CompleteValues(cmd, "--role", {"read", "submit", "admin"});
      return [s](const Connect&) { return RunTokenCreate(s->role, s->name); };
    },
});

const bool kHash = RegisterCommand({
    .path = "token hash",
    .order = 2,
    .description = "read a token on stdin, print its --auth-file hash (sha256:...)",
    .examples = {"benchctl token hash < alice.token"},
    .setup = [](CLI::App*, Cli&) -> CommandRun {
      return [](const Connect&) { return RunTokenHash(stdin); };
    },
});

}  // namespace token_command
}  // namespace benchd::client
