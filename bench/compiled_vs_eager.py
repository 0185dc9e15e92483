#!/usr/bin/env python3
"""Compiled against eager, the CS336 torch_compile sections, on one GPU in one
command: the Python reference eager and under torch.compile next to benchd's
faithful and fast paths, for the course's attention and for the whole model.
benchd's worker is C++ and runs no Python compiler, so its "fast" columns are
what it has instead (fused SDPA kernels; for the model its speed options).

Attention (the course's scores, mask, softmax and weighted sum; inputs of
(batch, seq, d) in the precision's dtype, as benchd's attention request makes
them): per pass a forward, then a backward of the output against a fixed
gradient, each timed with CUDA events (a host clock after a synchronize on a
CPU) after warm-up passes, exactly as benchd's worker times them
(worker/attention_run.cc). Columns: eager, compiled (torch.compile of the same
function), benchd faithful (the same ops, issued from C++) and benchd's fused
kernel (flash in bf16/fp16, SDPA's own pick in fp32), forward and backward ms
(medians) and the ratios.

Model: bench/compare.py's Reference (the same reference model and step, timed
the same way), eager and with the model under torch.compile (the optimizer
eager, as compare.py does), against benchd's faithful step and its step with
the speed options (--benchd-fast flags). Ratios: compiled / eager, benchd
faithful / eager, benchd fast / compiled.

  python3 bench/compiled_vs_eager.py --benchctl build/bin/benchctl --device cuda:0 \\
      --out gpu-out/compiled-vs-eager.md
"""
import argparse
import gc
import statistics
import sys
import time

import torch

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError
from compare import Reference
from reference import cs336_lm as ref

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FAST_MODEL_FLAGS = {  # benchd's speed options per precision (README, "Using it")
    "fp32": "--attention sdpa --optimizer fused --tf32 --cuda-graph",
    "bf16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops",
    "fp16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops",
}


def words(text):
    return [x.strip() for x in text.split(",") if x.strip()]


def ints(text):
    return [int(x) for x in words(text)]


def median_ms(values):
    return statistics.median(values) * 1e3 if values else None


def fmt_ms(value):
    return "-" if value is None else f"{value:.3f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


