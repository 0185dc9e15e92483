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

The reference frees its GPU memory before benchd runs, and benchd's resident
models are evicted before each reference run, so neither crowds the other.

  bench/compare.py --benchctl build/bin/benchctl --context-length 256
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import cs336_lm as ref  # noqa: E402

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


def benchctl(args, *rest):
    r = subprocess.run([args.benchctl, "--timeout", "60", *rest], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"compare: benchctl {' '.join(rest)}: {r.stderr.strip()}")
    return r


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


def reference_steps(args, preset, mode, precision, compiled):
    """Seconds of each measured step of the reference; None when out of memory."""
    V, d, dff, L, H = PRESETS[preset]
    dev = torch.device(args.device)
    torch.manual_seed(0)
    model = opt = run = loss = x = y = None
    try:
        model = ref.TransformerLM(V, args.context_length, d, L, H, dff).to(dev)
        opt = ref.AdamW(model.parameters())
        run = torch.compile(model) if compiled else model
        x = torch.randint(0, V, (args.batch_size, args.context_length), device=dev)
        y = torch.randint(0, V, (args.batch_size, args.context_length), device=dev)
        dtype = DTYPES[precision]
        times = []
        for i in range(args.warmup_steps + args.steps):
            model.zero_grad(set_to_none=True)
            clock = StepClock(dev)
            with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                loss = ref.cross_entropy(run(x), y)
            if mode != "forward":
                loss.backward()
            if mode == "train_step":
                opt.step()
            if i >= args.warmup_steps:
                times.append(clock.stop())
            else:
                clock.stop()
        return times
    except (torch.OutOfMemoryError, MemoryError):
        return None
    finally:
        # Everything that holds the model or the graph goes before the cache is
        # emptied, or this process keeps the memory while benchd runs.
        model = opt = run = loss = x = y = None
        if compiled:
            torch._dynamo.reset()
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def benchd_steps(args, preset, mode, precision):
    benchctl(args, "evict", "--all")
    r = benchctl(args, "submit", "benchmark", "--preset", preset, "--mode", mode, "--precision", precision,
                 "--batch-size", str(args.batch_size), "--context-length", str(args.context_length),
                 "--warmup-steps", str(args.warmup_steps), "--steps", str(args.steps), "--json",
                 *args.benchd_flags.split())
    job_id = json.loads(r.stdout)["id"]
    benchctl(args, "watch", job_id, "--json")
    job = json.loads(benchctl(args, "get", job_id, "--json").stdout)
    benchctl(args, "evict", "--all")
    if job["state"] != "SUCCEEDED":
        return None, None
    res = job["result"]["benchmark"]
    return [s["stepSeconds"] for s in res["steps"] if not s.get("warmup")], res.get("roofline", {})


def fmt(times):
    if times is None:
        return "OOM"
    return f"{statistics.median(times) * 1e3:.2f} ± {statistics.stdev(times) * 1e3:.2f}"


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
    p.add_argument("--compile", nargs="*", default=[],
                   help="configs 'preset/mode/precision' to also time with the reference under torch.compile")
    args = p.parse_args()

    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    print(f"# benchd vs the Python eager reference on {name}, torch {torch.__version__}, "
          f"batch {args.batch_size}, context {args.context_length}, {args.warmup_steps} warm-up + "
          f"{args.steps} measured steps; median ± std ms; ratio = benchd / reference; "
          f"benchd flags: {args.benchd_flags or 'none (the faithful default)'}\n")
    print("| model | mode | precision | reference | benchd | ratio | reference compiled | benchd / compiled "
          "| roofline floor | benchd / floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    benchctl(args, "evict", "--all")
    for preset in args.presets:
        for mode in args.modes:
            for precision in args.precisions:
                r = reference_steps(args, preset, mode, precision, compiled=False)
                gc.collect()
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                    held = torch.cuda.memory_reserved(dev)
                    if held:
                        print(f"compare: the reference still holds {held} bytes of {dev}", file=sys.stderr)
                b, roof = benchd_steps(args, preset, mode, precision)
                floor = (roof or {}).get("floorSeconds")
                floor_cols = (f"{floor * 1e3:.2f} | {statistics.median(b) / floor:.2f}"
                              if b and floor else "- | -")
                ratio = (f"{statistics.median(b) / statistics.median(r):.3f}" if r and b else "-")
                c, cratio = "", ""
                if f"{preset}/{mode}/{precision}" in args.compile:
                    c_times = reference_steps(args, preset, mode, precision, compiled=True)
                    c_times = c_times if c_times else None
                    c = fmt(c_times)
                    cratio = f"{statistics.median(b) / statistics.median(c_times):.3f}" if b and c_times else "-"
                print(f"| {preset} | {mode} | {precision} | {fmt(r)} | {fmt(b)} | {ratio} | {c} | {cratio} "
                      f"| {floor_cols} |",
                      flush=True)


if __name__ == "__main__":
    main()
