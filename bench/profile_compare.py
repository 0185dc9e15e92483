#!/usr/bin/env python3
"""benchd's profile request against torch.profiler on the Python reference, side by side.

For each preset x mode x precision, in one process on one GPU:
  1. the reference (bench/reference/cs336_lm.py, PyTorch eager) warms up, then
     runs its profiled steps under torch.profiler (CPU + CUDA) with the phases
     as record_function ranges; its kernel time per step (all kernels, and the
     kernels under "forward") is read from the profiler's own events;
  2. the same step through a running benchd: `benchctl submit profile`, whose result
     holds the kernel tables per named range and an unprofiled run of the same
     step timed with CUDA events.
Then prints, as markdown:
  - checks: the top forward kernel and whether it is a GEMM; benchd's forward
    kernel total against the forward time its CUDA events measure (unprofiled);
    benchd's kernel totals against the reference profiler's; profiled vs
    unprofiled step time;
  - the GPU's idle share of each range (wall - kernels, over wall);
  - the GEMM share of kernel time, forward-only against a full train step;
  - attention: softmax against the two matmuls, time and FLOPs.
The verdicts on the jobs it saves with --out (every top forward kernel a GEMM;
xl fp32's forward kernels within 10% of its CUDA events) are pytest's:
tests/gpu/test_profile.py with BENCHD_GPU_TEST_PROFILES=DIR (scripts/gpu-profile.sh).

  bench/profile_compare.py --benchctl build/bin/benchctl --out gpu-out/profile
"""
import argparse
import gc
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError
from compare import DTYPES, PRESETS
from reference import cs336_lm as ref

PARTS = ["attention.scores", "attention.mask", "attention.softmax", "attention.weighted_sum"]


def short(name, width=60):
    out, depth = "", 0
    for c in name:
        if c == "<":
            if depth == 0:
                out += "<...>"
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out += c
    out = out.split("(")[0]
    return out if len(out) <= width else out[: width - 3] + "..."


RANGES = {"forward", "backward", "optimizer_step"}


def kernels_of(evt):
    """(name, us) of the kernels an event launched itself. The profiler also
    hangs the ranges' spans on the device (gpu_user_annotation) from them:
    those are not kernels."""
    return [(k.name, k.duration) for k in evt.kernels if k.name not in RANGES]


def kernels_under(evt):
    """(name, us) of every kernel launched under a FunctionEvent, through its children."""
    out = kernels_of(evt)
    for ch in evt.cpu_children:
        out += kernels_under(ch)
    return out


def reference_profile(args, preset, mode, precision):
    """Kernel time per step of the reference under torch.profiler: all kernels,
    the forward range's, and the forward's largest kernel. None when out of memory."""
    V, d, dff, L, H = PRESETS[preset]
    dev = torch.device(args.device)
    torch.manual_seed(0)
    model = opt = x = y = prof = None
    dtype = DTYPES[precision]

    def step():
        model.zero_grad(set_to_none=True)
        with record_function("forward"):
            with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = ref.cross_entropy(model(x), y)
        if mode != "forward":
            with record_function("backward"):
                loss.backward()
        if mode == "train_step":
            with record_function("optimizer_step"):
                opt.step()
        torch.cuda.synchronize()

    try:
        model = ref.TransformerLM(V, args.context_length, d, L, H, dff).to(dev)
        opt = ref.AdamW(model.parameters())
        x = torch.randint(0, V, (args.batch_size, args.context_length), device=dev)
        y = torch.randint(0, V, (args.batch_size, args.context_length), device=dev)
        for _ in range(args.warmup_steps + 1):
            step()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.profile_steps):
                step()
        events = prof.events()
        n = args.profile_steps
        # Each kernel hangs from the one operator that launched it (correlation
        # id), on whichever thread: summed over all events, each counts once.
        all_kernels_us = sum(us for e in events for _, us in kernels_of(e))
        forward = [kernels_under(e) for e in events if e.name == "forward"]
        fwd_us = sum(us for ks in forward for _, us in ks)
        by_name = {}
        for ks in forward:
            for name, us in ks:
                by_name[name] = by_name.get(name, 0) + us
        top = max(by_name, key=by_name.get) if by_name else ""
        return {"step_kernels_ms": all_kernels_us / n / 1e3, "forward_kernels_ms": fwd_us / n / 1e3,
                "top_forward_kernel": top}
    except (torch.OutOfMemoryError, MemoryError):
        return None
    finally:
        model = opt = x = y = prof = None
        gc.collect()
        torch.cuda.empty_cache()


def benchd_profile(cli, args, preset, mode, precision):
    cli.evict_all()
    job = cli.run_job("profile", "--preset", preset, "--mode", mode, "--precision", precision,
                      "--batch-size", args.batch_size, "--context-length", args.context_length,
                      "--warmup-steps", args.warmup_steps, "--steps", args.steps,
                      "--profile-steps", args.profile_steps, "--device", args.device)
    text = cli.run("get", job["id"]).stdout  # the report as benchctl prints it
    cli.evict_all()
    if args.out:
        base = os.path.join(args.out, f"profile-{preset}-{mode}-{precision}")
        with open(base + ".json", "w") as f:
            json.dump(job, f)
        with open(base + ".txt", "w") as f:
            f.write(text)
    if job["state"] != SUCCEEDED:
        print(f"profile_compare: {preset} {mode} {precision}: {job.get('errorMessage')}", file=sys.stderr)
        return None
    return job["result"]["profile"]


