#include "client/commands/flags.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/model_config.h"
#include "common/sweep_table.h"

namespace benchd::client {

const CLI::Validator kNonNegative(
    [](std::string& v) { return !v.empty() && v[0] == '-' ? "must be 0 or more" : std::string(); },
    "", "NONNEGATIVE");
const CLI::Validator kAtLeastOne(
    [](std::string& v) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      return end != v.c_str() && *end == '\0' && n >= 1 ? std::string()
                                                        : "expected a number of jobs, 1 or more";
    },
    "", "N>=1");

// The value columns come from the sweep's kind (common/sweep_table.h): the
// help names the rule and a benchmark's, a wrong one is refused listing the
// kind's own.
std::string PivotValueHelp() {
  return "the --pivot's value: one of the sweep kind's columns (median_step_ms by default where "
         "the kind has it, else its first; a wrong name is refused listing them); a "
         "benchmark's: " +
         absl::StrJoin(SweepValueColumns(), ", ");
}

CLI::Option* AddJsonFlag(CLI::App* cmd, bool& json, const std::string& what) {
  return cmd->add_flag("--json", json, what);
}

CLI::Option* AddRankDevices(Cli& cli, CLI::App* cmd, std::string& devices, const std::string& help,
                            bool required) {
  // Join: every value, each split at commas, in the order given.
  CLI::Option* device = cmd->add_option("--device", devices, help)
                            ->delimiter(',')
                            ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  CLI::Option* old = cmd->add_option("--devices", devices, "the older spelling of --device")
                         ->delimiter(',')
                         ->multi_option_policy(CLI::MultiOptionPolicy::Join)
                         ->group(kAliasGroup);
  cli.aliases.push_back({cmd, old, device, required});
  return device;
}

CommandRun AddJobCommand(CLI::App* cmd, const std::string& json_help,
                         int (*run)(const GlobalOptions&, const std::string&, bool)) {
  struct State {
    std::string job_id;
    bool json = false;
  };
  auto s = std::make_shared<State>();
  cmd->add_option("JOB", s->job_id, "job id")->required();
  AddJsonFlag(cmd, s->json, json_help);
  return [s, run](const Connect& connect) {
    return WithDaemon(connect, [&](const GlobalOptions& g) { return run(g, s->job_id, s->json); });
  };
}

namespace {

std::string PresetHelp() {
  std::vector<std::string> names;
  for (const auto& p : Presets()) names.push_back(p.name);
  return "model preset: " + absl::StrJoin(names, ", ") + " (size flags override its values)";
}

}  // namespace

void AddModelSizeFlags(CLI::App* cmd, BenchmarkOptions& o) {
  cmd->add_option("--preset", o.preset, PresetHelp());
  cmd->add_option("--vocab-size", o.vocab_size, "vocabulary size");
  cmd->add_option("--d-model", o.d_model, "model width");
  cmd->add_option("--d-ff", o.d_ff, "feed-forward width");
  cmd->add_option("--num-layers", o.num_layers, "number of layers");
  cmd->add_option("--num-heads", o.num_heads, "attention heads");
  cmd->add_option("--rope-theta", o.rope_theta, "RoPE theta (default 10000)");
}

void AddModelFlags(CLI::App* cmd, BenchmarkOptions& o) {
  AddModelSizeFlags(cmd, o);
  cmd->add_option("--mode", o.mode, "forward|forward_backward|train_step (default forward)");
  cmd->add_option("--precision", o.precision, "fp32|bf16|fp16 (default fp32)");
  cmd->add_option("--batch-size", o.batch_size, "batch size (default 4)");
  cmd->add_option("--context-length", o.context_length, "tokens per sequence (default 128)");
}

