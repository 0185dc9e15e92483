// `benchctl submit ddp`: data-parallel training of the CS336 LM over a group.
//
// The target as `submit collective`'s, the step as `submit benchmark`'s less
// what a data-parallel step does not run (common/ddp_spec.cc refuses them:
// a single --device, the ranks being the devices; --mode, always a
// train_step; --warmup auto, every rank must run the same steps; --attention,
// --fused-ops, --weight-copies, which change the model's ops; --optimizer,
// --optimizers instead; and --cuda-graph, --export-parity), the batch, and
// which runs.
#include <memory>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_ddp_command {

struct State {
  DdpOptions ddp;
  SubmitFlags flags;
};

void AddDdpFlags(Cli& cli, CLI::App* cmd, DdpOptions& o) {
  cmd->add_option("--group", o.group, "a resident group id (`benchctl groups create`)");
  AddRankDevices(cli, cmd, o.devices,
                 "or devices, rank order: cuda:0,cuda:1,... or cpu:0,cpu:1,... (or --device "
                 "repeated; the job's own group unless a resident one has exactly these devices "
                 "and backend)");
  cmd->add_option("--backend", o.backend,
                  "with --device: nccl|gloo (default: nccl on cuda, gloo on cpu)");
  AddModelSizeFlags(cmd, o.step);
  cmd->add_option("--precision", o.step.precision, "fp32|bf16|fp16 (default fp32)");
  cmd->add_option("--global-batch", o.global_batch,
                  "sequences of all ranks together, split evenly over them (default 8; not with "
                  "--batch-size)");
  cmd->add_option("--batch-size", o.step.batch_size,
                  "sequences per rank instead (default: --global-batch / ranks)");
  cmd->add_option("--context-length", o.step.context_length, "tokens per sequence (default 128)");
  CLI::Option* warmup =
      cmd->add_option("--warmup", o.step.warmup,
                      "warm-up steps of each run, timed but not in the statistics (default 5)");
  AddHiddenAlias(cli, cmd, "--warmup-steps", o.step.warmup_steps, warmup);
  cmd->add_option("--steps", o.step.measure_steps, "measured steps of each run (default 10)");
  cmd->add_option("--seed", o.step.seed, "seed of weights and batches (default 0)")
      ->check(kNonNegative);
  cmd->add_flag("--tf32", o.step.allow_tf32, "allow TF32 for fp32 matmuls for this job");
  cmd->add_flag("--autograd", o.step.autograd,
                "every run's forward and backward go through LibTorch's autograd engine, which "
                "says when each gradient is final (as PyTorch DDP learns it), instead of "
                "benchd's explicit backward; needed by --variants reducer");
  cmd->add_option("--variants", o.variants,
                  "how gradients are averaged, one run each: naive (an all_reduce per parameter "
                  "after the backward), flat (one of them all flattened), overlap (per parameter "
                  "as its gradient is ready), bucketed (in buckets of --bucket-mb), reducer "
                  "(c10d's Reducer, PyTorch DDP's engine, in buckets of --bucket-mb; needs "
                  "--autograd); default the first four, and reducer with --autograd");
  cmd->add_option("--bucket-mb", o.bucket_mb,
                  "bucketed and reducer: bucket sizes in MB (10^6 bytes), one run each, e.g. "
                  "1,10,25,100 (default 1,10,100,1000)");
  cmd->add_option("--optimizers", o.optimizers,
                  "adamw (every rank keeps all of AdamW's state), sharded_adamw (ZeRO stage 1: "
                  "each rank keeps and steps its shard, then broadcasts it), adamw_overlapped "
                  "(adamw, each parameter stepped as soon as its all-reduce ends, while later "
                  "ones still run); several = every variant once per optimizer (default adamw)");
  cmd->add_flag("--sharded-optimizer", o.sharded_optimizer, "--optimizers sharded_adamw");
  cmd->add_option("--gradient-compressions", o.gradient_compressions,
                  "what the gradients travel as: none (their own dtype, default), bf16 (as "
                  "PyTorch DDP's bf16_compress_hook: half the bytes, the mean rounded to "
                  "bfloat16; not with reducer); both = every run twice");
  cmd->add_option("--optimizer-impl", o.step.optimizer,
                  "how AdamW (or a rank's shard of it) steps: faithful (the course's loop, "
                  "default), foreach or fused");
  cmd->add_option("--group-timeout", o.timeout_seconds,
                  "seconds after which a hung collective fails the job and breaks the group "
                  "(default 300; a transient group's rendezvous too)");
  cmd->add_flag("--no-traces", o.no_traces,
                "skip each run's profiled step (its Kineto trace per rank, the timelines and "
                "ddp-timeline.svg)");
}

const bool kRegistered = RegisterCommand({
    .path = "submit ddp",
    .order = v1::JOB_KIND_DDP,
    .description = "data-parallel training of the CS336 LM over a group (CS336 Systems 2.2-2.4): "
                   "a compute-only run, then each gradient synchronisation (naive, flat, overlap, "
                   "bucketed) x optimizer (adamw, sharded_adamw): step time, exposed "
                   "communication, memory, and whether the ranks stay identical",
    .examples = {"benchctl submit ddp --device cuda:0,cuda:1 --preset xl --global-batch 8 "
                 "--bucket-mb 1,10,100,1000 --optimizers adamw,sharded_adamw --watch",
                 "benchctl submit ddp --group g1 --preset small --autograd --variants "
                 "overlap,reducer --bucket-mb 25 --watch"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      AddDdpFlags(cli, cmd, s->ddp);
      AddSubmitFlags(cmd, s->flags);
      return [s](const Connect& connect) {
        return WithDaemon(
            connect, [&](const GlobalOptions& g) { return RunSubmitDdp(g, s->ddp, s->flags); });
      };
    },
});

}  // namespace submit_ddp_command
}  // namespace benchd::client