def ranges(res):
    return {r["name"]: r for r in res.get("ranges", [])}


def pct(x):
    return f"{100 * x:.1f}%"


def ms(s):
    return f"{s * 1e3:.3f}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--presets", nargs="+", default=["small", "xl"])
    p.add_argument("--modes", nargs="+", default=["forward", "train_step"])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="benchd's unprofiled measured steps")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--out", default="", help="folder for each job's JSON and text report")
    args = p.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    torch.cuda.set_device(torch.device(args.device))
    cli = Benchctl(args.benchctl)

    rows = []
    for preset in args.presets:
        for mode in args.modes:
            for precision in args.precisions:
                rp = reference_profile(args, preset, mode, precision)
                b = benchd_profile(cli, args, preset, mode, precision)
                rows.append((preset, mode, precision, rp, b))
                print(f"profile_compare: {preset} {mode} {precision} done", file=sys.stderr, flush=True)

    print(f"# benchd's profile request against torch.profiler on the reference, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch {args.batch_size}, "
          f"context {args.context_length}, {args.profile_steps} profiled steps after "
          f"{args.warmup_steps} warm-up\n")
    print("## Checks\n")
    print("| model | mode | precision | top forward kernel (benchd) | GEMM | forward kernels ms | "
          "forward by CUDA events ms | kernels / events | reference forward kernels ms | "
          "step kernels ms benchd / reference | step ms profiled / unprofiled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for preset, mode, precision, rp, b in rows:
        if b is None:
            print(f"| {preset} | {mode} | {precision} | failed | | | | | | | |")
            continue
        rg = ranges(b)
        fwd, step = rg.get("forward", {}), rg.get("step", {})
        top = (fwd.get("kernels") or [{}])[0]
        events_fwd = b["unprofiled"].get("forward", {}).get("median", 0)
        fk = fwd.get("kernelSecondsPerStep", 0)
        ratio = f"{fk / events_fwd:.3f}" if events_fwd else "-"
        ref_fwd = f"{rp['forward_kernels_ms']:.3f}" if rp else "OOM"
        step_ratio = (f"{step.get('kernelSecondsPerStep', 0) * 1e3 / rp['step_kernels_ms']:.3f}"
                      if rp and rp["step_kernels_ms"] else "-")
        print(f"| {preset} | {mode} | {precision} | `{short(top.get('name', ''))}` | "
              f"{'yes' if top.get('gemm') else 'no'} | {ms(fk)} | {ms(events_fwd)} | {ratio} | {ref_fwd} | "
              f"{step_ratio} | {ms(b['profiledStep']['median'])} / {ms(b['unprofiledStep']['median'])} "
              f"= {b.get('profilerOverhead', 0):.3f} |")

    print("\n## The GPU's idle share of each range (wall - kernels, over wall; wall as CUDA events "
          "around the range measure it)\n")
    names = ["step", "forward", "attention", "attention.softmax", "backward", "optimizer_step"]
    print("| model | mode | precision | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for preset, mode, precision, _, b in rows:
        if b is None:
            continue
        rg = ranges(b)
        cells = [pct(rg[n].get("idleFraction", 0)) if n in rg else "-" for n in names]
        print(f"| {preset} | {mode} | {precision} | " + " | ".join(cells) + " |")

    print("\n## GEMM share of kernel time: forward-only against a full train step\n")
    print("| model | precision | forward mode: forward | train_step: step | train_step: forward | "
          "train_step: backward | train_step: optimizer_step |")
    print("|---|---|---|---|---|---|---|")
    by = {(pr, m, pc): b for pr, m, pc, _, b in rows}
    for preset in args.presets:
        for precision in args.precisions:
            f, t = by.get((preset, "forward", precision)), by.get((preset, "train_step", precision))
            fr, tr = ranges(f or {}), ranges(t or {})
            g = lambda rg, n: pct(rg[n]["gemmFraction"]) if n in rg and "gemmFraction" in rg[n] else "-"
            print(f"| {preset} | {precision} | {g(fr, 'forward')} | {g(tr, 'step')} | {g(tr, 'forward')} | "
                  f"{g(tr, 'backward')} | {g(tr, 'optimizer_step')} |")

    print("\n## Attention in the forward pass: softmax against the matmuls (per step)\n")
    print("| model | mode | precision | scores ms | mask ms | softmax ms | weighted sum ms | "
          "softmax / matmuls time | softmax / matmuls FLOPs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for preset, mode, precision, _, b in rows:
        if b is None or mode != "forward":
            continue
        rg = ranges(b)
        if not all(n in rg for n in PARTS):
            continue
        t = {n: rg[n].get("kernelSecondsPerStep", 0) for n in PARTS}
        fl = {n: rg[n].get("flopsPerStep", 0) for n in PARTS}
        mm_t = t["attention.scores"] + t["attention.weighted_sum"]
        mm_f = fl["attention.scores"] + fl["attention.weighted_sum"]
        print(f"| {preset} | {mode} | {precision} | {ms(t['attention.scores'])} | {ms(t['attention.mask'])} | "
              f"{ms(t['attention.softmax'])} | {ms(t['attention.weighted_sum'])} | "
              f"{t['attention.softmax'] / mm_t:.2f} | {fl['attention.softmax'] / mm_f:.3f} |")


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"profile_compare: {e}")
