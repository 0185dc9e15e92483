// `benchctl cancel JOB`: cancel a queued or running job.
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
    .path = "cancel",
    .order = 70,
    .description = "cancel a queued or running job",
    .examples = {"benchctl cancel 7"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("JOB", s->job_id, "job id")->required();
      AddJsonFlag(cmd, s->json, "print the Job as JSON");
      return [s](const Connect& connect) {
        return WithDaemon(connect,
                          [&](const GlobalOptions& g) { return RunCancel(g, s->job_id, s->json); });
      };
    },
});

}  // namespace
}  // namespace benchd::client
