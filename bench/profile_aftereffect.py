#!/usr/bin/env python3
"""Does a profile request slow the benchmarks that follow it on the same worker?

Against a running benchd: a benchmark, then a profile of the same step, then
the benchmark again, --profiles times over; prints each
benchmark's median step and its ratio to the first. A worker that leaves the
profiler's CUPTI attached after a trace launches every later kernel more
slowly, which shows here as ratios well above 1 for host-bound steps (the
small preset at batch 4). benchd-worker finalizes CUPTI after each trace
(TEARDOWN_CUPTI=1, docs/architecture.md "The profile request"); start benchd
with TEARDOWN_CUPTI=0 in its environment to see the other behaviour. Ends with
a CUDA-graph benchmark after the profiles, which must still succeed.

  bench/profile_aftereffect.py --benchctl build/bin/benchctl --preset small --precision bf16
"""
import argparse
import os
import statistics
import sys

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError


def run_job(cli, args, kind, *extra):
    """The finished Job of `benchctl submit benchmark` or `benchctl submit profile`."""
    flags = ["--preset", args.preset, "--mode", args.mode, "--precision", args.precision,
             "--batch-size", args.batch_size, "--context-length", args.context_length,
             "--warmup-steps", args.warmup_steps, "--steps", args.steps, *extra]
    if kind == "profile":
        flags += ["--profile-steps", "2"]
    job = cli.run_job(kind, *flags)
    if job["state"] != SUCCEEDED:
        sys.exit(f"profile_aftereffect: {kind} job {job['id']} {job['state']}: {job.get('errorMessage', '')}")
    return job


def median_ms(job):
    steps = [s["stepSeconds"] for s in job["result"]["benchmark"]["steps"] if not s.get("warmup")]
    return statistics.median(steps) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--preset", default="small")
    p.add_argument("--mode", default="train_step")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--profiles", type=int, default=2, help="profile requests, each followed by a benchmark")
    p.add_argument("--cuda-graph", action="store_true",
                   help="end with a --cuda-graph benchmark (GPU workers only)")
    args = p.parse_args()
    cli = Benchctl(args.benchctl)

    print(f"# benchmarks before and after profile requests on one worker: {args.preset} {args.mode} "
          f"{args.precision}, batch {args.batch_size} x {args.context_length}, {args.warmup_steps} warm-up + "
          f"{args.steps} measured steps; TEARDOWN_CUPTI in this environment: "
          f"{os.environ.get('TEARDOWN_CUPTI', 'unset')}\n")
    print("| # | job | median step ms | / first |")
    print("|---|---|---|---|")
    first = None
    n = 0

    def row(what, ms):
        nonlocal n
        n += 1
        print(f"| {n} | {what} | {ms:.2f} | {ms / first:.3f} |", flush=True)

    first = median_ms(run_job(cli, args, "benchmark"))
    row("benchmark", first)
    for i in range(1, args.profiles + 1):
        prof = run_job(cli, args, "profile")["result"]["profile"]
        step = next(r for r in prof["ranges"] if r["name"] == "step")
        if int(step.get("kernelCount", 0)) == 0:
            sys.exit(f"profile_aftereffect: profile {i} recorded no kernels or operators")
        row(f"profile {i}: its unprofiled run ({step['kernelCount']} kernels or operators in "
            f"{prof['spec']['profileSteps']} profiled steps)", prof["unprofiledStep"]["median"] * 1e3)
        row(f"benchmark after profile {i}", median_ms(run_job(cli, args, "benchmark")))
    if args.cuda_graph:
        row("benchmark --cuda-graph after the profiles",
            median_ms(run_job(cli, args, "benchmark", "--cuda-graph")))
        row("benchmark after the graph", median_ms(run_job(cli, args, "benchmark")))


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"profile_aftereffect: {e}")
