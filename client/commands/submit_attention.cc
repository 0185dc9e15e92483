// `benchctl submit attention`: attention alone, forward and backward timed apart.
#include <memory>

#include "client/commands/flags.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace submit_attention_command {

struct State {
  AttentionOptions attn;
  SubmitFlags flags;
};

const bool kRegistered = RegisterCommand({
    .path = "submit attention",
    .order = v1::JOB_KIND_ATTENTION,
    .description = "time forward and backward passes of attention alone (CS336 "
                   "pytorch_attention): the course's implementation or an SDPA backend, memory "
                   "saved for the backward, FLOP rates",
    .examples = {"benchctl submit attention --head-dim 64 --seq-len 1024 --impl flash "
                 "--precision bf16 --watch",
                 "benchctl submit attention --device cuda:0 --sweep seq_len=1024,4096 --sweep "
                 "implementation=faithful,flash --watch --pivot seq_len,implementation"},
    .setup = [](CLI::App* cmd, Cli& cli) -> CommandRun {
      auto s = std::make_shared<State>();
      AttentionOptions& o = s->attn;
      cmd->add_option("--device", o.device, "cpu:N or cuda:N (default: the node's first device)");
      cmd->add_option("--batch-size", o.batch_size, "batch (default 8)");
      cmd->add_option(
          "--heads", o.num_heads,
          "heads of --head-dim each (default: none, inputs (batch, seq, d) as the course)");
      cmd->add_option("--head-dim", o.head_dim, "d, per head (default 64)");
      cmd->add_option("--seq-len", o.seq_len, "sequence length T (default 1024)");
      cmd->add_flag("--causal", o.causal, "the course's causal mask");
      cmd->add_option("--precision", o.precision,
                      "fp32|bf16|fp16: the dtype of Q, K, V (not autocast; default fp32)");
      cmd->add_option(
          "--impl", o.implementation,
          "faithful (the course's ops, default) | sdpa (torch's pick) | flash | efficient "
          "| cudnn | math (only that SDPA backend; flash and cudnn need bf16/fp16 on CUDA) | "
          "tiled (FlashAttention-2's algorithm in ATen ops, 64x64 tiles) | fused (benchd's "
          "FlashAttention-2 CUDA kernels; CUDA, head dims 16/32/64/128)");
      cmd->add_option("--warmup", o.warmup_passes, "warm-up passes, not measured (default 5)");
      CLI::Option* steps = cmd->add_option(
          "--steps", o.passes, "measured passes, each a forward and a backward (default 100)");
      AddHiddenAlias(cli, cmd, "--passes", o.passes, steps);
      cmd->add_option("--seed", o.seed, "Q, K, V and the output gradient (default 0)");
      cmd->add_option("--memory-cap", o.memory_cap,
                      "CUDA only: at most this much more from the caching allocator, e.g. 2GiB (a "
                      "real cap: a cell above it runs out of memory)");
      cmd->add_flag("--flush-l2", o.flush_l2,
                    "zero 256 MiB before every pass (a cold L2, as triton's do_bench; CUDA)");
      cmd->add_option("--preset", o.preset,
                      "leaderboard: the CS336 FlashAttention leaderboard's case (bf16, causal, "
                      "batch 1, 16 heads, seq 16384, d 64, L2 flushed; flags given win)");
      AddSubmitFlags(cmd, s->flags);
      return [s](const Connect& connect) {
        return WithDaemon(connect, [&](const GlobalOptions& g) {
          return RunSubmitAttention(g, s->attn, s->flags);
        });
      };
    },
});

}  // namespace submit_attention_command
}  // namespace benchd::client
