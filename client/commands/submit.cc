// `benchctl submit KIND`: the group every request kind is queued through; each
// kind is its own file, submit_<kind>.cc, ordered by its JobKind.
#include "client/command_registry.h"
#include "client/format.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_command {

const bool kRegistered = RegisterCommand({
    .path = "submit",
    .order = 10,
    .description = "queue a job",
    .examples = {"benchctl submit benchmark --preset small --mode train_step --watch",
                 "benchctl submit collective --device cuda:0,cuda:1 --min 1MiB --max 1GiB"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      // The kinds come from the proto's JobKind, not ready at registration.
      cmd->description("queue a job (" + ChoicesText(JobKindNames()) +
                       "); prints the job id and returns (--watch: follows the job, then prints "
                       "its result)");
      return nullptr;
    },
});

}  // namespace submit_command
}  // namespace benchd::client
