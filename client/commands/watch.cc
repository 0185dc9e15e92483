// `benchctl watch JOB`: follow a job's events until it ends.
#include <memory>
#include <string>

#include "client/commands/flags.h"

namespace benchd::client {
namespace {

struct State {
  std::string job_id;
  bool json = false;
};

const bool kRegistered = RegisterCommand({
    .path = "watch",
    .order = 40,
    .description = "follow a job's events until it ends",
    .examples = {"benchctl watch 7", "benchctl watch 7 --json > events.ndjson"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("JOB", s->job_id, "job id")->required();
      AddJsonFlag(cmd, s->json, "print one JobEvent per line (NDJSON)");
      return [s](const Connect& connect) {
        return WithDaemon(connect,
                          [&](const GlobalOptions& g) { return RunWatch(g, s->job_id, s->json); });
      };
    },
});

}  // namespace
}  // namespace benchd::client
