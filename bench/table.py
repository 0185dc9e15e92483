#!/usr/bin/env python3
"""The CS336 benchmark table through a running benchd, driven by benchctl.

Runs every preset x context x mode x precision as benchd jobs (resident
models are evicted before each preset/precision/context row, so no row runs
out of memory because of another's model or optimizer state; within a row the
modes run forward, forward_backward, train_step on one model), then writes a Markdown
table and the raw jobs as JSON. Out of memory is a row, not a failed run.

  bench/table.py --benchctl build/bin/benchctl --out docs/results/h100.md

Needs only the Python standard library (the GPU machines have no grpcio).
"""
import argparse
import datetime
import json
import os
import sys
import time

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError

PRESETS = ["small", "medium", "large", "xl", "2.7B"]
CONTEXTS = [128, 256, 512, 1024]
MODES = ["forward", "forward_backward", "train_step"]
PRECISIONS = ["fp32", "bf16", "fp16"]
MODE_ENUM = {"forward": "BENCHMARK_MODE_FORWARD", "forward_backward": "BENCHMARK_MODE_FORWARD_BACKWARD",
             "train_step": "BENCHMARK_MODE_TRAIN_STEP"}


def run_group(cli, args, preset, precision):
    """Runs one preset/precision's jobs, context by context, and returns their
    Jobs. Resident models are evicted before each context, so every row starts
    from a fresh model without optimizer state: an OOM is the row's own."""
    jobs = []
    for ctx in args.contexts:
        cli.evict_all()
        ids = [cli.submit("benchmark", "--preset", preset, "--precision", precision, "--mode", mode,
                          "--batch-size", args.batch_size, "--context-length", ctx,
                          "--warmup-steps", args.warmup_steps, "--steps", args.steps,
                          *args.benchd_flags.split())
               for mode in args.modes]
        jobs += [cli.wait(job_id) for job_id in ids]
    return jobs


def cell(job):
    state = job.get("state")
    if state == SUCCEEDED:
        s = job["result"]["benchmark"]["step"]
        return f"{s['median'] * 1e3:.2f} ± {s['std'] * 1e3:.2f}"
    if job.get("errorCode") == 8:
        return "OOM"
    return state.removeprefix("JOB_STATE_").lower()


def key(job):
    b = job["spec"]["benchmark"]
    return (b["model"]["preset"], int(b["contextLength"]), b["mode"], b["precision"])


def engine_text(jobs):
    """Which engine ran the steps, as the results say (BenchmarkResult.spec.autograd):
    benchd's explicit forward and backward, or LibTorch's autograd engine."""
    ran = {j["result"]["benchmark"]["spec"].get("autograd", False) for j in jobs if j.get("state") == SUCCEEDED}
    if not ran:
        return ""
    if ran == {False}:
        return ", explicit backward (benchd's own; `--autograd` for the engine)"
    if ran == {True}:
        return ", through LibTorch's autograd engine"
    return ", explicit backward in some jobs and the autograd engine in others (see each job's result)"


