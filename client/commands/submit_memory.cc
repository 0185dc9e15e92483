// `benchctl submit memory`: the CUDA allocator's history of a few steps.
#include <memory>
#include <optional>
#include <string>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_memory_command {

struct State {
  MemoryOptions memory;
  SubmitFlags flags;
  std::optional<std::string> svg_dir;
};

const bool kRegistered = RegisterCommand({
    .path = "submit memory",
    .order = v1::JOB_KIND_MEMORY,
    .description = "record the CUDA allocator's history of a few steps (or a sweep of contexts x "
                   "modes x precisions): peak tables, largest allocations, timeline SVGs, "
                   "memory_viz snapshots",
    .examples = {"benchctl submit memory --device cuda:0 --preset small --mode train_step --watch",
                 "benchctl submit memory --preset 2.7B --contexts 128,256,512 --modes "
                 "forward,train_step --precisions fp32,bf16 --watch --svg-dir timelines"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      MemoryOptions& o = s->memory;
      AddStepFlags(cli, cmd, o.step);
      cmd->add_option("--record-steps", o.record_steps,
                      "steps recorded after the warm-up (default 2)");
      cmd->add_option("--max-entries", o.max_entries,
                      "allocator history entries kept per run (default 100000)");
      cmd->add_option("--stacks", o.stacks,
                      "none|cpp|all: C++ stacks of every allocation (cpp, the default; all = cpp, "
                      "the worker has no Python), or none (smaller, faster)");
      cmd->add_option("--top", o.top_allocations,
                      "largest allocations to list per run (default 10)");
      cmd->add_option("--contexts", o.contexts,
                      "sweep: context lengths, e.g. 128,256,512 (default: --context-length)");
      cmd->add_option("--modes", o.modes,
                      "sweep: modes, e.g. forward,train_step (default: --mode)");
      cmd->add_option("--precisions", o.precisions,
                      "sweep: precisions, e.g. fp32,bf16 (default: --precision)");
      AddSubmitFlags(cmd, s->flags);
      cmd->add_option("--svg-dir", s->svg_dir,
                      "with --watch: where to save the timelines: <job>-timeline[-<run>].svg "
                      "(default .)");
      cli.CompleteFiles(cmd, "--svg-dir");
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitMemory(g, s->memory, s->flags, s->svg_dir);
        });
      };
    },
});

}  // namespace submit_memory_command
}  // namespace benchd::client
