// benchctl: wires CLI11 subcommands to client/commands.h. Nothing here talks
// to the daemon or formats output.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpc/support/log.h>
#include <CLI/CLI.hpp>

#include "absl/strings/str_join.h"
#include "client/command_suggestion.h"
#include "client/commands.h"
#include "client/exit_codes.h"
#include "client/format.h"
#include "client/rpc.h"
#include "client/spec_builder.h"
#include "client/token_command.h"
#include "common/credentials.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/sweep_table.h"
#include "common/version.h"

namespace {

using benchd::client::BenchmarkOptions;
using benchd::client::GlobalOptions;

// CLI11's range validators print the full double range; these say it plainly.
const CLI::Validator kNonNegative(
    [](std::string& v) { return !v.empty() && v[0] == '-' ? "must be 0 or more" : std::string(); },
    "", "NONNEGATIVE");
const CLI::Validator kPositive(
    [](std::string& v) {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      return end != v.c_str() && d > 0 ? std::string() : "must be a number above 0";
    },
    "", "POSITIVE");
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
         absl::StrJoin(benchd::SweepValueColumns(), ", ");
}

std::string PresetHelp() {
  std::vector<std::string> names;
  for (const auto& p : benchd::Presets()) names.push_back(p.name);
  return "model preset: " + absl::StrJoin(names, ", ") + " (size flags override its values)";
}

// The model alone, preset and sizes: every step request, `estimate` and `submit ddp`.
void AddModelSizeFlags(CLI::App* cmd, BenchmarkOptions& o) {
  cmd->add_option("--preset", o.preset, PresetHelp());
  cmd->add_option("--vocab-size", o.vocab_size, "vocabulary size");
  cmd->add_option("--d-model", o.d_model, "model width");
  cmd->add_option("--d-ff", o.d_ff, "feed-forward width");
  cmd->add_option("--num-layers", o.num_layers, "number of layers");
  cmd->add_option("--num-heads", o.num_heads, "attention heads");
  cmd->add_option("--rope-theta", o.rope_theta, "RoPE theta (default 10000)");
}

// The model and the step's shape: shared by every step request and `estimate`.
void AddModelFlags(CLI::App* cmd, BenchmarkOptions& o) {
  AddModelSizeFlags(cmd, o);
  cmd->add_option("--mode", o.mode, "forward|forward_backward|train_step (default forward)");
  cmd->add_option("--precision", o.precision, "fp32|bf16|fp16 (default fp32)");
  cmd->add_option("--batch-size", o.batch_size, "batch size (default 4)");
  cmd->add_option("--context-length", o.context_length, "tokens per sequence (default 128)");
}

// The flags that say what one step is: model, mode, precision, batch,
// warm-up and the speed options (shared by `submit benchmark`, `profile`
// and `memory`).
void AddStepFlags(CLI::App* cmd, BenchmarkOptions& o) {
  cmd->add_option(
      "--device", o.device,
      "device to run on, e.g. cuda:0 or cpu:0, or another cluster member's: node1/cuda:0 "
      "(default: the node's first)");
  AddModelFlags(cmd, o);
  cmd->add_option("--warmup-steps", o.warmup_steps,
                  "warm-up steps, timed but not in the statistics (default 5)");
  cmd->add_option("--seed", o.seed, "seed of weights and batch (default 0)")->check(kNonNegative);
  // Options: each off unless asked (docs/architecture.md "Options").
  cmd->add_option("--warmup", o.warmup,
                  "auto: warm up until the last 3 step times are within 2% of their median "
                  "(up to --warmup-max-steps); or N, as --warmup-steps N");
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
  cmd->add_flag("--fused-ops", o.fused_ops,
                "the model's RMSNorm, SiLU and RoPE in fused kernels (at::rms_norm, at::silu, "
                "benchd's RoPE kernel on CUDA): the same math in fewer kernels");
  cmd->add_flag("--autograd", o.autograd,
                "run forward and backward through LibTorch's autograd engine, as PyTorch code "
                "does (default: benchd's explicit backward, the same kernels without the "
                "engine's host cost; options that change the model's ops always use autograd)");
}

