// `benchctl submit precision`: the mixed-precision experiments.
#include <memory>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_precision_command {

struct State {
  PrecisionOptions prec;
  SubmitFlags flags;
};

const bool kRegistered = RegisterCommand({
    .path = "submit precision",
    .order = v1::JOB_KIND_PRECISION,
    .description = "the mixed-precision experiments (CS336 mixed_precision): fp32/fp16/mixed "
                   "accumulation of 0.01 a thousand times, and the ToyModel's dtypes under "
                   "autocast (bf16, fp16)",
    .examples = {"benchctl submit precision --device cuda:0 --watch",
                 "benchctl submit precision --experiments accumulation --count 10000 --addend "
                 "0.001 --watch"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      PrecisionOptions& o = s->prec;
      cmd->add_option("--device", o.device, "cpu:N or cuda:N (default: the node's first device)");
      cmd->add_option(
          "--experiments", o.experiments,
          "accumulation, autocast or both, in that order (default accumulation,autocast)");
      cmd->add_option("--autocast-dtypes", o.autocast_dtypes,
                      "the autocast experiment's dtypes, one run each (default bf16,fp16)");
      cmd->add_option("--count", o.count,
                      "additions in the accumulation experiment (default 1000)");
      cmd->add_option("--addend", o.addend, "the value added (default 0.01)");
      cmd->add_option("--seed", o.seed, "the ToyModel's weights, input and targets (default 0)");
      AddSubmitFlags(cmd, s->flags);
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitPrecision(g, s->prec, s->flags);
        });
      };
    },
});

}  // namespace submit_precision_command
}  // namespace benchd::client
