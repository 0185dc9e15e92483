// `benchctl get JOB`: a job, its result and its steps (or a sweep's pivot).
#include <memory>
#include <string>

#include "client/commands/flags.h"

namespace benchd::client {
namespace get_command {

struct State {
  std::string job_id;
  bool json = false, csv = false;
  PivotFlags pivot;
};

const bool kRegistered = RegisterCommand({
    .path = "get",
    .order = 50,
    .description = "show a job, its result and its steps",
    .examples = {"benchctl get 1 --csv > steps.csv",
                 "benchctl get 9 --pivot model.preset,precision --value speedup_vs_fp32 --csv"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      cmd->add_option("JOB", s->job_id, "job id")->required();
      CLI::Option* json = AddJsonFlag(cmd, s->json, "print the Job as JSON");
      cmd->add_flag("--csv", s->csv,
                    "print one CSV row per step: job_id,index,warmup,step_s,host_s,forward_s,"
                    "backward_s,optimizer_s,loss (a sweep: one row per cell; with --pivot the "
                    "pivot; a precision job: its two tables, a blank line between; a ddp job: one "
                    "row per run)")
          ->excludes(json);
      cmd->add_option("--pivot", s->pivot.pivot,
                      "a sweep's cells as a table ROWS,COLS, e.g. model.preset,precision")
          ->excludes(json);
      cmd->add_option("--value", s->pivot.value, PivotValueHelp());
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunGet(g, s->job_id, s->json, s->csv, s->pivot);
        });
      };
    },
});

}  // namespace get_command
}  // namespace benchd::client
