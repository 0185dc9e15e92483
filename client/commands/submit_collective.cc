// `benchctl submit collective`: a collective timed over message sizes.
#include <memory>
#include <optional>
#include <string>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_collective_command {

struct State {
  CollectiveOptions coll;
  SubmitFlags flags;
  std::optional<std::string> svg_dir;
};

const bool kRegistered = RegisterCommand({
    .path = "submit collective",
    .order = v1::JOB_KIND_COLLECTIVE,
    .description = "time a collective over message sizes (and world sizes, backends): table, 3 SVG "
                   "plots",
    .examples = {"benchctl submit collective --group g1 --op all_reduce --min 1MiB --max 1GiB "
                 "--steps 20 --watch",
                 "benchctl submit collective --device cuda:0,cuda:1,cuda:2,cuda:3 --backends "
                 "nccl,gloo --world-sizes 2,4 --max 256MiB --watch --svg-dir plots"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      CollectiveOptions& o = s->coll;
      cmd->add_option("--group", o.group, "a resident group id");
      AddRankDevices(cli, cmd, o.devices,
                     "or devices, rank order: cuda:0,cuda:1,... or cpu:0,... (or --device "
                     "repeated)");
      cmd->add_option("--backend", o.backend, "nccl|gloo (default: nccl on cuda, gloo on cpu)");
      cmd->add_option("--backends", o.backends,
                      "sweep: one series per backend on --device, e.g. nccl,gloo");
      cmd->add_option("--world-sizes", o.world_sizes, "sweep: the first N devices, e.g. 2,4");
      cmd->add_option("--op", o.op, "all_reduce|all_gather|reduce_scatter|broadcast|all_to_all")
          ->capture_default_str();
      cmd->add_option("--dtype", o.dtype, "fp32|fp16|bf16|fp64|int32")->capture_default_str();
      cmd->add_option("--min", o.min, "smallest message, e.g. 1MiB (default 1MiB)");
      cmd->add_option("--max", o.max, "largest message, e.g. 1GiB (default --min)");
      cmd->add_option("--factor", o.factor, "size multiplier between steps (default 2)");
      cmd->add_option("--sizes", o.sizes, "a list of sizes instead, e.g. 4KiB,1MiB,64MiB");
      cmd->add_option("--warmup", o.warmup, "warm-up iterations per size (default 5)");
      CLI::Option* steps =
          cmd->add_option("--steps", o.iters, "measured iterations per size (default 20)");
      AddHiddenAlias(cli, cmd, "--iters", o.iters, steps);
      cmd->add_flag(
          "--in-place", o.in_place,
          "all_gather/reduce_scatter in place (all_reduce and broadcast always are in c10d)");
      cmd->add_option("--group-timeout", o.timeout_seconds,
                      "seconds after which a hung collective is aborted (default 300)");
      AddSubmitFlags(cmd, s->flags);
      cmd->add_option("--svg-dir", s->svg_dir,
                      "with --watch: save the three plots here as <job>-<plot>.svg");
      cli.CompleteFiles(cmd, "--svg-dir");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitCollective(g, s->coll, s->flags, s->svg_dir);
        });
      };
    },
});

}  // namespace submit_collective_command
}  // namespace benchd::client
