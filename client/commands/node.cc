// `benchctl node` and `benchctl nodes`: this node, and the cluster's.
#include <memory>

#include "client/commands/flags.h"

namespace benchd::client {
namespace node_command {

struct State {
  bool json = false;
  int wait = 0;
  double wait_timeout = 300;
};

const bool kNode = RegisterCommand({
    .path = "node",
    .order = 100,
    .description = "show the node: devices, workers, versions",
    .examples = {"benchctl node", "benchctl --address node1:7531 node --json"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      AddJsonFlag(cmd, s->json, "print the NodeInfo as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) { return RunNode(g, s->json); });
      };
    },
});

const bool kNodes = RegisterCommand({
    .path = "nodes",
    .order = 110,
    .description = "list the cluster's nodes: name, rank, state, address, devices (any member "
                   "answers)",
    .examples = {"benchctl nodes", "benchctl nodes --wait 2 --wait-timeout 600"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("--wait", s->wait,
                      "first wait until this many nodes are READY (a launch script's barrier)")
          ->check(CLI::Range(1, 1024));
      cmd->add_option("--wait-timeout", s->wait_timeout,
                      "seconds --wait may take before it gives up naming the missing nodes "
                      "(default 300)")
          ->check(CLI::Range(0.0, 86400.0));
      AddJsonFlag(cmd, s->json, "print the ListNodesResponse as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunNodes(g, s->json, s->wait, s->wait_timeout);
        });
      };
    },
});

}  // namespace node_command
}  // namespace benchd::client
