#!/usr/bin/env python3
"""benchd against the Python eager reference, side by side on the same GPU.

For each preset x mode x precision: the reference (bench/reference/cs336_lm.py,
plain PyTorch eager, written from the same specification) runs warm-up +
measured steps in this process, timed with CUDA events around the
synchronized step exactly as benchd times its steps; then the same benchmark
runs through a running benchd (benchctl). Prints both medians and the ratio
benchd / reference (below 1.0: benchd is faster). With --compile the reference
also runs with its model under torch.compile (optimizer not compiled). The
last columns: benchd's roofline floor (its result's Roofline, from the peaks
the worker measured) and how many floors benchd's median step takes.

"reference GPU busy ms" is how long the GPU is busy in one reference step: the
union of the intervals of its kernels, memcpys and memsets under
torch.profiler, averaged over 2 steps run after the timed ones (timing
unchanged), and how many kernels a step launches.
"benchd GPU busy ms" is the same for benchd's side, from a `benchctl submit
profile` of the same step (CPU and CUDA activity) after its timed rounds: the sum of its
kernels' times per step (one stream, so the sum is the union) and its kernel
count, which says whether both sides launch the same kernels.
"bound by" reads the target "benchd at most 0.6 x the reference where the
reference is bound by its own overhead": a row is GPU-bound when that busy
time is at least 0.6 x the reference's median step, and then no program
running the same kernels can reach 0.6, so only host-bound rows are held to
it. The summary after the table counts them for small and medium; for a
host-bound row above 0.6 it gives the lowest ratio the reference's kernels
allow (their busy time over the reference's step) and benchd's step over its
own kernels' time (1.0: the GPU never waits for benchd's host).

The reference frees its GPU memory before benchd runs, and benchd's resident
models are evicted before each reference run, so neither crowds the other;
with --resident both stay on the device for all of a row's rounds instead.

  bench/compare.py --benchctl build/bin/benchctl --context-length 256
"""
import argparse
import gc
import os
import statistics
import sys
import time
import warnings

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError
from reference import cs336_lm as ref

# Kineto leaves CUPTI attached after a trace unless told to finalize it, and then
# every later kernel launch of this process costs more: measured on an H100, the
# reference's small train_step bf16 ran ~35% slower after one profile, which would
# flatter benchd in every row after the first. Finalizing brings it back.
os.environ["TEARDOWN_CUPTI"] = "1"

PRESETS = {  # name: (vocab, d_model, d_ff, layers, heads), as common/model_config.cc
    "tiny": (1000, 64, 256, 2, 4),
    "mini": (10000, 256, 1024, 4, 4),
    "small": (10000, 768, 3072, 12, 12),
    "medium": (10000, 1024, 4096, 24, 16),
    "large": (10000, 1280, 5120, 36, 20),
    "xl": (10000, 1600, 6400, 48, 25),
    "2.7B": (10000, 2560, 10240, 32, 32),
}
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
TARGET = 0.6  # benchd / reference for small and medium where the reference is host-bound
PROFILED_STEPS = 2
# Device-side events that are not GPU work: record_function ranges projected onto
# the GPU (gpu_user_annotation, filtered by is_user_annotation) and, when CUDA
# sync events are on, the waits (cuda_sync), named by kineto's sync type.
SYNC_NAMES = {"Event Sync", "Stream Sync", "Stream Wait Event", "Context Sync", "Unknown"}


