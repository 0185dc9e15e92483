#!/usr/bin/env python3
"""What 0, 1, 2 and 5 warm-up steps do to the measured mean and spread, through
a running benchd (the CS336 benchmarking_script question (c)).

For each preset and warm-up count: evict resident models (so the model is
built anew and its first steps are cold again), run warm-up + 10 measured
steps, and print mean, std, cv and max of the measured steps, plus every step.
The worker's process, CUDA context and cuBLAS handles stay warm between jobs:
only the first job of a fresh worker sees those one-time costs, and this
script runs a throw-away job first so that every row compares like with like.

  bench/warmup.py --benchctl build/bin/benchctl --presets small xl --precision bf16
"""
import argparse
import sys

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError


def run(cli, args, preset, warmup):
    cli.evict_all()
    return cli.run_job("benchmark", "--preset", preset, "--mode", args.mode, "--precision", args.precision,
                       "--batch-size", args.batch_size, "--context-length", args.context_length,
                       "--warmup-steps", warmup, "--steps", args.steps)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--presets", nargs="+", default=["small"])
    p.add_argument("--warmups", nargs="+", type=int, default=[0, 1, 2, 5])
    p.add_argument("--mode", default="train_step")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    cli = Benchctl(args.benchctl)

    run(cli, args, "tiny", 0)  # warms the worker process itself, not any model
    print(f"| model | warm-up | mean ms | std ms | cv | max ms | measured steps (ms) |")
    print(f"|---|---|---|---|---|---|---|")
    for preset in args.presets:
        for w in args.warmups:
            job = run(cli, args, preset, w)
            if job["state"] != SUCCEEDED:
                print(f"| {preset} | {w} | {job['state']}: {job.get('errorMessage', '')[:80]} |||||")
                continue
            b = job["result"]["benchmark"]
            s = b["step"]
            steps = " ".join(f"{t['stepSeconds'] * 1e3:.1f}" for t in b["steps"] if not t.get("warmup"))
            print(f"| {preset} | {w} | {s['mean'] * 1e3:.2f} | {s['std'] * 1e3:.2f} | {s['cv'] * 100:.1f}% "
                  f"| {s['max'] * 1e3:.2f} | {steps} |", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"warmup: {e}")