void AddBenchmarkFlags(CLI::App* cmd, BenchmarkOptions& o) {
  AddStepFlags(cmd, o);
  cmd->add_option("--steps", o.measure_steps, "measured steps (default 10)");
  cmd->add_flag("--export-parity", o.export_parity,
                "build the model fresh from the seed and write a parity bundle (weights, batch, "
                "first logits) for bench/reference/parity.py; `get` shows its path");
  cmd->add_flag("--cuda-graph", o.cuda_graph,
                "capture the whole step as a CUDA graph after 2 eager warm-up steps and replay "
                "it (CUDA only; no forward/backward split; in train_step --optimizer foreach is "
                "captured too, faithful and fused run eagerly after each replay)");
}

void AddMemoryFlags(CLI::App* cmd, benchd::client::MemoryOptions& o) {
  AddStepFlags(cmd, o.step);
  cmd->add_option("--record-steps", o.record_steps, "steps recorded after the warm-up (default 2)");
  cmd->add_option("--max-entries", o.max_entries,
                  "allocator history entries kept per run (default 100000)");
  cmd->add_option("--stacks", o.stacks,
                  "none|cpp|all: C++ stacks of every allocation (cpp, the default; all = cpp, "
                  "the worker has no Python), or none (smaller, faster)");
  cmd->add_option("--top", o.top_allocations, "largest allocations to list per run (default 10)");
  cmd->add_option("--contexts", o.contexts,
                  "sweep: context lengths, e.g. 128,256,512 (default: --context-length)");
  cmd->add_option("--modes", o.modes, "sweep: modes, e.g. forward,train_step (default: --mode)");
  cmd->add_option("--precisions", o.precisions,
                  "sweep: precisions, e.g. fp32,bf16 (default: --precision)");
}

void AddProfileFlags(CLI::App* cmd, benchd::client::ProfileOptions& o) {
  AddStepFlags(cmd, o.step);
  cmd->add_option("--steps", o.step.measure_steps,
                  "measured steps of the unprofiled run the profile is compared with (default 10)");
  cmd->add_option("--profile-steps", o.profile_steps, "steps recorded by the profiler (default 3)");
  cmd->add_option("--activities", o.activities,
                  "cpu and/or cuda, e.g. cpu,cuda (default: cpu+cuda on a GPU, cpu on a CPU)");
  cmd->add_flag("--record-shapes", o.record_shapes,
                "record every operator's input shapes (in the trace)");
  cmd->add_flag("--profile-memory", o.profile_memory, "record allocator events (in the trace)");
}

void AddEstimateFlags(CLI::App* cmd, benchd::client::EstimateOptions& o) {
  AddModelFlags(cmd, o.step);
  cmd->add_flag("--autograd", o.step.autograd,
                "the step runs through autograd: a forward-only step then keeps what backward "
                "would need (default: benchd's explicit step, which frees it)");
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
}

void AddCollectiveFlags(CLI::App* cmd, benchd::client::CollectiveOptions& o) {
  cmd->add_option("--group", o.group, "a resident group id");
  cmd->add_option("--devices", o.devices, "or devices, rank order: cuda:0,cuda:1,... or cpu:0,...");
  cmd->add_option("--backend", o.backend, "nccl|gloo (default: nccl on cuda, gloo on cpu)");
  cmd->add_option("--backends", o.backends,
                  "sweep: one series per backend on --devices, e.g. nccl,gloo");
  cmd->add_option("--world-sizes", o.world_sizes, "sweep: the first N devices, e.g. 2,4");
  cmd->add_option("--op", o.op, "all_reduce|all_gather|reduce_scatter|broadcast|all_to_all")
      ->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "fp32|fp16|bf16|fp64|int32")->capture_default_str();
  cmd->add_option("--min", o.min, "smallest message, e.g. 1MiB (default 1MiB)");
  cmd->add_option("--max", o.max, "largest message, e.g. 1GiB (default --min)");
  cmd->add_option("--factor", o.factor, "size multiplier between steps (default 2)");
  cmd->add_option("--sizes", o.sizes, "a list of sizes instead, e.g. 4KiB,1MiB,64MiB");
  cmd->add_option("--warmup", o.warmup, "warm-up iterations per size (default 5)");
  cmd->add_option("--iters", o.iters, "measured iterations per size (default 20)");
  cmd->add_flag("--in-place", o.in_place,
                "all_gather/reduce_scatter in place (all_reduce and broadcast always are in c10d)");
  cmd->add_option("--group-timeout", o.timeout_seconds,
                  "seconds after which a hung collective is aborted (default 300)");
}

