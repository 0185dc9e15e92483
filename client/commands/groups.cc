// `benchctl groups create|list|destroy`: resident process groups.
#include <memory>
#include <string>

#include "client/commands/flags.h"

namespace benchd::client {
namespace groups_command {

struct State {
  std::string devices, backend, id;
  double timeout = 0;
  bool json = false;
};

const bool kGroup = RegisterCommand({
    .path = "groups",
    .order = 130,
    .description = "resident process groups (NCCL on GPUs, Gloo)",
    .examples = {"benchctl groups create --device cuda:0,cuda:1 --backend nccl",
                 "benchctl groups list", "benchctl groups destroy g1"},
});

const bool kCreate = RegisterCommand({
    .path = "groups create",
    .order = 1,
    .description = "make a group over devices of this node, or of the cluster's nodes "
                   "(node0/cuda:0,node1/cuda:0: one group across them)",
    .examples = {"benchctl groups create --device cuda:0,cuda:1 --backend nccl",
                 "benchctl groups create --device node0/cuda:0 --device node1/cuda:0"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      AddRankDevices(cli, cmd, s->devices,
                     "rank order, e.g. cuda:0,cuda:1 or cpu:0,cpu:1 (or --device repeated); in a "
                     "cluster node0/cuda:0,node1/cuda:0 (required)",
                     /*required=*/true);
      cmd->add_option("--backend", s->backend, "nccl|gloo (default: nccl on cuda, gloo on cpu)");
      cmd->add_option("--group-timeout", s->timeout,
                      "seconds after which a hung collective is aborted (default 300)");
      AddJsonFlag(cmd, s->json, "print the Group as JSON");
      cli.CompleteValues(cmd, "--backend", {"nccl", "gloo"});
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunGroupsCreate(g, s->devices, s->backend, s->timeout, s->json);
        });
      };
    },
});

const bool kList = RegisterCommand({
    .path = "groups list",
    .order = 2,
    .description = "list the groups, their state and set-up time",
    .examples = {"benchctl groups list --json"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      AddJsonFlag(cmd, s->json, "print the ListGroupsResponse as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(connect,
                          [&](const GlobalOptions& g) { return RunGroupsList(g, s->json); });
      };
    },
});

const bool kDestroy = RegisterCommand({
    .path = "groups destroy",
    .order = 3,
    .description = "drop a group",
    .examples = {"benchctl groups destroy g1"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("ID", s->id, "group id (from `groups list`)")->required();
      AddJsonFlag(cmd, s->json, "print the DestroyGroupResponse as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(
            connect, [&](const GlobalOptions& g) { return RunGroupsDestroy(g, s->id, s->json); });
      };
    },
});

}  // namespace groups_command
}  // namespace benchd::client