class PassClock:
    """Three CUDA events per pass (start, after forward, after backward), read
    after a synchronize; the host clock after synchronizing on a CPU."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def seconds(self, a, b):
        if self.cuda:
            return a.elapsed_time(b) / 1e3
        return b - a


def attention_passes(fn, dev, batch, seq, d, dtype, causal, warmup, passes, seed=0):
    """(forward seconds, backward seconds) per measured pass of fn(q, k, v,
    mask); (None, None) when it runs out of memory."""
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    try:
        for name in ("q", "k", "v", "grad"):
            tensors[name] = torch.randn(batch, seq, d, generator=gen).to(dev, dtype)
        q, k, v = (tensors[n].requires_grad_(True) for n in ("q", "k", "v"))
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=dev)) if causal else None
        clock = PassClock(dev)
        forward, backward = [], []
        for i in range(warmup + passes):
            for t in (q, k, v):
                t.grad = None
            if dev.type == "cuda":
                torch.cuda.synchronize()
            start = clock.mark()
            out = fn(q, k, v, mask)
            mid = clock.mark()
            out.backward(tensors["grad"])
            end = clock.mark()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i >= warmup:
                forward.append(clock.seconds(start, mid))
                backward.append(clock.seconds(mid, end))
            del out
        return forward, backward
    except (torch.OutOfMemoryError, MemoryError):
        return None, None
    finally:
        tensors.clear()
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def benchd_attention(cli, args, d, seq, impl, precision):
    """(forward ms, backward ms) medians of a benchd attention job, or a
    status word ("OOM", "refused", the error) as both when it did not run."""
    flags = ["--device", args.device, "--batch-size", args.batch_size, "--head-dim", d, "--seq-len",
             seq, "--impl", impl, "--precision", precision, "--warmup", args.warmup,
             "--passes", args.passes]
    if args.causal:
        flags.append("--causal")
    try:
        job = cli.run_job("attention", *flags)
    except BenchctlError as e:
        return "refused", e.stderr.strip()
    if job["state"] != SUCCEEDED:
        word = "OOM" if job.get("errorCode") == 8 else "failed"
        return word, job.get("errorMessage", job["state"])
    r = job["result"]["attention"]
    return r["forward"]["median"] * 1e3, r["backward"]["median"] * 1e3


def attention_table(args, cli):
    dev = torch.device(args.device)
    compiled = torch.compile(ref.scaled_dot_product_attention, backend=args.compile_backend)
    header = ("| d | seq | precision | eager fwd | compiled fwd | benchd faithful fwd | benchd fused fwd "
              "| eager bwd | compiled bwd | benchd faithful bwd | benchd fused bwd "
              "| compiled/eager fwd | compiled/eager bwd | benchd faithful/eager fwd+bwd "
              "| benchd fused/compiled fwd+bwd |")
    lines = ["## Attention (ms, medians; fused = flash in bf16/fp16, SDPA's pick in fp32)", "",
             f"batch {args.batch_size}, {'causal' if args.causal else 'no mask'}, "
             f"{args.warmup} warm-up + {args.passes} measured passes", "", header,
             "|" + "---|" * (header.count("|") - 1)]
    for precision in words(args.precisions):
        dtype = DTYPES[precision]
        for d in ints(args.head_dims):
            for seq in ints(args.seqs):
                cells = {}
                for name, fn in (("eager", ref.scaled_dot_product_attention), ("compiled", compiled)):
                    fwd, bwd = attention_passes(fn, dev, args.batch_size, seq, d, dtype, args.causal,
                                                args.warmup, args.passes)
                    cells[name] = (median_ms(fwd), median_ms(bwd)) if fwd else ("OOM", "OOM")
                if args.benchctl:
                    cli.evict_all()
                    cells["faithful"] = benchd_attention(cli, args, d, seq, "faithful", precision)
                    fused = "sdpa" if precision == "fp32" else "flash"
                    cells["fused"] = benchd_attention(cli, args, d, seq, fused, precision)
                else:
                    cells["faithful"] = cells["fused"] = (None, None)

                def val(name, i):
                    v = cells[name][i]
                    return v if isinstance(v, float) else None

                def total(name):
                    f, b = val(name, 0), val(name, 1)
                    return None if f is None or b is None else f + b

                def show(name, i):
                    v = cells[name][i]
                    return fmt_ms(v) if not isinstance(v, str) else v

                lines.append(
                    f"| {d} | {seq} | {precision} | {show('eager', 0)} | {show('compiled', 0)} "
                    f"| {show('faithful', 0)} | {show('fused', 0)} | {show('eager', 1)} "
                    f"| {show('compiled', 1)} | {show('faithful', 1)} | {show('fused', 1)} "
                    f"| {ratio(val('compiled', 0), val('eager', 0))} "
                    f"| {ratio(val('compiled', 1), val('eager', 1))} "
                    f"| {ratio(total('faithful'), total('eager'))} "
                    f"| {ratio(total('fused'), total('compiled'))} |")
                print(lines[-1], flush=True)
                for name in ("faithful", "fused"):
                    if isinstance(cells[name][0], str) and cells[name][0] != "OOM":
                        print(f"compiled_vs_eager: benchd {name} d={d} seq={seq} {precision}: "
                              f"{cells[name][1]}", file=sys.stderr)
    torch._dynamo.reset()
    return lines


def benchd_model(cli, args, preset, mode, precision, extra):
    cli.evict_all()
    job = cli.run_job("benchmark", "--device", args.device, "--preset", preset, "--mode", mode,
                      "--precision", precision, "--batch-size", args.model_batch_size,
                      "--context-length", args.context_length, "--warmup-steps", args.warmup_steps,
                      "--steps", args.steps, *extra.split())
    cli.evict_all()
    if job["state"] != SUCCEEDED:
        print(f"compiled_vs_eager: benchd {preset} {mode} {precision} {extra}: "
              f"{job.get('errorMessage', job['state'])}", file=sys.stderr)
        return None
    return median_ms([s["stepSeconds"] for s in job["result"]["benchmark"]["steps"]
                      if not s.get("warmup")])


def reference_model(args, preset, mode, precision, compiled):
    """Median ms of the reference step, eager or compiled; None when out of memory."""
    ns = argparse.Namespace(device=args.device, context_length=args.context_length,
                            batch_size=args.model_batch_size)
    r = None
    try:
        r = Reference(ns, preset, mode, precision, compiled)
        return median_ms(r.steps(args.warmup_steps, args.steps))
    except (torch.OutOfMemoryError, MemoryError):
        return None
    finally:
        if r:
            r.close()


def model_table(args, cli):
    header = ("| preset | mode | precision | eager | compiled | benchd faithful | benchd fast "
              "| compiled/eager | benchd faithful/eager | benchd fast/compiled |")
    lines = ["## Whole model (ms per step, medians)", "",
             f"batch {args.model_batch_size}, context {args.context_length}, {args.warmup_steps} "
             f"warm-up + {args.steps} measured steps; benchd fast = {FAST_MODEL_FLAGS}", "", header,
             "|" + "---|" * (header.count("|") - 1)]
    for preset in words(args.presets):
        for mode in words(args.modes):
            for precision in words(args.model_precisions):
                eager = reference_model(args, preset, mode, precision, compiled=False)
                comp = reference_model(args, preset, mode, precision, compiled=True)
                faithful = benchd_model(cli, args, preset, mode, precision, "") if cli else None
                fast_flags = FAST_MODEL_FLAGS[precision]
                if mode != "train_step":  # no optimizer to choose outside a train step
                    fast_flags = fast_flags.replace("--optimizer fused", "")
                fast = benchd_model(cli, args, preset, mode, precision, fast_flags) if cli else None
                lines.append(f"| {preset} | {mode} | {precision} | {fmt_ms(eager)} | {fmt_ms(comp)} "
                             f"| {fmt_ms(faithful)} | {fmt_ms(fast)} | {ratio(comp, eager)} "
                             f"| {ratio(faithful, eager)} | {ratio(fast, comp)} |")
                print(lines[-1], flush=True)
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", help="benchctl of a running daemon ($BENCHD_ADDRESS); none: Python only")
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu:0")
    p.add_argument("--out", help="also write the tables (markdown) here")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--head-dims", default="64")
    p.add_argument("--seqs", default="1024,4096")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--passes", type=int, default=100)
    p.add_argument("--presets", default="small")
    p.add_argument("--modes", default="forward,train_step")
    p.add_argument("--model-precisions", default="fp32,bf16")
    p.add_argument("--model-batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend for the attention (eager: a quick check of the plumbing)")
    p.add_argument("--skip", choices=["attention", "model"], action="append", default=[])
    args = p.parse_args()
    cli = Benchctl(args.benchctl) if args.benchctl else None
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "CPU"
    lines = [f"# Compiled vs eager on {name} (torch {torch.__version__})", ""]
    if "attention" not in args.skip:
        lines += attention_table(args, cli) + [""]
    if "model" not in args.skip:
        lines += model_table(args, cli) + [""]
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