// `submit ddp`: the target as `submit collective`'s, the step as `submit
// benchmark`'s less what a data-parallel step does not run (common/ddp_spec.cc
// refuses them: --device, the ranks being the devices; --mode, always a
// train_step; --warmup auto, every rank must run the same steps; --attention,
// --fused-ops, --weight-copies, which change the model's ops; --optimizer,
// --optimizers instead; and --cuda-graph, --export-parity), the batch, and
// which runs.
void AddDdpFlags(CLI::App* cmd, benchd::client::DdpOptions& o) {
  cmd->add_option("--group", o.group, "a resident group id (`benchctl groups create`)");
  cmd->add_option("--devices", o.devices,
                  "or devices, rank order: cuda:0,cuda:1,... or cpu:0,cpu:1,... (the job's own "
                  "group unless a resident one has exactly these devices and backend)");
  cmd->add_option("--backend", o.backend,
                  "with --devices: nccl|gloo (default: nccl on cuda, gloo on cpu)");
  AddModelSizeFlags(cmd, o.step);
  cmd->add_option("--precision", o.step.precision, "fp32|bf16|fp16 (default fp32)");
  cmd->add_option("--global-batch", o.global_batch,
                  "sequences of all ranks together, split evenly over them (default 8; not with "
                  "--batch-size)");
  cmd->add_option("--batch-size", o.step.batch_size,
                  "sequences per rank instead (default: --global-batch / ranks)");
  cmd->add_option("--context-length", o.step.context_length, "tokens per sequence (default 128)");
  cmd->add_option("--warmup-steps", o.step.warmup_steps,
                  "warm-up steps of each run, timed but not in the statistics (default 5)");
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

void AddAttentionFlags(CLI::App* cmd, benchd::client::AttentionOptions& o) {
  cmd->add_option("--device", o.device, "cpu:N or cuda:N (default: the node's first device)");
  cmd->add_option("--batch-size", o.batch_size, "batch (default 8)");
  cmd->add_option("--heads", o.num_heads,
                  "heads of --head-dim each (default: none, inputs (batch, seq, d) as the course)");
  cmd->add_option("--head-dim", o.head_dim, "d, per head (default 64)");
  cmd->add_option("--seq-len", o.seq_len, "sequence length T (default 1024)");
  cmd->add_flag("--causal", o.causal, "the course's causal mask");
  cmd->add_option("--precision", o.precision,
                  "fp32|bf16|fp16: the dtype of Q, K, V (not autocast; default fp32)");
  cmd->add_option(
      "--impl", o.implementation,
      "faithful (the course's ops, default) | sdpa (torch's pick) | flash | efficient "
      "| cudnn | math (only that SDPA backend; flash and cudnn need bf16/fp16 on CUDA) | tiled "
      "(FlashAttention-2's algorithm in ATen ops, 64x64 tiles) | fused (benchd's "
      "FlashAttention-2 CUDA kernels; CUDA, head dims 16/32/64/128)");
  cmd->add_option("--warmup", o.warmup_passes, "warm-up passes, not measured (default 5)");
  cmd->add_option("--passes", o.passes,
                  "measured passes, each a forward and a backward (default 100)");
  cmd->add_option("--seed", o.seed, "Q, K, V and the output gradient (default 0)");
  cmd->add_option("--memory-cap", o.memory_cap,
                  "CUDA only: at most this much more from the caching allocator, e.g. 2GiB (a real "
                  "cap: a cell above it runs out of memory)");
  cmd->add_flag("--flush-l2", o.flush_l2,
                "zero 256 MiB before every pass (a cold L2, as triton's do_bench; CUDA)");
  cmd->add_option("--preset", o.preset,
                  "leaderboard: the CS336 FlashAttention leaderboard's case (bf16, causal, batch "
                  "1, 16 heads, seq 16384, d 64, L2 flushed; flags given win)");
}

void AddPrecisionFlags(CLI::App* cmd, benchd::client::PrecisionOptions& o) {
  cmd->add_option("--device", o.device, "cpu:N or cuda:N (default: the node's first device)");
  cmd->add_option("--experiments", o.experiments,
                  "accumulation, autocast or both, in that order (default accumulation,autocast)");
  cmd->add_option("--autocast-dtypes", o.autocast_dtypes,
                  "the autocast experiment's dtypes, one run each (default bf16,fp16)");
  cmd->add_option("--count", o.count, "additions in the accumulation experiment (default 1000)");
  cmd->add_option("--addend", o.addend, "the value added (default 0.01)");
  cmd->add_option("--seed", o.seed, "the ToyModel's weights, input and targets (default 0)");
}

}  // namespace