class StepClock:
    """CUDA events around the step then a synchronize, as benchd's worker times
    it on a GPU; the host's monotonic clock on a CPU."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self):
        if self.cuda:
            self.end.record()
            torch.cuda.synchronize()
            return self.start.elapsed_time(self.end) / 1e3
        return time.perf_counter() - self.t0


def busy_seconds(intervals):
    """Length of the union of (start, end) intervals: overlapping and nested
    ones (kernels on several streams) count once."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def gpu_busy(step, n=PROFILED_STEPS):
    """(seconds the GPU is busy, kernels) per step, averaged over n steps under
    torch.profiler with CUDA activity only (no CPU op callbacks, so the host
    adds little); (None, None) if the profiler fails."""
    try:
        # One warm-up step inside the session: CUPTI can lose the first records
        # of a trace it has just enabled.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events")
            with profile(activities=[ProfilerActivity.CUDA],
                         schedule=schedule(wait=0, warmup=1, active=n, repeat=1)) as prof:
                for _ in range(1 + n):
                    step()  # ends in a synchronize: its kernels are done before the trace stops
                    prof.step()
        # FunctionEvents; time_range in us from the trace start.
        device = [e for e in prof.events()
                  if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
                  and e.name not in SYNC_NAMES]
        if not device:
            raise RuntimeError("the trace holds no kernels (CUPTI unavailable?)")
    except Exception as e:  # the profile is an annotation: the row stands without it
        print(f"compare: no GPU busy time: {e}", file=sys.stderr)
        return None, None
    # Each step ends in a synchronize, so no two steps' intervals overlap: the
    # union over the n steps, divided by n, is the mean of the per-step unions.
    busy = busy_seconds((e.time_range.start, e.time_range.end) for e in device) / 1e6
    kernels = sum(1 for e in device if not e.name.startswith(("Memcpy", "Memset")))
    return busy / n, kernels / n


