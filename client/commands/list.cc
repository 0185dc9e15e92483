// `benchctl list`: jobs, newest first, filtered by state, kind and device.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "client/commands/flags.h"
#include "client/format.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace list_command {

struct State {
  ListOptions options;
  bool json = false;
};

// queued ... interrupted, from the proto's JobState (what ParseJobState takes).
std::vector<std::string> JobStateNames() {
  std::vector<std::string> names;
  const google::protobuf::EnumDescriptor* states = v1::JobState_descriptor();
  for (int i = 0; i < states->value_count(); ++i) {
    const std::string name = absl::AsciiStrToLower(states->value(i)->name());
    if (states->value(i)->number() != 0) {
      names.emplace_back(absl::StripPrefix(name, "job_state_"));
    }
  }
  return names;
}

const bool kRegistered = RegisterCommand({
    .path = "list",
    .order = 60,
    .description = "list jobs, newest first",
    .examples = {"benchctl list --limit 100 --kind benchmark --state succeeded --device cuda:0",
                 "benchctl list --state running --json"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      ListOptions& o = s->options;
      cmd->add_option("--limit", o.limit,
                      "at most N jobs in all (default 50; fetched in pages of up to 1000)")
          ->check(kAtLeastOne);
      cmd->add_option("--state", o.state,
                      "only jobs in this state: queued, running, succeeded, failed, cancelled, "
                      "interrupted");
      cmd->add_option("--kind", o.kind, "only jobs of this kind: " + ChoicesText(JobKindNames()));
      cmd->add_option(
          "--device", o.device,
          "only jobs that run on this device, e.g. cuda:0 (a collective: any of its); in a "
          "cluster another node's device (node1/cuda:0) lists that node's jobs on it");
      AddJsonFlag(cmd, s->json, "print {\"jobs\": [...]}, every job listed, as JSON");
      cli.CompleteValues(cmd, "--kind", JobKindNames());
      cli.CompleteValues(cmd, "--state", JobStateNames());
      return [s](const Connect& connect) {
        return WithDaemon(connect,
                          [&](const GlobalOptions& g) { return RunList(g, s->options, s->json); });
      };
    },
});

}  // namespace list_command
}  // namespace benchd::client