int main(int argc, char** argv) {
  namespace bc = benchd::client;
  // gRPC core logs failed handshakes itself; benchctl's own message says why
  // and what to do, so its log is noise unless asked for with GRPC_VERBOSITY.
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function([](gpr_log_func_args*) {});
  CLI::App app{"benchctl: the command-line client of benchd, the GPU benchmarking daemon",
               "benchctl"};
  app.footer(std::string(bc::kExitCodesHelp) + benchd::kCredentialsEnvHelp);
  app.require_subcommand(1);
  // Global flags may come after the subcommand too: `benchctl get J --address h:p`.
  app.fallthrough();
  app.set_version_flag("--version", std::string(benchd::kVersion));
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("benchctl: ") + e.what() + "\nRun with --help for more information.\n";
  });

  // Connection settings resolve flag > environment > client config file >
  // default after parsing (common/credentials.h).
  GlobalOptions g;
  benchd::CredentialFlags creds;
  app.add_option("--address", creds.address,
                 "benchd's gRPC address host:port (env BENCHD_ADDRESS, config \"address\"; "
                 "default 127.0.0.1:7531)");
  app.add_option("--timeout", g.timeout_seconds,
                 "seconds allowed for connecting and for each call (watch: connecting only)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--token-file", creds.token_file,
                 "a file whose first line is the bearer token (env BENCHD_TOKEN_FILE, or the "
                 "token itself in BENCHD_TOKEN; config \"token_file\")");
  app.add_flag("--tls", creds.tls,
               "speak TLS, verifying the daemon against the system's CAs (env BENCHD_TLS=1)");
  app.add_option("--tls-ca", creds.tls_ca,
                 "speak TLS, verifying the daemon's certificate against this CA (PEM; env "
                 "BENCHD_TLS_CA)");
  app.add_option("--tls-cert", creds.tls_cert,
                 "client certificate for mTLS (PEM; with --tls-key; env BENCHD_TLS_CERT)");
  app.add_option("--tls-key", creds.tls_key,
                 "the client certificate's private key (PEM; env BENCHD_TLS_KEY)");
  app.add_option("--tls-server-name", creds.tls_server_name,
                 "the name to verify in the daemon's certificate when it is not the address's "
                 "host (env BENCHD_TLS_SERVER_NAME)");

  bool json = false;
  auto add_json = [&json](CLI::App* cmd, const std::string& what) {
    return cmd->add_flag("--json", json, what);
  };

  // submit KIND: every request kind is queued the same way.
  CLI::App* submit = app.add_subcommand(
      "submit", "queue a job (" + bc::ChoicesText(benchd::JobKindNames()) +
                    "); prints the job id and returns (--watch: follows the job, then prints "
                    "its result)");
  submit->require_subcommand(1);
  bc::SubmitFlags submit_flags;
  auto add_submit_flags = [&submit_flags](CLI::App* cmd) {
    cmd->add_flag("--watch", submit_flags.watch,
                  "follow the job (progress on stderr), then print its result like `get` with "
                  "the job's exit code (default: print the job id and return)");
    cmd->add_option("--progress-timeout", submit_flags.progress_timeout,
                    "seconds the job may show no progress before its worker is killed and the "
                    "job fails (default: the daemon's, per kind)");
    cmd->add_flag("--json", submit_flags.json,
                  "print the Job as JSON (with --watch: the finished Job)");
    cmd->add_option("--sweep", submit_flags.sweep,
                    "sweep a field: FIELD=V1,V2,... (repeatable; the Cartesian product, first "
                    "outermost, one job), e.g. --sweep precision=fp32,bf16 --sweep "
                    "model.preset=small,medium; fields relative to the request (profile and "
                    "memory: step.precision)");
    cmd->add_option("--cell-timeout", submit_flags.cell_timeout,
                    "with --sweep: seconds a cell may run before it is cancelled (a TIMEOUT row; "
                    "the sweep goes on)");
    cmd->add_option("--pivot", submit_flags.pivot.pivot,
                    "with --watch and --sweep: print the cells as a table ROWS,COLS, e.g. "
                    "model.preset,precision");
    cmd->add_option("--value", submit_flags.pivot.value, PivotValueHelp());
    cmd->add_flag("--force", submit_flags.force,
                  "queue it even when its memory estimate (`benchctl estimate`) exceeds the GPU's "
                  "memory (default: refused at submit)");
  };

  CLI::App* benchmark =
      submit->add_subcommand("benchmark", "time forward/backward/train steps of the CS336 LM");
  BenchmarkOptions bench;
  AddBenchmarkFlags(benchmark, bench);
  add_submit_flags(benchmark);

  CLI::App* profile_cmd = submit->add_subcommand(
      "profile",
      "profile a few steps with the PyTorch profiler: nsys-style kernel tables per named range "
      "(step, forward, backward, optimizer_step, attention parts) and a Chrome trace");
  benchd::client::ProfileOptions profile;
  AddProfileFlags(profile_cmd, profile);
  add_submit_flags(profile_cmd);
  bc::ProfileOutput profile_out;
  profile_cmd
      ->add_option("--top", profile_out.top, "with --watch: kernels shown per range (default 10)")
      ->check(CLI::PositiveNumber);
  profile_cmd->add_flag("--all", profile_out.all, "with --watch: show every kernel of every range");
  profile_cmd->add_option("--trace", profile_out.trace_path,
                          "with --watch: save the Chrome trace here (ui.perfetto.dev, "
                          "chrome://tracing)");

  CLI::App* memory_cmd = submit->add_subcommand(
      "memory",
      "record the CUDA allocator's history of a few steps (or a sweep of contexts x modes x "
      "precisions): peak tables, largest allocations, timeline SVGs, memory_viz snapshots");
  benchd::client::MemoryOptions memory;
  AddMemoryFlags(memory_cmd, memory);
  add_submit_flags(memory_cmd);
  std::optional<std::string> memory_svg_dir;
  memory_cmd->add_option("--svg-dir", memory_svg_dir,
                         "with --watch: where to save the timelines: <job>-timeline[-<run>].svg "
                         "(default .)");

  CLI::App* collective_cmd = submit->add_subcommand(
      "collective",
      "time a collective over message sizes (and world sizes, backends): table, 3 SVG plots");
  bc::CollectiveOptions coll;
  AddCollectiveFlags(collective_cmd, coll);
  add_submit_flags(collective_cmd);
  std::optional<std::string> coll_svg_dir;
  collective_cmd->add_option("--svg-dir", coll_svg_dir,
                             "with --watch: save the three plots here as <job>-<plot>.svg");

  CLI::App* attention_cmd = submit->add_subcommand(
      "attention",
      "time forward and backward passes of attention alone (CS336 pytorch_attention): the "
      "course's implementation or an SDPA backend, memory saved for the backward, FLOP rates");
  bc::AttentionOptions attn;
  AddAttentionFlags(attention_cmd, attn);
  add_submit_flags(attention_cmd);
  CLI::App* precision_cmd = submit->add_subcommand(
      "precision",
      "the mixed-precision experiments (CS336 mixed_precision): fp32/fp16/mixed accumulation "
      "of 0.01 a thousand times, and the ToyModel's dtypes under autocast (bf16, fp16)");
  bc::PrecisionOptions prec;
  AddPrecisionFlags(precision_cmd, prec);
  add_submit_flags(precision_cmd);
  CLI::App* ddp_cmd = submit->add_subcommand(
      "ddp",
      "data-parallel training of the CS336 LM over a group (CS336 Systems 2.2-2.4): a "
      "compute-only run, then each gradient synchronisation (naive, flat, overlap, bucketed) x "
      "optimizer (adamw, sharded_adamw): step time, exposed communication, memory, and whether "
      "the ranks stay identical");
  bc::DdpOptions ddp;
  AddDdpFlags(ddp_cmd, ddp);
  add_submit_flags(ddp_cmd);
  CLI::App* estimate_cmd = app.add_subcommand(
      "estimate",
      "memory by formula: bytes of parameters, gradients, AdamW state and activations, term by "
      "term, per device under a sharding (answered by the daemon; no job, no device time)");
  bc::EstimateOptions estimate;
  AddEstimateFlags(estimate_cmd, estimate);
  add_json(estimate_cmd, "print the MemoryEstimate as JSON");

  std::string job_id;
  CLI::App* artifacts = app.add_subcommand("artifacts", "list or fetch the files a job wrote");
  artifacts->require_subcommand(1);
  CLI::App* artifacts_list = artifacts->add_subcommand("list", "list a job's artifacts");
  artifacts_list->add_option("JOB", job_id, "job id")->required();
  add_json(artifacts_list, "print the ListArtifactsResponse as JSON");
  CLI::App* artifacts_get = artifacts->add_subcommand("get", "fetch one artifact of a job");
  std::string artifact_name, artifact_out;
  artifacts_get->add_option("JOB", job_id, "job id")->required();
  artifacts_get->add_option("NAME", artifact_name, "artifact name (from `artifacts list`)")
      ->required();
  artifacts_get->add_option("-o,--output", artifact_out,
                            "where to write it (default: NAME here; - = stdout)");

  CLI::App* watch_cmd = app.add_subcommand("watch", "follow a job's events until it ends");
  watch_cmd->add_option("JOB", job_id, "job id")->required();
  add_json(watch_cmd, "print one JobEvent per line (NDJSON)");

  CLI::App* get = app.add_subcommand("get", "show a job, its result and its steps");
  get->add_option("JOB", job_id, "job id")->required();
  bool csv = false;
  CLI::Option* get_json = add_json(get, "print the Job as JSON");
  get->add_flag("--csv", csv,
                "print one CSV row per step: job_id,index,warmup,step_s,host_s,forward_s,"
                "backward_s,optimizer_s,loss (a sweep: one row per cell; with --pivot the pivot; "
                "a precision job: its two tables, a blank line between; a ddp job: one row per "
                "run)")
      ->excludes(get_json);
  bc::PivotFlags get_pivot;
  get->add_option("--pivot", get_pivot.pivot,
                  "a sweep's cells as a table ROWS,COLS, e.g. model.preset,precision")
      ->excludes(get_json);
  get->add_option("--value", get_pivot.value, PivotValueHelp());

  CLI::App* list = app.add_subcommand("list", "list jobs, newest first");
  bc::ListOptions list_opts;
  list->add_option("--limit", list_opts.limit,
                   "at most N jobs in all (default 50; fetched in pages of up to 1000)")
      ->check(kAtLeastOne);
  list->add_option("--state", list_opts.state,
                   "only jobs in this state: queued, running, succeeded, failed, cancelled, "
                   "interrupted");
  list->add_option("--kind", list_opts.kind,
                   "only jobs of this kind: " + bc::ChoicesText(benchd::JobKindNames()));
  list->add_option(
      "--device", list_opts.device,
      "only jobs that run on this device, e.g. cuda:0 (a collective: any of its); in a "
      "cluster another node's device (node1/cuda:0) lists that node's jobs on it");
  add_json(list, "print {\"jobs\": [...]}, every job listed, as JSON");

  CLI::App* cancel = app.add_subcommand("cancel", "cancel a queued or running job");
  cancel->add_option("JOB", job_id, "job id")->required();
  add_json(cancel, "print the Job as JSON");

  std::string device;
  CLI::App* models = app.add_subcommand("models", "list models resident in the workers");
  models->add_option("--device", device, "only this device (default: all)");
  add_json(models, "print the ListModelsResponse as JSON");

  CLI::App* evict = app.add_subcommand("evict", "free resident models: KEY, --device D or --all");
  std::string key;
  bool all = false;
  CLI::Option* key_opt = evict->add_option("KEY", key, "model key (from `benchctl models`)");
  CLI::Option* device_opt = evict->add_option("--device", device, "every model on this device");
  CLI::Option* all_opt = evict->add_flag("--all", all, "every model on every device");
  key_opt->excludes(device_opt)->excludes(all_opt);
  device_opt->excludes(all_opt);
  add_json(evict, "print the EvictModelResponse as JSON");

  CLI::App* node = app.add_subcommand("node", "show the node: devices, workers, versions");
  add_json(node, "print the NodeInfo as JSON");

  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "list the cluster's nodes: name, rank, state, address, devices (any member answers)");
  int nodes_wait = 0;
  double nodes_wait_timeout = 300;
  nodes
      ->add_option("--wait", nodes_wait,
                   "first wait until this many nodes are READY (a launch script's barrier)")
      ->check(CLI::Range(1, 1024));
  nodes
      ->add_option("--wait-timeout", nodes_wait_timeout,
                   "seconds --wait may take before it gives up naming the missing nodes "
                   "(default 300)")
      ->check(CLI::Range(0.0, 86400.0));
  add_json(nodes, "print the ListNodesResponse as JSON");

  // token create|hash: made here, no daemon involved.
  CLI::App* token = app.add_subcommand(
      "token", "bearer tokens for the daemon's --auth-file (made here; no daemon needed)");
  token->require_subcommand(1);
  CLI::App* token_create = token->add_subcommand(
      "create",
      "print a new token on stdout (alone: `> NAME.token` keeps it) and, on stderr, the line to "
      "add to the daemon's --auth-file");
  std::string token_role, token_name;
  token_create->add_option("--role", token_role, "read|submit|admin")->required();
  token_create
      ->add_option("--name", token_name,
                   "who holds the token: 1-64 letters, digits, '.', '_', '-', '@'")
      ->required();
  CLI::App* token_hash = token->add_subcommand(
      "hash", "read a token on stdin, print its --auth-file hash (sha256:...)");

  // groups create|list|destroy
  CLI::App* groups = app.add_subcommand("groups", "resident process groups (NCCL on GPUs, Gloo)");
  groups->require_subcommand(1);
  CLI::App* groups_create =
      groups->add_subcommand("create",
                             "make a group over devices of this node, or of the cluster's nodes "
                             "(node0/cuda:0,node1/cuda:0: one group across them)");
  std::string group_devices, group_backend, group_id;
  double group_timeout = 0;
  groups_create
      ->add_option("--devices", group_devices,
                   "rank order, e.g. cuda:0,cuda:1 or cpu:0,cpu:1; in a cluster "
                   "node0/cuda:0,node1/cuda:0")
      ->required();
  groups_create->add_option("--backend", group_backend,
                            "nccl|gloo (default: nccl on cuda, gloo on cpu)");
  groups_create->add_option("--group-timeout", group_timeout,
                            "seconds after which a hung collective is aborted (default 300)");
  add_json(groups_create, "print the Group as JSON");
  CLI::App* groups_list =
      groups->add_subcommand("list", "list the groups, their state and set-up time");
  add_json(groups_list, "print the ListGroupsResponse as JSON");
  CLI::App* groups_destroy = groups->add_subcommand("destroy", "drop a group");
  groups_destroy->add_option("ID", group_id, "group id (from `groups list`)")->required();
  add_json(groups_destroy, "print the DestroyGroupResponse as JSON");

  try {
    app.parse(argc, argv);
    if (*evict && key_opt->count() + device_opt->count() + all_opt->count() == 0) {
      throw CLI::ValidationError("evict", "give a model KEY, --device D or --all");
    }
  } catch (const CLI::ParseError& e) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    // `benchctl` alone prints the help (and is a usage error); `benchctl help
    // [COMMAND...]` prints that command's.
    const std::optional<bc::UnknownCommand> unknown =
        e.get_exit_code() != 0 ? bc::FindUnknownCommand(app, args) : std::nullopt;
    const bool no_command = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !unknown &&
                            app.get_subcommands().empty();
    if (no_command || (unknown && unknown->path == "benchctl" && unknown->word == "help")) {
      const CLI::App* at = &app;
      auto word = std::find(args.begin(), args.end(), std::string("help"));
      for (word = word == args.end() ? word : word + 1; word != args.end(); ++word) {
        const CLI::App* sub = bc::SubcommandNamed(*at, *word);
        if (sub == nullptr) break;
        at = sub;
      }
      std::fputs(at->help().c_str(), stdout);
      for (const std::string& arg : args) {  // and a flag it does not know, by name
        const std::string flag = arg.substr(0, arg.find('='));
        if (flag.size() > 1 && flag[0] == '-' && app.get_option_no_throw(flag) == nullptr) {
          std::fprintf(stderr, "benchctl: unknown option '%s'\n", flag.c_str());
        }
      }
      return no_command ? bc::kExitUsage : bc::kExitOk;
    }
    // A command that is not one: say which word and the nearest commands.
    // Request kinds were top-level verbs once: say where every kind is.
    if (unknown) {
      const std::vector<std::string> kinds = benchd::JobKindNames();
      if (unknown->path == "benchctl" &&
          std::find(kinds.begin(), kinds.end(), unknown->word) != kinds.end()) {
        std::fprintf(stderr,
                     "benchctl: no command '%s': it is `benchctl submit %s ...` (with --watch to "
                     "follow the job and print its result)\n",
                     unknown->word.c_str(), unknown->word.c_str());
      } else {
        std::fprintf(stderr, "benchctl: %s\nRun with --help for more information.\n",
                     unknown->message.c_str());
      }
      return bc::kExitUsage;
    }
    // --help and --version exit 0; every other parse error is a usage error.
    app.exit(e);
    return e.get_exit_code() == 0 ? bc::kExitOk : bc::kExitUsage;
  }

  if (*token_create) return bc::RunTokenCreate(token_role, token_name);
  if (*token_hash) return bc::RunTokenHash(stdin);
  if (*estimate_cmd && estimate.offline)
    return bc::RunEstimate(bc::GlobalOptions(), estimate, json);

  // Every other command talks to the daemon.
  absl::StatusOr<benchd::ClientSettings> settings =
      benchd::ResolveClientSettings(creds, benchd::ProcessEnvironment());
  if (!settings.ok()) return bc::ReportError(settings.status());
  for (const std::string& warning : settings->warnings) {
    std::fprintf(stderr, "benchctl: %s\n", warning.c_str());
  }
  g.address = settings->address;
  g.security = std::move(settings->security);

  if (*benchmark) return bc::RunSubmitBenchmark(g, bench, submit_flags);
  if (*profile_cmd) return bc::RunSubmitProfile(g, profile, submit_flags, profile_out);
  if (*memory_cmd) return bc::RunSubmitMemory(g, memory, submit_flags, memory_svg_dir);
  if (*collective_cmd) return bc::RunSubmitCollective(g, coll, submit_flags, coll_svg_dir);
  if (*attention_cmd) return bc::RunSubmitAttention(g, attn, submit_flags);
  if (*precision_cmd) return bc::RunSubmitPrecision(g, prec, submit_flags);
  if (*ddp_cmd) return bc::RunSubmitDdp(g, ddp, submit_flags);
  if (*artifacts_list) return bc::RunArtifactsList(g, job_id, json);
  if (*artifacts_get) return bc::RunArtifactsGet(g, job_id, artifact_name, artifact_out);
  if (*watch_cmd) return bc::RunWatch(g, job_id, json);
  if (*get) return bc::RunGet(g, job_id, json, csv, get_pivot);
  if (*list) return bc::RunList(g, list_opts, json);
  if (*cancel) return bc::RunCancel(g, job_id, json);
  if (*models) return bc::RunModels(g, device, json);
  if (*evict) return bc::RunEvict(g, key, device, all, json);
  if (*node) return bc::RunNode(g, json);
  if (*nodes) return bc::RunNodes(g, json, nodes_wait, nodes_wait_timeout);
  if (*estimate_cmd) return bc::RunEstimate(g, estimate, json);
  if (*groups_create)
    return bc::RunGroupsCreate(g, group_devices, group_backend, group_timeout, json);
  if (*groups_list) return bc::RunGroupsList(g, json);
  if (*groups_destroy) return bc::RunGroupsDestroy(g, group_id, json);
  return bc::kExitUsage;  // unreachable: require_subcommand(1)
}
