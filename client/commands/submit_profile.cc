// `benchctl submit profile`: a few steps under the PyTorch profiler.
#include <memory>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_profile_command {

struct State {
  ProfileOptions profile;
  SubmitFlags flags;
  ProfileOutput out;
};

const bool kRegistered = RegisterCommand({
    .path = "submit profile",
    .order = v1::JOB_KIND_PROFILE,
    .description = "profile a few steps with the PyTorch profiler: nsys-style kernel tables per "
                   "named range (step, forward, backward, optimizer_step, attention parts) and a "
                   "Chrome trace",
    .examples = {"benchctl submit profile --preset xl --precision bf16 --context-length 256 "
                 "--watch --trace xl.json",
                 "benchctl submit profile --preset small --mode train_step --activities cpu "
                 "--watch --all"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      ProfileOptions& o = s->profile;
      AddStepFlags(cli, cmd, o.step);
      cmd->add_option(
          "--steps", o.step.measure_steps,
          "measured steps of the unprofiled run the profile is compared with (default 10)");
      cmd->add_option("--profile-steps", o.profile_steps,
                      "steps recorded by the profiler (default 3)");
      cmd->add_option("--activities", o.activities,
                      "cpu and/or cuda, e.g. cpu,cuda (default: cpu+cuda on a GPU, cpu on a CPU)");
      cmd->add_flag("--record-shapes", o.record_shapes,
                    "record every operator's input shapes (in the trace)");
      cmd->add_flag("--profile-memory", o.profile_memory, "record allocator events (in the trace)");
      AddSubmitFlags(cmd, s->flags);
      cmd->add_option("--top", s->out.top, "with --watch: kernels shown per range (default 10)")
          ->check(CLI::PositiveNumber);
      cmd->add_flag("--all", s->out.all, "with --watch: show every kernel of every range");
      cmd->add_option("--trace", s->out.trace_path,
                      "with --watch: save the Chrome trace here (ui.perfetto.dev, "
                      "chrome://tracing)");
      cli.CompleteFiles(cmd, "--trace");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitProfile(g, s->profile, s->flags, s->out);
        });
      };
    },
});

}  // namespace submit_profile_command
}  // namespace benchd::client
