"""The CS336 pytorch_attention grid through benchd, one `benchctl submit
attention` job per cell (the generic sweep is not needed), written as one
markdown table: forward and backward ms (medians over the passes), memory
saved for the backward and peak (measured by the CUDA caching allocator),
the score matrix and the saved tensors by formula, and TFLOP/s.

A cell that runs out of memory is an OOM row with the worker's message (its
memory figures and the score matrix by formula); a cell the daemon refuses
(flash or cudnn in fp32 on CUDA) is a "refused" row with the daemon's reason,
and one whose forced SDPA backend has no kernel for it on the device a "no
kernel" row with the worker's. Exit status 1 when any cell failed otherwise.

  python3 bench/attention_grid.py --benchctl build/bin/benchctl --device cuda:0 \\
      --out gpu-out            # the course's grid: d 16..128 x seq 256..16384

Standard library only (bench/benchd_cli.py says why).
"""
import argparse
import json
import os
import sys

from benchd_cli import Benchctl, BenchctlError, SUCCEEDED

OUT_OF_MEMORY = 8  # google.rpc.Code RESOURCE_EXHAUSTED
INVALID_ARGUMENT = 3  # from the worker: a forced SDPA backend with no kernel for the cell
MiB = 1 << 20


def ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def words(text):
    return [x.strip() for x in text.split(",") if x.strip()]


def cell_flags(args, d, seq, impl, precision, batch=None):
    big = seq >= args.big_seq
    flags = ["--device", args.device, "--batch-size", str(batch or args.batch), "--head-dim", str(d),
             "--seq-len", str(seq), "--impl", impl, "--precision", precision,
             "--warmup", str(args.big_warmup if big else args.warmup),
             "--passes", str(args.big_passes if big else args.passes)]
    if args.causal:
        flags.append("--causal")
    return flags


def run_cell(cli, flags):
    """(status, job or None, message): status "ok", "OOM", "refused" (by the
    daemon at Submit), "no kernel" (the forced SDPA backend found none for the
    cell on the device) or "failed"."""
    try:
        job = cli.run_job("attention", *flags)
    except BenchctlError as e:
        if e.returncode == 2:  # INVALID_ARGUMENT: the daemon refused the cell
            return "refused", None, e.stderr.strip().removeprefix("benchctl: ")
        raise
    if job["state"] == SUCCEEDED:
        return "ok", job, ""
    status = {OUT_OF_MEMORY: "OOM", INVALID_ARGUMENT: "no kernel"}.get(job.get("errorCode"), "failed")
    return status, job, job.get("errorMessage", job["state"])


def mib(value):
    return f"{int(value) / MiB:.1f}"


def row(cell, status, job, message):
    d, seq, impl, precision, batch = cell
    first = [str(batch), str(d), str(seq), impl, precision]
    if status != "ok":
        return first + [status] + [""] * 8 + [message.replace("|", "/").replace("\n", " ")]
    r = job["result"]["attention"]
    measured = r.get("memorySource") == "cuda_caching_allocator"
    formula = int(r.get("savedByFormulaBytes", "0"))
    return first + [
        "ok", f"{r['forward']['median'] * 1e3:.3f}", f"{r['backward']['median'] * 1e3:.3f}",
        mib(r.get("savedActivationBytes", 0)) if measured else "n/a",
        mib(formula) if formula else "-",
        mib(r.get("peakPassBytes", 0)) if measured else "n/a",
        mib(r.get("scoreMatrixBytes", 0)),
        f"{r.get('forwardTflopsPerSecond', 0):.3g}", f"{r.get('backwardTflopsPerSecond', 0):.3g}",
        f"cv {r['forward'].get('cv', 0) * 100:.1f}% / {r['backward'].get('cv', 0) * 100:.1f}%, "
        f"{r['forward']['count']} passes"]


HEADER = ["batch", "d", "seq", "impl", "precision", "status", "forward ms", "backward ms",
          "saved MiB", "saved MiB (formula)", "peak MiB", "score MiB (formula)", "fwd TFLOP/s",
          "bwd TFLOP/s", "notes"]


def markdown(rows):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--address", default=None)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--out", default="gpu-out", help="folder for attention.md and attention-jobs.json")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dims", type=ints, default=ints("16,32,64,128"))
    p.add_argument("--seqs", type=ints, default=ints("256,1024,4096,8192,16384"))
    p.add_argument("--impls", type=words, default=words("faithful,flash,cudnn"))
    p.add_argument("--precisions", type=words, default=words("fp32,bf16"))
    p.add_argument("--causal", action="store_true", help="the causal mask in every cell")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--passes", type=int, default=100)
    p.add_argument("--big-seq", type=int, default=8192,
                   help="cells with seq >= this run --big-warmup/--big-passes instead")
    p.add_argument("--big-warmup", type=int, default=3)
    p.add_argument("--big-passes", type=int, default=20)
    p.add_argument("--oom-batches", type=ints, default=[],
                   help="after the grid, the faithful fp32 cell at the largest d and seq with these "
                        "batches, in order, until one runs out of memory (the first OOM cell)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per cell")
    args = p.parse_args(argv)

    cli = Benchctl(args.benchctl, address=args.address, timeout=args.timeout)
    os.makedirs(args.out, exist_ok=True)
    rows, jobs = [], []
    cells = [(d, seq, impl, precision, args.batch) for d in args.dims for seq in args.seqs
             for impl in args.impls for precision in args.precisions]
    if args.oom_batches:
        cells += [(max(args.dims), max(args.seqs), "faithful", "fp32", b) for b in args.oom_batches]
    for cell in cells:
        d, seq, impl, precision, batch = cell
        if batch != args.batch and rows and rows[-1][5] == "OOM":
            break  # the OOM probe stops at its first OOM cell
        status, job, message = run_cell(cli, cell_flags(args, d, seq, impl, precision, batch))
        rows.append(row(cell, status, job, message))
        if job is not None:
            jobs.append(job)
        print(" | ".join(rows[-1][:9]), file=sys.stderr, flush=True)
    table = markdown(rows)
    with open(os.path.join(args.out, "attention.md"), "w") as f:
        f.write(table)
    with open(os.path.join(args.out, "attention-jobs.json"), "w") as f:
        json.dump(jobs, f)
    print(table)
    bad = [r for r in rows if r[5] == "failed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
