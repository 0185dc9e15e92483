// `benchctl watch JOB`: follow a job's events until it ends.
#include "client/commands/flags.h"

namespace benchd::client {
namespace watch_command {

const bool kRegistered = RegisterCommand({
    .path = "watch",
    .order = 40,
    .description = "follow a job's events until it ends",
    .examples = {"benchctl watch 7", "benchctl watch 7 --json > events.ndjson"},
    .setup =
        [](CLI::App* cmd, Cli&) {
          return AddJobCommand(cmd, "print one JobEvent per line (NDJSON)", RunWatch);
        },
});

}  // namespace watch_command
}  // namespace benchd::client
