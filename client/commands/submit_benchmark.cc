// `benchctl submit benchmark`: time forward/backward/train steps of the CS336 LM.
#include <memory>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_benchmark_command {

struct State {
  BenchmarkOptions bench;
  SubmitFlags flags;
};

const bool kRegistered = RegisterCommand({
    .path = "submit benchmark",
    .order = v1::JOB_KIND_BENCHMARK,
    .description = "time forward/backward/train steps of the CS336 LM",
    .examples = {"benchctl submit benchmark --preset small --mode train_step --precision bf16 "
                 "--context-length 256 --watch",
                 "benchctl submit benchmark --mode train_step --sweep model.preset=small,medium "
                 "--sweep precision=fp32,bf16 --watch --pivot model.preset,precision"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      AddStepFlags(cli, cmd, s->bench);
      cmd->add_option("--steps", s->bench.measure_steps, "measured steps (default 10)");
      cmd->add_flag("--export-parity", s->bench.export_parity,
                    "build the model fresh from the seed and write a parity bundle (weights, "
                    "batch, first logits) for bench/reference/parity.py; `get` shows its path");
      cmd->add_flag("--cuda-graph", s->bench.cuda_graph,
                    "capture the whole step as a CUDA graph after 2 eager warm-up steps and "
                    "replay it (CUDA only; no forward/backward split; in train_step --optimizer "
                    "foreach is captured too, faithful and fused run eagerly after each replay)");
      AddSubmitFlags(cmd, s->flags);
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitBenchmark(g, s->bench, s->flags);
        });
      };
    },
});

}  // namespace submit_benchmark_command
}  // namespace benchd::client
