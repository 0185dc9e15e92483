// `benchctl cancel JOB`: cancel a queued or running job.
#include "client/commands/flags.h"

namespace benchd::client {
namespace cancel_command {

const bool kRegistered = RegisterCommand({
    .path = "cancel",
    .order = 70,
    .description = "cancel a queued or running job",
    .examples = {"benchctl cancel 7"},
    .setup = [](CLI::App* cmd,
                Cli&) { return AddJobCommand(cmd, "print the Job as JSON", RunCancel); },
});

}  // namespace cancel_command
}  // namespace benchd::client
