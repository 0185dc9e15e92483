#!/usr/bin/env python3
"""Markdown peak-memory tables from memory jobs (`benchctl get JOB --json`).

One table per job: a row per run (context x mode x precision) with the peak
allocated and reserved bytes, what was resident before the recorded steps
(weights, AdamW state), the peak of each phase, one residual-stream
activation as a yardstick, and OOM rows with the figures at the failure.

  bench/memory_table.py job-12.json job-13.json > peaks.md

Standard library only (the GPU machines have no grpcio).
"""
import argparse
import json
import sys

GiB = 1 << 30
MiB = 1 << 20


def size(n):
    n = int(n or 0)
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    return f"{n / MiB:.1f} MiB"


def phase_peak(run, name):
    for p in run.get("phases", []):
        if p.get("name") == name:
            return size(p.get("peakAllocatedBytes"))
    return "-"


MODE = {"BENCHMARK_MODE_FORWARD": "forward", "BENCHMARK_MODE_FORWARD_BACKWARD": "forward_backward",
        "BENCHMARK_MODE_TRAIN_STEP": "train_step"}
PRECISION = {"PRECISION_FP32": "fp32", "PRECISION_BF16": "bf16", "PRECISION_FP16": "fp16"}


def table(job):
    r = job["result"]["memory"]
    model = r.get("spec", {}).get("step", {}).get("model", {})
    runs = r.get("runs", [])
    batch = runs[0].get("step", {}).get("batchSize", "?") if runs else "?"
    out = [f"### {model.get('preset') or 'custom'} ({int(r.get('parameterCount', 0)):,} parameters), "
           f"batch {batch}, {r.get('device', '?')} {r.get('deviceName', '')} (job {job.get('id', '?')})",
           "",
           "| context | mode | precision | peak allocated | peak reserved | resident before | "
           "forward peak | backward peak | optimizer peak | one activation | note |",
           "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for run in runs:
        step = run.get("step", {})  # the run's step as it ran: context, mode, precision, batch
        mode = MODE.get(step.get("mode"), step.get("mode"))
        precision = PRECISION.get(step.get("precision"), step.get("precision"))
        ctx = step.get("contextLength")
        act = size(run.get("activationBytes"))
        if run.get("outOfMemory"):
            if int(run.get("peakAllocatedBytes", 0)) == 0:
                cells = [size(run.get("oomAllocatedBytes")), size(run.get("oomReservedBytes")),
                         "-", "-", "-", "-"]
            else:
                cells = [size(run.get("peakAllocatedBytes")), size(run.get("peakReservedBytes")),
                         size(run.get("baselineAllocatedBytes")), phase_peak(run, "forward"),
                         phase_peak(run, "backward"), phase_peak(run, "optimizer_step")]
            note = (f"OOM: allocated {size(run.get('oomAllocatedBytes'))}, reserved "
                    f"{size(run.get('oomReservedBytes'))}, device free "
                    f"{size(run.get('oomDeviceFreeBytes'))} of {size(run.get('oomDeviceTotalBytes'))}")
        else:
            cells = [size(run.get("peakAllocatedBytes")), size(run.get("peakReservedBytes")),
                     size(run.get("baselineAllocatedBytes")), phase_peak(run, "forward"),
                     phase_peak(run, "backward"), phase_peak(run, "optimizer_step")]
            agree = run.get("allocatorPeakAllocatedBytes") == run.get("peakAllocatedBytes")
            note = "" if agree else (f"allocator's own peak {size(run.get('allocatorPeakAllocatedBytes'))}")
            if run.get("maxMemoryAllocatedBytes"):
                note = (note + "; " if note else "") + \
                    f"max_memory_allocated {size(run.get('maxMemoryAllocatedBytes'))}"
            if run.get("traceWrapped"):
                note = (note + "; " if note else "") + "history wrapped"
        out.append(f"| {ctx} | {mode} | {precision} | " + " | ".join(cells) + f" | {act} | {note} |")
    out.append("")
    for run in runs:
        big = run.get("largestAllocations", [])[:3]
        if not big:
            continue
        items = "; ".join(f"{size(a.get('sizeBytes'))} x{a.get('count')} in {a.get('phase') or 'between phases'}"
                          f" at {a.get('origin') or (a.get('frames') or ['?'])[0]}" for a in big)
        out.append(f"- {run.get('name')}: largest {items}")
    out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("jobs", nargs="+", help="JSON files written by `benchctl get JOB --json`")
    args = p.parse_args()
    for path in args.jobs:
        with open(path) as f:
            job = json.load(f)
        if "memory" not in job.get("result", {}):
            sys.exit(f"memory_table: {path} is not a finished memory job (state {job.get('state')})")
        print(table(job))


if __name__ == "__main__":
    main()
