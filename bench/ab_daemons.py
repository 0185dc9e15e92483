#!/usr/bin/env python3
"""Two benchd daemons, A and B, against the Python eager reference on one GPU,
alternating reference, A, B in every round: is a change to the worker's host
cost (a build, an allocator, an environment variable) worth anything, when the
machine's own drift is larger than the change?

Start the two daemons yourself, e.g. B under another allocator:

  benchd --data-dir /tmp/a --listen 127.0.0.1:0 --metrics 127.0.0.1:0 &
  LD_PRELOAD=libtcmalloc_minimal.so.4 benchd --data-dir /tmp/b --listen 127.0.0.1:0 --metrics 127.0.0.1:0 &
  bench/ab_daemons.py --a ADDRESS_A --b ADDRESS_B --rows medium/forward/bf16 --rounds 4

Each row prints every round's medians, then the pooled medians, each side's
ratio to the reference (the range of the rounds' ratios) and B / A.
"""
import argparse
import statistics
import sys

import torch

import compare
from benchd_cli import Benchctl, BenchctlError


def ms(times):
    return statistics.median(times) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="daemon A's gRPC address (host:port)")
    p.add_argument("--b", required=True, help="daemon B's gRPC address (host:port)")
    p.add_argument("--rows", nargs="+", required=True, help="preset/mode/precision, e.g. medium/forward/bf16")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    args.benchd_flags = ""
    rows = []
    for row in args.rows:
        parts = row.split("/")
        if (len(parts) != 3 or parts[0] not in compare.PRESETS or parts[2] not in compare.DTYPES
                or parts[1] not in ("forward", "forward_backward", "train_step")):
            p.error(f"--rows: expected preset/mode/precision (presets {', '.join(compare.PRESETS)}; "
                    f"modes forward, forward_backward, train_step; precisions fp32, bf16, fp16), got '{row}'")
        rows.append(parts)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)

    daemons = {address: Benchctl(args.benchctl, address=address) for address in (args.a, args.b)}

    def run_benchd(address, preset, mode, precision):
        times, _ = compare.benchd_steps(args, preset, mode, precision, cli=daemons[address])
        if times is None:
            sys.exit(f"ab_daemons: the benchmark on {address} did not succeed ({preset}/{mode}/{precision})")
        return times

    print(f"# reference, A ({args.a}), B ({args.b}) alternating, {args.rounds} rounds of "
          f"{args.warmup_steps} warm-up + {args.steps} measured steps; median ms")
    for preset, mode, precision in rows:
        name = f"{preset}/{mode}/{precision}"
        ref, a, b, ratio_a, ratio_b = [], [], [], [], []
        for i in range(args.rounds):
            r, _, _ = compare.reference_steps(args, preset, mode, precision, compiled=False, measure_busy=False)
            if r is None:
                sys.exit(f"ab_daemons: the reference ran out of memory ({name})")
            ta = run_benchd(args.a, preset, mode, precision)
            tb = run_benchd(args.b, preset, mode, precision)
            ref += r
            a += ta
            b += tb
            ratio_a.append(ms(ta) / ms(r))
            ratio_b.append(ms(tb) / ms(r))
            print(f"  {name} round {i + 1}: reference {ms(r):.2f}  A {ms(ta):.2f}  B {ms(tb):.2f}", flush=True)
        print(f"{name}: reference {ms(ref):.2f}  A {ms(a):.2f} ({ms(a) / ms(ref):.3f}, "
              f"{min(ratio_a):.3f}–{max(ratio_a):.3f})  B {ms(b):.2f} ({ms(b) / ms(ref):.3f}, "
              f"{min(ratio_b):.3f}–{max(ratio_b):.3f})  B / A {ms(b) / ms(a):.3f}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"ab_daemons: {e}")