class Reference:
    """The reference model, optimizer and batch of one row, built on the device
    (raises torch.OutOfMemoryError / MemoryError when they do not fit); steps()
    runs warm-up + measured steps on them, as often as asked; close() frees
    them and the cache, so that benchd has the device to itself."""

    def __init__(self, args, preset, mode, precision, compiled, strongest=False):
        """`strongest`: the setup a PyTorch user would pick for speed (issue 37's
        peer) instead of compare.py's: the model and the loss compiled together
        with mode="reduce-overhead" (Inductor's kernels replayed as CUDA graphs)
        and torch.optim.AdamW(fused=True) at the course's hyperparameters (its
        update differs from the course's in where eps and the decay go:
        worker/adamw_impls.cc); `compiled` is implied."""
        V, d, dff, L, H = PRESETS[preset]
        compiled = compiled or strongest
        self.dev, self.mode, self.compiled, self.strongest = torch.device(args.device), mode, compiled, strongest
        self.dtype = DTYPES[precision]
        self.model = self.opt = self.run = self.loss = self.x = self.y = self.loss_fn = None
        torch.manual_seed(0)
        try:
            self.model = ref.TransformerLM(V, args.context_length, d, L, H, dff).to(self.dev)
            if strongest:
                self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                             weight_decay=0.01, fused=self.dev.type == "cuda")
                model = self.model

                def loss_fn(x, y):
                    return ref.cross_entropy(model(x), y)

                self.loss_fn = torch.compile(loss_fn, mode="reduce-overhead")
            else:
                self.opt = ref.AdamW(self.model.parameters())
            self.run = torch.compile(self.model) if compiled and not strongest else self.model
            self.x = torch.randint(0, V, (args.batch_size, args.context_length), device=self.dev)
            self.y = torch.randint(0, V, (args.batch_size, args.context_length), device=self.dev)
        except BaseException:
            self.close()
            raise

    def step(self):
        # The loss lives on self, as before, so the last step's graph is freed at
        # the same point of the next step.
        self.model.zero_grad(set_to_none=True)
        clock = StepClock(self.dev)
        with torch.autocast(self.dev.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            if self.loss_fn:
                # reduce-overhead's graphs reuse their outputs' memory: a new step
                # starts here, after the last step's loss was used.
                torch.compiler.cudagraph_mark_step_begin()
                self.loss = self.loss_fn(self.x, self.y)
            else:
                self.loss = ref.cross_entropy(self.run(self.x), self.y)
        if self.mode != "forward":
            self.loss.backward()
        if self.mode == "train_step":
            self.opt.step()
        return clock.stop()

    def steps(self, warmup, measured):
        """Seconds of each measured step."""
        return [self.step() for _ in range(warmup + measured)][warmup:]

    def close(self):
        # Everything that holds the model or the graph goes before the cache is
        # emptied, or this process keeps the memory while benchd runs.
        self.model = self.opt = self.run = self.loss = self.x = self.y = self.loss_fn = None
        if self.compiled:
            torch._dynamo.reset()
        if self.strongest:
            # reduce-overhead's graphs keep a memory pool of their own.
            from torch._inductor import cudagraph_trees
            cudagraph_trees.reset_cudagraph_trees()
        gc.collect()
        if self.dev.type == "cuda":
            # cuBLAS keeps its workspace (32 MiB on an H100) in the caching
            # allocator until it is cleared; empty_cache alone leaves it held.
            torch._C._cuda_clearCublasWorkspaces()
            torch.cuda.empty_cache()


def reference_steps(args, preset, mode, precision, compiled, measure_busy=True):
    """(seconds of each measured step, GPU busy seconds per step, kernels per
    step) of the reference, built, run and freed; the last two None on a CPU or
    without `measure_busy`; all None when out of memory."""
    reference = None
    try:
        reference = Reference(args, preset, mode, precision, compiled)
        times = reference.steps(args.warmup_steps, args.steps)
        # Profiled after the timed steps, so the profiler never touches the timing.
        busy, kernels = (gpu_busy(reference.step) if reference.dev.type == "cuda" and measure_busy
                         else (None, None))
        return times, busy, kernels
    except (torch.OutOfMemoryError, MemoryError):
        return None, None, None
    finally:
        if reference:
            reference.close()


def benchd_steps(args, preset, mode, precision, evict=True, cli=None):
    """(seconds of each measured step, roofline) of one benchd job; (None, None)
    when it did not succeed. `evict`: no resident model before or after it.
    `cli`: the daemon's Benchctl (default: args.benchctl at $BENCHD_ADDRESS)."""
    cli = cli or Benchctl(args.benchctl)
    if evict:
        cli.evict_all()
    job = cli.run_job("benchmark", "--preset", preset, "--mode", mode, "--precision", precision,
                      "--batch-size", args.batch_size, "--context-length", args.context_length,
                      "--warmup-steps", args.warmup_steps, "--steps", args.steps, *args.benchd_flags.split())
    if evict:
        cli.evict_all()
    if job["state"] != SUCCEEDED:
        return None, None
    res = job["result"]["benchmark"]
    return [s["stepSeconds"] for s in res["steps"] if not s.get("warmup")], res.get("roofline", {})


def benchd_busy(args, preset, mode, precision, cli=None):
    """(seconds of kernels per step, kernels per step) of benchd's step, from a
    profile job on the model the rounds left resident (benchd's `step` range,
    CPU and CUDA activity on a GPU); (None, None) if the profile did not succeed.
    On a CPU worker the profile holds operator self times, not kernels: the
    caller uses it on a GPU only."""
    # The CPU side too: kernels reach the `step` range through their launches
    # (the daemon refuses cuda alone).
    activities = "cpu,cuda" if torch.device(args.device).type == "cuda" else "cpu"
    cli = cli or Benchctl(args.benchctl)
    try:
        job_id = cli.submit("profile", "--preset", preset, "--mode", mode, "--precision", precision,
                            "--batch-size", args.batch_size, "--context-length", args.context_length,
                            "--warmup-steps", "2", "--steps", "2", "--profile-steps", PROFILED_STEPS,
                            "--activities", activities, *args.benchd_flags.split())
    except BenchctlError as e:  # e.g. the daemon refused the profile (INVALID_ARGUMENT)
        print(f"compare: no benchd GPU busy time: {e.stderr.strip()}", file=sys.stderr)
        return None, None
    job = cli.wait(job_id)
    if job["state"] != SUCCEEDED:
        print(f"compare: no benchd GPU busy time: {job.get('errorMessage') or job['state']}", file=sys.stderr)
        return None, None
    res = job["result"]["profile"]
    step = next((g for g in res.get("ranges", []) if g["name"] == "step"), None)
    if step is None:
        return None, None
    return (step.get("kernelSecondsPerStep", 0.0),
            int(step.get("kernelCount", 0)) / int(res["spec"].get("profileSteps", PROFILED_STEPS)))


def alternate(args, preset, mode, precision):
    """One row's rounds: the reference, then benchd, args.rounds times, their
    measured steps pooled. Returns (reference steps, benchd steps, benchd's
    roofline, reference GPU busy seconds, kernels, benchd's GPU busy seconds,
    kernels, each round's ratio); a side's steps are None when it ran out of
    memory (the rounds stop there)."""
    dev = torch.device(args.device)
    cli = Benchctl(args.benchctl)
    r, b, roof, busy, kernels, round_ratios = [], [], None, None, None, []
    b_busy, b_kernels = None, None
    resident = None
    try:
        if args.resident:
            cli.evict_all()
            resident = Reference(args, preset, mode, precision, compiled=False)
        for i in range(args.rounds):
            if resident:
                ri = resident.steps(args.warmup_steps, args.steps)
            else:
                ri, ri_busy, ri_kernels = reference_steps(args, preset, mode, precision,
                                                          compiled=False, measure_busy=i == 0)
                if i == 0:
                    busy, kernels = ri_busy, ri_kernels
                if dev.type == "cuda":
                    held = torch.cuda.memory_reserved(dev)
                    if held:
                        print(f"compare: the reference still holds {held} bytes of {dev}", file=sys.stderr)
            bi, roof_i = benchd_steps(args, preset, mode, precision, evict=not resident, cli=cli)
            roof = roof or roof_i
            if ri is None or bi is None:
                r = r if ri else None
                b = b if bi else None
                break
            r += ri
            b += bi
            round_ratios.append(statistics.median(bi) / statistics.median(ri))
        if resident and dev.type == "cuda" and r:
            # After every timed round: the profiler never touches the timing.
            busy, kernels = gpu_busy(resident.step)
        if dev.type == "cuda" and r and b:
            if resident:  # the reference's model off the device while benchd's is profiled
                resident.close()
                resident = None
            b_busy, b_kernels = benchd_busy(args, preset, mode, precision, cli=cli)
            cli.evict_all()
    except (torch.OutOfMemoryError, MemoryError):
        r = None  # the reference's OOM (both resident: see --resident)
    finally:
        if resident:
            resident.close()
        if args.resident:
            cli.evict_all()
    return r or None, b or None, roof, busy, kernels, b_busy, b_kernels, round_ratios


def fmt(times):
    if times is None:
        return "OOM"
    return f"{statistics.median(times) * 1e3:.2f} ± {statistics.stdev(times) * 1e3:.2f}"


def fmt_ratio(ratio):
    return "-" if ratio is None else f"{ratio:.3f}"


def missed(row):
    """A host-bound row above the target, with what bounds it: the lowest
    ratio the reference's kernels allow and benchd's step over its kernels."""
    _, mode, precision, ratio, _, kernel_share, benchd_over_kernels = row
    text = f"{mode}/{precision} {fmt_ratio(ratio)}"
    notes = []
    if kernel_share is not None:
        notes.append(f"the reference's kernels alone {kernel_share:.3f} of its step")
    if benchd_over_kernels is not None:
        notes.append(f"benchd's step {benchd_over_kernels:.2f} × its kernels")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def summary(rows):
    """Lines on the target: per preset of small and medium that ran, its
    host-bound rows and which of them are above 0.6; then rows above 1.0.
    rows: (preset, mode, precision, ratio or None, "GPU" / "host" / None,
    reference GPU busy / reference step or None, benchd step / benchd GPU busy
    or None)."""
    lines = []
    for preset in ("small", "medium"):
        mine = [row for row in rows if row[0] == preset]
        if not mine:
            continue
        host = [row for row in mine if row[4] == "host"]
        met = [row for row in host if row[3] is not None and row[3] <= TARGET]
        # A host-bound row with no benchd result misses the target too.
        above = ", ".join(missed(row) for row in host if row[3] is None or row[3] > TARGET)
        unknown = sum(1 for row in mine if row[4] is None)
        lines.append(f"- {preset}: {len(host)} of {len(mine)} rows host-bound, {len(met)} of them at ratio "
                     f"≤ {TARGET}; host-bound above {TARGET}: {above or 'none'}"
                     + (f"; {unknown} rows with no bound (no GPU profile or no reference time)" if unknown else ""))
    slower = ", ".join(f"{pr}/{m}/{p} {q:.3f}" for pr, m, p, q, *_ in rows if q is not None and q > 1.0)
    lines.append(f"- ratio above 1.0 (benchd slower than the reference): {slower or 'none'}")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--presets", nargs="+", default=["small", "medium", "large", "xl", "2.7B"])
    p.add_argument("--modes", nargs="+", default=["forward", "forward_backward", "train_step"])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "fp16"])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--benchd-flags", default="",
                   help="extra `benchctl submit benchmark` flags for benchd's side, e.g. "
                        "--benchd-flags='--attention flash --optimizer foreach --cuda-graph' (the fast options)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the reference and benchd alternately this many times per row and pool "
                        "their measured steps: a host-bound step's time drifts with the machine over "
                        "minutes, and alternating exposes both sides to the same drift. The ratio "
                        "column then also shows the range of the rounds' ratios")
    p.add_argument("--resident", action="store_true",
                   help="with --rounds: keep the reference's model and benchd's resident between a row's "
                        "rounds instead of building both for each, so rounds cost little more than their "
                        "steps and alternate faster than the machine drifts. Both models are on the device "
                        "at once: only where two copies fit (small and medium), or a row reads OOM")
    p.add_argument("--compile", nargs="*", default=[],
                   help="configs 'preset/mode/precision' to also time with the reference under torch.compile")
    args = p.parse_args()

    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    print(f"# benchd vs the Python eager reference on {name}, torch {torch.__version__}, "
          f"batch {args.batch_size}, context {args.context_length}, {args.warmup_steps} warm-up + "
          f"{args.steps} measured steps × {args.rounds} alternating round(s)"
          f"{' on resident models' if args.resident else ''}; median ± std ms over "
          f"the pooled steps; ratio = benchd / reference (range of the rounds' ratios); "
          f"benchd flags: {args.benchd_flags or 'none (the faithful default)'}\n")
    print("| model | mode | precision | reference | benchd | ratio | reference GPU busy ms | benchd GPU busy ms "
          "| bound by | reference compiled | benchd / compiled | roofline floor | benchd / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    Benchctl(args.benchctl).evict_all()
    rows = []
    for preset in args.presets:
        for mode in args.modes:
            for precision in args.precisions:
                r, b, roof, busy, kernels, b_busy, b_kernels, round_ratios = alternate(
                    args, preset, mode, precision)
                floor = (roof or {}).get("floorSeconds")
                floor_cols = (f"{floor * 1e3:.2f} | {statistics.median(b) / floor:.2f}"
                              if b and floor else "- | -")
                ratio = statistics.median(b) / statistics.median(r) if r and b else None
                bound = None
                if r and busy is not None:
                    bound = "GPU" if busy >= TARGET * statistics.median(r) else "host"
                busy_col = f"{busy * 1e3:.2f} ({kernels:.0f} kernels)" if busy is not None else "-"
                b_busy_col = f"{b_busy * 1e3:.2f} ({b_kernels:.0f} kernels)" if b_busy else "-"
                kernel_share = busy / statistics.median(r) if r and busy is not None else None
                benchd_over_kernels = statistics.median(b) / b_busy if b and b_busy else None
                rows.append((preset, mode, precision, ratio, bound, kernel_share, benchd_over_kernels))
                c, cratio = "", ""
                if f"{preset}/{mode}/{precision}" in args.compile:
                    c_times, _, _ = reference_steps(args, preset, mode, precision, compiled=True)
                    c_times = c_times if c_times else None
                    c = fmt(c_times)
                    cratio = f"{statistics.median(b) / statistics.median(c_times):.3f}" if b and c_times else "-"
                ratio_col = fmt_ratio(ratio)
                if len(round_ratios) > 1:
                    ratio_col += f" ({min(round_ratios):.3f}–{max(round_ratios):.3f})"
                print(f"| {preset} | {mode} | {precision} | {fmt(r)} | {fmt(b)} | {ratio_col} | {busy_col} "
                      f"| {b_busy_col} | {bound or '-'} | {c} | {cratio} | {floor_cols} |",
                      flush=True)
    print()
    for line in summary(rows):
        print(line)


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"compare: {e}")
