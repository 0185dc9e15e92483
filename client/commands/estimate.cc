// `benchctl estimate`: memory by formula, answered by the daemon (or here, --offline).
#include <memory>

#include "client/commands/flags.h"

namespace benchd::client {
namespace estimate_command {

struct State {
  EstimateOptions estimate;
  bool json = false;
};

const bool kRegistered = RegisterCommand({
    .path = "estimate",
    .order = 20,
    .description = "memory by formula: bytes of parameters, gradients, AdamW state and "
                   "activations, term by term, per device under a sharding (answered by the "
                   "daemon; no job, no device time)",
    .examples = {"benchctl estimate --preset xxl --mode train_step --precision bf16 "
                 "--data-parallel 64 --fsdp",
                 "benchctl estimate --preset small --batch-size 8 --context-length 512 --offline"},
    .setup = [](CLI::App* cmd, Cli&) -> CommandRun {
      auto s = std::make_shared<State>();
      EstimateOptions& o = s->estimate;
      AddModelFlags(cmd, o.step);
      cmd->add_flag("--autograd", o.step.autograd,
                    "the step runs through autograd: a forward-only step then keeps what "
                    "backward would need (default: benchd's explicit step, which frees it)");
      cmd->add_option("--data-parallel", o.data_parallel,
                      "data-parallel replicas, each running --batch-size sequences (default 1)");
      cmd->add_option("--zero-stage", o.zero_stage,
                      "ZeRO over the replicas: 0 none, 1 AdamW state, 2 and gradients, 3 and "
                      "parameters (default 0)");
      cmd->add_flag("--fsdp", o.fsdp,
                    "FSDP as CS336 defines it: ZeRO-3's sharding and half of the activations");
      cmd->add_option("--tensor-parallel", o.tensor_parallel,
                      "tensor-parallel degree: heads, d_ff and vocabulary split (default 1)");
      cmd->add_option("--pipeline-stages", o.pipeline_stages, "pipeline stages (default 1)");
      cmd->add_flag("--offline", o.offline,
                    "compute it here with the daemon's own code, without a daemon");
      AddJsonFlag(cmd, s->json, "print the MemoryEstimate as JSON");
      return [s](const Connect& connect) {
        if (s->estimate.offline) return RunEstimate(GlobalOptions(), s->estimate, s->json);
        return WithDaemon(
            connect, [&](const GlobalOptions& g) { return RunEstimate(g, s->estimate, s->json); });
      };
    },
});

}  // namespace estimate_command
}  // namespace benchd::client
