#!/usr/bin/env python3
"""Memory by formula against measurement: every row of the committed H100
memory tables (docs/results/h100-memory.md) beside the daemon's estimate
(`benchctl estimate --json`) of the same step, as a markdown table.

  python3 bench/estimate_check.py --bin build/bin [--measured docs/results/h100-memory.md]

The daemon at $BENCHD_ADDRESS answers (Bench.Estimate needs no device time,
so a CPU daemon will do). The measured runs went through the autograd engine
(h100-memory.md says so), so every estimate is asked with --autograd.

Columns: the measured peak allocated (the allocator's history, requested
bytes), the estimate's total (its largest phase), their difference in percent
of the measurement, the estimate's peak phase, and the part of the difference
that is the resident memory (measured "resident before" against the estimate's
parameters, plus AdamW state in a train step): what the formulas leave out
(cuBLAS workspaces and the like), which the activations' terms cannot explain.

Exit status 1 when a row is off by more than --tolerance percent (10).
Standard library only (benchd_cli.py runs benchctl).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchd_cli import Benchctl  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
UNITS = {"GiB": GiB, "MiB": MiB, "KiB": 1 << 10, "B": 1}


def parse_size(text):
    """"18.01 GiB" -> bytes (as the table rounds them)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(GiB|MiB|KiB|B)\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def measured_rows(path):
    """(preset, batch, context, mode, precision, peak bytes, resident bytes) per table row."""
    rows, preset, batch = [], None, None
    with open(path) as f:
        for line in f:
            heading = re.match(r"### (\S+) \(.*\), batch (\d+)", line)
            if heading:
                preset, batch = heading.group(1), int(heading.group(2))
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if preset is None or len(cells) < 7 or not cells[0].isdigit():
                continue
            rows.append({"preset": preset, "batch": batch, "context": int(cells[0]),
                         "mode": cells[1], "precision": cells[2],
                         "peak": parse_size(cells[3]), "resident": parse_size(cells[5])})
    if not rows:
        raise SystemExit(f"{path}: no measured rows found (### PRESET (...), batch N headings "
                         "followed by | context | mode | precision | peak allocated | ... rows)")
    return rows


def size(n):
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.1f} MiB"


def term(estimate, group, name):
    for t in estimate.get(group, []):
        if t.get("name") == name:
            return int(t.get("bytes", 0))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin", help="the folder holding benchctl")
    ap.add_argument("--measured", default="docs/results/h100-memory.md")
    ap.add_argument("--tolerance", type=float, default=10.0,
                    help="largest difference allowed, in percent of the measured peak")
    args = ap.parse_args()
    cli = Benchctl(os.path.join(args.bin, "benchctl"))
    print("| model | context | mode | precision | measured peak | estimate | difference | "
          "estimate's peak phase | resident: measured - estimated |")
    print("|---|---:|---|---|---:|---:|---:|---|---:|")
    worst = 0.0
    for r in measured_rows(args.measured):
        e = cli.json("estimate", "--preset", r["preset"], "--batch-size", r["batch"],
                     "--context-length", r["context"], "--mode", r["mode"],
                     "--precision", r["precision"], "--autograd")
        total = int(e["totalBytes"])
        diff = 100.0 * (total - r["peak"]) / r["peak"]
        worst = max(worst, abs(diff))
        resident = term(e, "modelState", "parameters") + term(e, "modelState", "adamw_state")
        print(f"| {r['preset']} | {r['context']} | {r['mode']} | {r['precision']} | "
              f"{size(r['peak'])} | {size(total)} | {diff:+.1f}% | {e['peakPhase']} | "
              f"{(r['resident'] - resident) / MiB:+.0f} MiB |")
    print(f"\nLargest difference: {worst:.1f}% (tolerance {args.tolerance:g}%)")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
