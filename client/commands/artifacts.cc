// `benchctl artifacts list|get`: the files a job wrote.
#include <memory>
#include <string>

#include "client/commands/flags.h"

namespace benchd::client {
namespace artifacts_command {

struct State {
  std::string job_id, name, out;
};

const bool kGroup = RegisterCommand({
    .path = "artifacts",
    .order = 30,
    .description = "list or fetch the files a job wrote",
    .examples = {"benchctl artifacts list 7", "benchctl artifacts get 7 trace.json -o xl.json"},
});

const bool kList = RegisterCommand({
    .path = "artifacts list",
    .order = 1,
    .description = "list a job's artifacts",
    .examples = {"benchctl artifacts list 7 --json"},
    .setup =
        [](CLI::App* cmd, Cli&) {
          return AddJobCommand(cmd, "print the ListArtifactsResponse as JSON", RunArtifactsList);
        },
});

const bool kGet = RegisterCommand({
    .path = "artifacts get",
    .order = 2,
    .description = "fetch one artifact of a job",
    .examples = {"benchctl artifacts get 7 trace.json",
                 "benchctl artifacts get 7 ddp-timeline.svg -o - > timeline.svg"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("JOB", s->job_id, "job id")->required();
      cmd->add_option("NAME", s->name, "artifact name (from `artifacts list`)")->required();
      cmd->add_option("-o,--output", s->out, "where to write it (default: NAME here; - = stdout)");
      cli.CompleteFiles(cmd, "--output");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunArtifactsGet(g, s->job_id, s->name, s->out);
        });
      };
    },
});

}  // namespace artifacts_command
}  // namespace benchd::client