void AddStepFlags(Cli& cli, CLI::App* cmd, BenchmarkOptions& o) {
  cmd->add_option(
      "--device", o.device,
      "device to run on, e.g. cuda:0 or cpu:0, or another cluster member's: node1/cuda:0 "
      "(default: the node's first)");
  AddModelFlags(cmd, o);
  // Options: each off unless asked (docs/architecture.md "Options").
  CLI::Option* warmup =
      cmd->add_option("--warmup", o.warmup,
                      "warm-up steps, timed but not in the statistics (default 5); or auto: warm "
                      "up until the last 3 step times are within 2% of their median (up to "
                      "--warmup-max-steps)");
  AddHiddenAlias(cli, cmd, "--warmup-steps", o.warmup_steps, warmup);
  cmd->add_option("--seed", o.seed, "seed of weights and batch (default 0)")->check(kNonNegative);
  cmd->add_option("--warmup-max-steps", o.warmup_max_steps,
                  "with --warmup auto: at most this many warm-up steps (default 50)");
  cmd->add_option("--attention", o.attention,
                  "faithful|sdpa|flash|efficient|cudnn|math|tiled: the course's attention "
                  "(default), at::scaled_dot_product_attention letting PyTorch pick (sdpa) or "
                  "forcing one backend, or FlashAttention-2's tiled algorithm in ATen ops");
  cmd->add_option("--optimizer", o.optimizer,
                  "faithful|foreach|fused: the course's AdamW loop (default), or the same update "
                  "through torch's _foreach_ ops or its fused Adam kernel (train_step only)");
  cmd->add_flag("--tf32", o.allow_tf32, "allow TF32 for fp32 matmuls for this job");
  cmd->add_flag("--weight-copies", o.weight_copies,
                "bf16/fp16: keep bf16/fp16 copies of the matmul weights between steps, so "
                "autocast casts no weights (the fp32 weights stay the master copy; train_step "
                "needs --optimizer fused, which updates them and rewrites the copies)");
  cmd->add_flag("--optimizer-overlap", o.optimizer_overlap,
                "train_step with --optimizer fused: each parameter's update as soon as the "
                "backward has made its gradient, on a second CUDA stream beside the rest of the "
                "backward (with --cuda-graph inside the graph, which needs --weight-copies)");
  cmd->add_flag("--fused-ops", o.fused_ops,
                "the model's RMSNorm, SiLU and RoPE in fused kernels (at::rms_norm, at::silu, "
                "benchd's RoPE kernel on CUDA): the same math in fewer kernels");
  cmd->add_flag("--autograd", o.autograd,
                "run forward and backward through LibTorch's autograd engine, as PyTorch code "
                "does (default: benchd's explicit backward, the same kernels without the "
                "engine's host cost; options that change the model's ops always use autograd)");
}

void AddSubmitFlags(CLI::App* cmd, SubmitFlags& flags) {
  cmd->add_flag("--watch", flags.watch,
                "follow the job (progress on stderr), then print its result like `get` with "
                "the job's exit code (default: print the job id and return)");
  cmd->add_option("--progress-timeout", flags.progress_timeout,
                  "seconds the job may show no progress before its worker is killed and the "
                  "job fails (default: the daemon's, per kind)");
  cmd->add_flag("--json", flags.json, "print the Job as JSON (with --watch: the finished Job)");
  cmd->add_option("--sweep", flags.sweep,
                  "sweep a field: FIELD=V1,V2,... (repeatable; the Cartesian product, first "
                  "outermost, one job), e.g. --sweep precision=fp32,bf16 --sweep "
                  "model.preset=small,medium; fields relative to the request (profile and "
                  "memory: step.precision)");
  cmd->add_option("--cell-timeout", flags.cell_timeout,
                  "with --sweep: seconds a cell may run before it is cancelled (a TIMEOUT row; "
                  "the sweep goes on)");
  cmd->add_option("--pivot", flags.pivot.pivot,
                  "with --watch and --sweep: print the cells as a table ROWS,COLS, e.g. "
                  "model.preset,precision");
  cmd->add_option("--value", flags.pivot.value, PivotValueHelp());
  cmd->add_flag("--force", flags.force,
                "queue it even when its memory estimate (`benchctl estimate`) exceeds the GPU's "
                "memory (default: refused at submit)");
}

}  // namespace benchd::client
