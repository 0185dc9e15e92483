// `benchctl models` and `benchctl evict`: the models resident in the workers.
#include <cstdio>
#include <memory>
#include <string>

#include "client/commands/flags.h"
#include "client/exit_codes.h"

namespace benchd::client {
namespace models_command {

struct State {
  std::string device, key;
  bool all = false, json = false;
  const CLI::Option* key_opt = nullptr;
  const CLI::Option* device_opt = nullptr;
  const CLI::Option* all_opt = nullptr;
};

const bool kModels = RegisterCommand({
    .path = "models",
    .order = 80,
    .description = "list models resident in the workers",
    .examples = {"benchctl models", "benchctl models --device cuda:0 --json"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("--device", s->device, "only this device (default: all)");
      AddJsonFlag(cmd, s->json, "print the ListModelsResponse as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(connect,
                          [&](const GlobalOptions& g) { return RunModels(g, s->device, s->json); });
      };
    },
});

const bool kEvict = RegisterCommand({
    .path = "evict",
    .order = 90,
    .description = "free resident models: KEY, --device D or --all",
    .examples = {"benchctl evict cuda:0/small/fp32", "benchctl evict --device cuda:0"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      CLI::Option* key = cmd->add_option("KEY", s->key, "model key (from `benchctl models`)");
      CLI::Option* device = cmd->add_option("--device", s->device, "every model on this device");
      CLI::Option* all = cmd->add_flag("--all", s->all, "every model on every device");
      key->excludes(device)->excludes(all);
      device->excludes(all);
      AddJsonFlag(cmd, s->json, "print the EvictModelResponse as JSON");
      s->key_opt = key, s->device_opt = device, s->all_opt = all;
      return [s](const Connect& connect) {
        if (s->key_opt->count() + s->device_opt->count() + s->all_opt->count() == 0) {
          std::fputs(
              "benchctl: evict: give a model KEY, --device D or --all\n"
              "Run with --help for more information.\n",
              stderr);
          return static_cast<int>(kExitUsage);
        }
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunEvict(g, s->key, s->device, s->all, s->json);
        });
      };
    },
});

}  // namespace models_command
}  // namespace benchd::client
