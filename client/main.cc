// benchctl: builds the command line from the registry (client/command_registry.h;
// each command registers itself from client/commands/<name>.cc), parses, and
// runs the chosen command. Nothing here talks to the daemon or formats output.
#include <cstdlib>
#include <string>
#include <vector>

#include <grpc/support/log.h>
#include <CLI/CLI.hpp>

#include "client/command_registry.h"

int main(int argc, char** argv) {
  namespace bc = benchd::client;
  // gRPC core logs failed handshakes itself; benchctl's own message says why
  // and what to do, so its log is noise unless asked for with GRPC_VERBOSITY.
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function([](gpr_log_func_args*) {});
  std::unique_ptr<bc::Cli> cli = bc::BuildCli();
  try {
    cli->app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return bc::ReportParseError(*cli, e, std::vector<std::string>(argv + 1, argv + argc));
  }
  return bc::RunChosen(*cli);
}