def markdown(args, jobs, node):
    by = {key(j): j for j in jobs}
    lines = []
    device = next((d for d in node.get("devices", []) if d.get("name") == args.device), {})
    v = node.get("versions", {})
    lines.append(f"# CS336 LM benchmarks on {device.get('description', args.device)}\n")
    lines.append(f"Measured {datetime.date.today()} with benchd {v.get('benchd')}, torch {v.get('torch')}, "
                 f"CUDA {v.get('cudaRuntime')} (driver {v.get('cudaDriver')}), cuDNN {v.get('cudnn')}. "
                 f"Batch {args.batch_size}, {args.warmup_steps} warm-up and {args.steps} measured steps, "
                 f"faithful path (no fused kernels, no TF32){'; flags ' + args.benchd_flags if args.benchd_flags else ''}"
                 f"{engine_text(jobs)}; step time = CUDA events around the "
                 f"synchronized step, median ± sample std over the measured steps, in ms. "
                 f"OOM = out of memory on this device.\n")
    lines.append(f"Regenerate: `{args.regenerate}`" if args.regenerate else
                 "Regenerate: `" + " ".join(["bench/table.py"] + sys.argv[1:]) + "` against a running benchd.")
    lines[-1] += "\n"
    # Timing truth: the device time from CUDA events against the host clock
    # around the same synchronized steps.
    gaps = []
    for j in jobs:
        if j.get("state") == SUCCEEDED:
            b = j["result"]["benchmark"]
            preset, ctx, mode, precision = key(j)
            where = f"{preset} {mode.removeprefix('BENCHMARK_MODE_').lower()} {precision.removeprefix('PRECISION_').lower()}, context {ctx}"
            gaps.append((abs(b["hostStep"]["median"] - b["step"]["median"]) / b["hostStep"]["median"], where))
    if gaps:
        worst = max(gaps)
        within = sum(1 for g, _ in gaps if g <= 0.02)
        lines.append(f"CUDA events vs host clock after synchronize (median step): {within} of {len(gaps)} "
                     f"benchmarks agree within 2%; the largest gap is {worst[0] * 100:.2f}% ({worst[1]}).\n")
    for mode in args.modes:
        lines.append(f"\n## {mode}\n")
        header = "| model | context | " + " | ".join(args.precisions) + " |"
        lines.append(header)
        lines.append("|" + "---|" * (2 + len(args.precisions)))
        for preset in args.presets:
            for ctx in args.contexts:
                row = [by.get((preset, ctx, MODE_ENUM[mode], "PRECISION_" + p.upper())) for p in args.precisions]
                lines.append(f"| {preset} | {ctx} | " + " | ".join(cell(j) if j else "-" for j in row) + " |")
    def train_step_section(title, text):
        """A preset x context table of the train_step rows: text(benchmark result)
        where the job succeeded, its cell (OOM, failed) where not."""
        lines.append(f"\n## {title}\n")
        lines.append("| model | context | " + " | ".join(args.precisions) + " |")
        lines.append("|" + "---|" * (2 + len(args.precisions)))
        for preset in args.presets:
            for ctx in args.contexts:
                cells = []
                for p in args.precisions:
                    j = by.get((preset, ctx, "BENCHMARK_MODE_TRAIN_STEP", "PRECISION_" + p.upper()))
                    if j and j.get("state") == SUCCEEDED:
                        cells.append(text(j["result"]["benchmark"]))
                    else:
                        cells.append(cell(j) if j else "-")
                lines.append(f"| {preset} | {ctx} | " + " | ".join(cells) + " |")

    if "train_step" in args.modes:
        train_step_section("train_step phases (median ms: forward / backward / optimizer)",
                           lambda b: " / ".join(f"{b[k]['median'] * 1e3:.2f}"
                                                for k in ("forward", "backward", "optimizer")))
        train_step_section("Throughput (train_step, tokens/s and achieved TFLOP/s, peak memory GiB)",
                           lambda b: f"{b['tokensPerSecond']:,.0f} tok/s, {b['tflopsPerSecond']:.1f} TF/s, "
                                     f"{int(b['peakMemoryBytes']) / 2**30:.1f} GiB")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--presets", nargs="+", default=PRESETS)
    p.add_argument("--contexts", nargs="+", type=int, default=CONTEXTS)
    p.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    p.add_argument("--precisions", nargs="+", default=PRECISIONS, choices=PRECISIONS)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--benchd-flags", default="",
                   help="more `benchctl submit benchmark` flags for every job, e.g. --benchd-flags=--autograd "
                        "(with '=': a value that starts with -- is taken for a flag otherwise)")
    p.add_argument("--regenerate", default="",
                   help="the command to name under 'Regenerate:' (default: this command line)")
    p.add_argument("--out", help="Markdown file to write")
    p.add_argument("--json", help="file for the raw jobs")
    args = p.parse_args()
    cli = Benchctl(args.benchctl)

    # The worker reports the device and library versions once it is up.
    for _ in range(600):
        node = cli.node()
        if any(d.get("name") == args.device and d.get("workerState") == "WORKER_STATE_UP"
               for d in node.get("devices", [])):
            break
        time.sleep(0.5)
    else:
        sys.exit(f"table: the worker for {args.device} did not come up")
    jobs = []
    for preset in args.presets:
        for precision in args.precisions:
            group = run_group(cli, args, preset, precision)
            jobs += group
            print(f"table: {preset} {precision}: " + ", ".join(cell(j) for j in group), flush=True)
            write(args, jobs, node)  # after every group: a cut-off run keeps what it measured
    cli.evict_all()
    print(write(args, jobs, node))


def write(args, jobs, node):
    text = markdown(args, jobs, node)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(jobs, f)
    return text


if __name__ == "__main__":
    try:
        main()
    except BenchctlError as e:
        sys.exit(f"table: {e}")
