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
import json
import os
import re
import statistics
import sys
import time

import torch

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError
from compare import PRESETS, Reference
from reference import cs336_lm as ref

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# benchd's speed options per precision (README, "Using it"). --optimizer-overlap
# (AdamW beside the backward, inside the graph) was faster than without it in
# every cell measured (small, xl, 2.7B at 256 and 1024, H100, three calls:
# docs/results/fast-path-h100.md, last section): 2-2.5% at 256 for xl and
# 2.7B, 6% for small, 0.1-1% at 1024. fp32 has no weight copies, which the
# overlap needs inside a graph.
FAST_MODEL_FLAGS = {
    "fp32": "--attention sdpa --optimizer fused --tf32 --cuda-graph",
    "bf16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops --optimizer-overlap",
    "fp16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops --optimizer-overlap",
}
# The half-precision attention that gave the fastest whole train step, by head
# dim, where it was measured (docs/results/fast-path-h100.md, H100, 2026-11-27):
# at head dim 64 (small to xl, contexts 256-1024) cuDNN through SDPA was the
# fastest in all 12 cells: 0.6-3.8% ahead of SDPA's flash and 0.1-1.1% ahead of
# benchd's own fused kernel, which beat flash in 10 (the other two within 0.1%).
# At head dim 80 (2.7B, which fused refuses) cuDNN was ahead of flash by 0.7%,
# 1.9% and 3.0% at contexts 256, 512 and 1024 (same H100, the next session).
# With the kernel's new default backward (variant 40, 3.89 ms on the leaderboard
# case) cuDNN stayed ahead at head dim 64 in all 12 cells, by 0.9-1.9% (same H100
# kind, session 8: docs/results/fast-path-h100/attention-choice-session8.md).
# Other head dims keep flash.
FAST_ATTENTION_BY_HEAD_DIM = {64: "cudnn", 80: "cudnn"}


def fast_model_flags(precision, preset, by_head_dim=None):
    """FAST_MODEL_FLAGS[precision] with the attention measured fastest for the
    preset's head dim (bf16/fp16; fp32 keeps SDPA's own pick). by_head_dim: a
    run's own FAST_ATTENTION_BY_HEAD_DIM (a --json record's, keys as strings)."""
    flags = FAST_MODEL_FLAGS[precision]
    if precision == "fp32" or preset not in PRESETS:
        return flags
    _, d_model, _, _, heads = PRESETS[preset]
    table = {int(k): v for k, v in (by_head_dim or FAST_ATTENTION_BY_HEAD_DIM).items()}
    attention = table.get(d_model // heads)
    return attention_variant(flags, attention) if attention else flags


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
             f"warm-up + {args.steps} measured steps; benchd fast = {FAST_MODEL_FLAGS}, with the attention "
             f"by head dim {FAST_ATTENTION_BY_HEAD_DIM} in half precision", "", header,
             "|" + "---|" * (header.count("|") - 1)]
    for preset in words(args.presets):
        for mode in words(args.modes):
            for precision in words(args.model_precisions):
                eager = reference_model(args, preset, mode, precision, compiled=False)
                comp = reference_model(args, preset, mode, precision, compiled=True)
                faithful = benchd_model(cli, args, preset, mode, precision, "") if cli else None
                fast_flags = fast_model_flags(precision, preset)
                if mode != "train_step":  # no optimizer to choose outside a train step
                    fast_flags = fast_flags.replace("--optimizer fused", "")
                fast = benchd_model(cli, args, preset, mode, precision, fast_flags) if cli else None
                lines.append(f"| {preset} | {mode} | {precision} | {fmt_ms(eager)} | {fmt_ms(comp)} "
                             f"| {fmt_ms(faithful)} | {fmt_ms(fast)} | {ratio(comp, eager)} "
                             f"| {ratio(faithful, eager)} | {ratio(fast, comp)} |")
                print(lines[-1], flush=True)
    return lines

# ---- The fast path against the strongest PyTorch setup (issue 37) -----------


def attention_variant(flags, attention):
    """`flags` with its --attention replaced by `attention`."""
    return re.sub(r"--attention \S+", f"--attention {attention}", flags)


def fast_variants(text):
    """'name=flags;name=flags' -> [(name, flags, presets)]. FLAGS '@best' is
    each preset's fast flags (fast_model_flags: the attention measured fastest
    for its head dim), '@ATTN' the fast flags with ATTN as the attention (no
    spaces, so the list survives gpu-fastpath.sh's word splitting), either
    followed by ',--flag,...' to add flags (e.g. '@best,--optimizer-overlap'); a NAME of
    'name@p1+p2' runs for those presets alone (presets None: every preset).
    '' -> the fast flags with each of flash, cudnn and fused (benchd's own
    kernel) as the attention."""
    if not text:
        return [(a, "@" + a, None) for a in ("flash", "cudnn", "fused")]
    out = []
    for part in text.split(";"):
        name, sep, flags = part.partition("=")
        name, _, only = name.strip().partition("@")
        if not sep or not name or not flags.strip():
            raise SystemExit(f"--fast-variants: '{part}' is not name[@preset+preset]=flags (e.g. "
                             f"'best=@best;cudnn@2.7B=@cudnn' or 'flash=--attention flash --cuda-graph')")
        out.append((name, flags.strip(), set(words(only.replace("+", ","))) or None))
    return out


def variant_flags(args, flags, preset, by_head_dim=None):
    """A variant's FLAGS for `preset`, with '@best' and '@ATTN' spelled out
    (by_head_dim: as fast_model_flags takes it); '@best,--flag,...' adds flags
    to those (commas, no spaces: '@best,--optimizer-overlap')."""
    if flags.startswith("@"):
        base, *extra = flags.split(",")
        if base == "@best":
            out = fast_model_flags(args.fast_precision, preset, by_head_dim)
        else:
            out = attention_variant(FAST_MODEL_FLAGS[args.fast_precision], base[1:])
        return " ".join([out, *extra])
    return flags


def seconds_left(args):
    """Seconds before --deadline (an epoch time; inf without one)."""
    return args.deadline - time.time() if args.deadline else float("inf")


def benchd_fast_job(cli, args, preset, context, flags):
    """One benchd train step job (bf16 unless --fast-precision): a dict of the
    median and spread (ms), TFLOP/s and the roofline, or a dict with 'error'."""
    try:
        job = cli.run_job("benchmark", "--device", args.device, "--preset", preset, "--mode", "train_step",
                          "--precision", args.fast_precision, "--batch-size", args.model_batch_size,
                          "--context-length", context, "--warmup-steps", args.warmup_steps,
                          "--steps", args.fast_steps, *flags.split())
    except BenchctlError as e:  # refused before it ran (e.g. a head dim the fused kernels lack)
        print(f"compiled_vs_eager: benchd {preset} ctx {context} {flags}: {e.stderr.strip()}", file=sys.stderr)
        return {"error": "refused", "message": e.stderr.strip()}
    if job["state"] != SUCCEEDED:
        msg = job.get("errorMessage", job["state"])
        print(f"compiled_vs_eager: benchd {preset} ctx {context} {flags}: {msg}", file=sys.stderr)
        return {"error": "OOM" if job.get("errorCode") == 8 else "failed", "message": msg}
    r = job["result"]["benchmark"]
    steps = [x["stepSeconds"] * 1e3 for x in r["steps"] if not x.get("warmup")]
    roof = r.get("roofline", {})
    return {"median": statistics.median(steps), "min": min(steps), "max": max(steps),
            "tflops": r.get("tflopsPerSecond"), "flops": r.get("flopsPerStep"),
            "floor": roof.get("floorSeconds", 0) * 1e3 or None,
            "matmul_floor": roof.get("matmulSeconds", 0) * 1e3 or None,
            "optimizer_floor": roof.get("optimizerSeconds", 0) * 1e3,
            "peak_tflops": roof.get("peakMatmulFlopsPerSecond", 0) / 1e12 or None,
            "bandwidth_tbs": roof.get("bandwidthBytesPerSecond", 0) / 1e12 or None}


def peer_model(args, preset, context):
    """The strongest PyTorch setup's train step (compare.Reference with
    strongest=True): {'median', 'min', 'max'} in ms, or {'error', 'message'}
    when it ran out of memory or failed (torch.compile's errors included: a
    failed peer is a cell, not the end of a call that has spent device time);
    'wall_s' either way, the compile included."""
    ns = argparse.Namespace(device=args.device, context_length=context, batch_size=args.model_batch_size)
    r = None
    t0 = time.time()
    try:
        r = Reference(ns, preset, "train_step", args.fast_precision, compiled=True, strongest=True)
        steps = [t * 1e3 for t in r.steps(args.peer_warmup_steps, args.fast_steps)]
        out = {"median": statistics.median(steps), "min": min(steps), "max": max(steps)}
    except (torch.OutOfMemoryError, MemoryError) as e:
        out = {"error": "OOM", "message": str(e)[:400]}
    except Exception as e:  # noqa: BLE001 (torch.compile wraps an OOM in its own errors)
        oom = "out of memory" in str(e).lower()
        out = {"error": "OOM" if oom else f"failed ({type(e).__name__})", "message": str(e)[:400]}
        print(f"compiled_vs_eager: peer {preset} ctx {context}: {type(e).__name__}: {str(e)[:400]}",
              file=sys.stderr)
    finally:
        if r:
            r.close()
    out["wall_s"] = round(time.time() - t0, 1)
    return out


def peer_cells(args):
    """The (preset, context) pairs the peer runs for, in the order run:
    --peer-cells 'preset:context,...' when given, else every preset of
    --peer-presets (default: all) at each context of --peer-contexts."""
    if args.peer_cells:
        out = []
        for cell in words(args.peer_cells):
            preset, sep, context = cell.rpartition(":")
            if not sep or preset not in PRESETS or not context.isdigit():
                raise SystemExit(f"--peer-cells: '{cell}' is not preset:context (e.g. 'small:256,2.7B:256')")
            out.append((preset, int(context)))
        return out
    only = words(args.peer_presets)
    contexts = set(ints(args.peer_contexts))
    return [(p, c) for p in words(args.presets) if not only or p in only
            for c in ints(args.contexts) if c in contexts]


def fast_row(record, preset, context):
    """The fast table's row of (preset, context), made (benchd not run) if absent."""
    for row in record.setdefault("fast", []):
        if row["preset"] == preset and row["context"] == context:
            return row
    row = {"preset": preset, "context": context, "peer": None, "benchd": {}}
    record["fast"].append(row)
    return row


def fast_table_lines(args, record):
    """The fast table as markdown, from record['fast'] as it stands."""
    variants = fast_variants(args.fast_variants)
    names = [n for n, _, _ in variants]
    header = ("| preset | context | peer ms | " + " | ".join(f"benchd {n} ms" for n in names)
              + " | best | floor ms (sum) | floor ms (max) | best / floor | best / max floor | best / peer "
              f"| best TFLOP/s | % of measured peak | % of {args.datasheet_tflops:g} TFLOP/s |")
    lines = ["## The fast train step against the strongest PyTorch setup and the roofline floor", "",
             f"{args.fast_precision}, batch {args.model_batch_size}, {args.warmup_steps} warm-up + "
             f"{args.fast_steps} measured steps (the peer: {args.peer_warmup_steps} warm-up, the compile "
             f"in the first); median ms (min-max). Peer: the course's model and loss under "
             f"torch.compile(mode='reduce-overhead'), torch.optim.AdamW(fused=True), bf16 autocast; its "
             f"wall seconds (compile included) in brackets. Variants: "
             + "; ".join(f"{n}{' (' + '+'.join(sorted(o)) + ')' if o else ''} = `{f}`" for n, f, o in variants)
             + (f" (@best: each preset's fast flags, the attention by head dim "
                f"{record.get('attention_by_head_dim', FAST_ATTENTION_BY_HEAD_DIM)}, else flash)"
                if any(f == "@best" for _, f, _ in variants) else "")
             + ". Floor (sum): model FLOPs at the measured bf16 matmul peak + AdamW's 28 bytes/parameter at "
             "the measured copy bandwidth; floor (max): the larger of the two (the optimizer hidden "
             "under the matmuls).", "", header, "|" + "---|" * (header.count("|") - 1)]

    def show(c):
        if c is None:
            return "-"
        return f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})" if "median" in c else c["error"]

    for row in record.get("fast", []):
        cells, peer = row["benchd"], row["peer"]
        ok = {n: c for n, c in cells.items() if "median" in c}
        best = min(ok, key=lambda n: ok[n]["median"]) if ok else None
        b = ok.get(best)
        peer_col = "-" if peer is None else show(peer) + (f" [{peer['wall_s']:.0f} s]" if "wall_s" in peer else "")
        peer_ms = peer.get("median") if isinstance(peer, dict) else None
        tail = "- | - | - | - | - | - | - | - |"
        if b:
            floor_max = max(b["matmul_floor"], b["optimizer_floor"]) if b["matmul_floor"] else None
            peak = f"{100 * b['tflops'] / b['peak_tflops']:.1f}" if b["tflops"] and b["peak_tflops"] else "-"
            sheet = f"{100 * b['tflops'] / args.datasheet_tflops:.1f}" if b["tflops"] else "-"
            tail = (f"{fmt_ms(b['floor'])} | {fmt_ms(floor_max)} | {ratio(b['median'], b['floor'])} "
                    f"| {ratio(b['median'], floor_max)} | {ratio(b['median'], peer_ms)} "
                    f"| {b['tflops'] or 0:.0f} | {peak} | {sheet} |")
        lines.append(f"| {row['preset']} | {row['context']} | {peer_col} | "
                     + " | ".join(show(cells.get(n)) for n in names) + f" | {best or '-'} | " + tail)
    if len(names) > 1:
        lines += variant_floor_lines(record, names)
    return lines


def variant_floor_lines(record, names):
    """Every variant (not the best alone) against both floors, and against the
    first variant of its row: the sum floor (matmul + optimizer, one after the
    other) and the max floor (the larger of the two: the optimizer entirely
    hidden under the matmuls, what running it beside the backward could at
    best reach)."""
    header = (f"| preset | context | variant | median ms | floor ms (sum) | floor ms (max) | × floor (sum) "
              f"| × floor (max) | / {names[0]} |")
    lines = ["", "Each variant against the two floors:", "", header, "|" + "---|" * (header.count("|") - 1)]
    for row in record.get("fast", []):
        cells = row["benchd"]
        first = cells.get(names[0], {}).get("median")
        for n in names:
            c = cells.get(n)
            if not c or "median" not in c:
                continue
            floor_max = max(c["matmul_floor"], c["optimizer_floor"]) if c.get("matmul_floor") else None
            lines.append(f"| {row['preset']} | {row['context']} | {n} | {c['median']:.2f} ({c['min']:.2f}-"
                         f"{c['max']:.2f}) | {fmt_ms(c['floor'])} | {fmt_ms(floor_max)} | "
                         f"{ratio(c['median'], c['floor'])} | {ratio(c['median'], floor_max)} | "
                         f"{ratio(c['median'], first)} |")
    return lines


def row_line(args, record, preset, context):
    return next(x for x in fast_table_lines(args, record) if x.startswith(f"| {preset} | {context} |"))


def fastpath_table(args, cli, record, flush):
    """benchd's fast step for every preset and context and variant, each row
    written (flush) as it finishes; rows past --deadline are marked, not run."""
    variants = fast_variants(args.fast_variants)
    for preset in words(args.presets):
        for context in ints(args.contexts):
            row = fast_row(record, preset, context)
            for name, flags, only in variants:
                if only and preset not in only:
                    continue
                if seconds_left(args) < args.benchd_reserve:
                    row["benchd"][name] = {"error": "not run (time)"}
                    continue
                cli.evict_all()
                row["benchd"][name] = benchd_fast_job(cli, args, preset, context,
                                                      variant_flags(args, flags, preset))
            cli.evict_all()
            print(row_line(args, record, preset, context), flush=True)
            flush()


def fastpath_peers(args, record, flush):
    """The peer at each of peer_cells in order, each written (flush) as it
    finishes; none started with less than --peer-reserve seconds left."""
    for preset, context in peer_cells(args):
        row = fast_row(record, preset, context)
        if seconds_left(args) < args.peer_reserve:
            row["peer"] = {"error": "not run (time)"}
            print(f"compiled_vs_eager: peer {preset} ctx {context}: not run, "
                  f"{seconds_left(args):.0f} s left", file=sys.stderr)
        else:
            row["peer"] = peer_model(args, preset, context)
            print(row_line(args, record, preset, context), flush=True)
        flush()


ATTENTION_KERNEL = re.compile(r"flash|fmha|cudnn|sdpa|attention|Wgmma|FwdKernel|BwdKernel|BwdPre|DqConvert"
                              r"|FwdF32|BwdKv|BwdQ", re.I)
# (label, pattern) for the kernels that are neither GEMM, attention nor
# optimizer, first match wins. Under autocast the residual stream is fp32 (the
# embedding's dtype): RMSNorm's output is cast to bf16 before each projection
# (bfloat16_copy) and the projections' input gradients back to fp32 (a casting
# direct_copy, run by the unrolled kernel); same-dtype direct_copy kernels are
# layout copies (the heads' transposes).
OTHER_KINDS = [
    ("dtype casts", r"bfloat16_copy_kernel|half_copy_kernel|unrolled_elementwise_kernel<at::native::direct_copy"),
    ("layout copies", r"direct_copy|Memcpy"),
    ("fp32 adds", r"CUDAFunctor_add<float>"),
    ("RMSNorm", r"layer_norm|GammaBeta|rms_?norm|RowwiseMoments"),
    ("RoPE", r"Rope"),
    ("SwiGLU", r"silu|sigmoid|BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
               r"at::native::binary_internal::MulFunctor"),
]


def short_kernel(name, width=110):
    """The kernel's name without 'void', its parameter list and namespaces
    (the template arguments stay: they say which elementwise op it is)."""
    out = re.sub(r"\((?:[^()<>]|<[^<>]*>)*\)$", "", name.replace("void ", "")).strip()
    out = re.sub(r"\b(?:at::native::|at::|c10::|benchd::worker::|\(anonymous namespace\)::)", "", out)
    return out if len(out) <= width else out[: width - 3] + "..."


def other_kind(name):
    for label, pattern in OTHER_KINDS:
        if re.search(pattern, name, re.I):
            return label
    return "loss, embedding, rest"


# The optimizer's kernels by name too: with --optimizer-overlap they run inside
# the backward's range, and the optimizer_step range holds none.
OPTIMIZER_KERNEL = re.compile(r"AdamWCopyKernel|fused_adamw|FusedAdam", re.I)

# Attention kernels that the worker's profiler flags as GEMMs (cuDNN's SDPA
# kernels run wgmma and say so in their names): named attention before the
# GEMM flag is read.
ATTENTION_BEFORE_GEMM = re.compile(r"sdpa|flash|fmha|attention|cudnn::fusion", re.I)


def profile_breakdown(profile, steps):
    """Seconds per step of GEMMs, attention and the rest (by kind) in the
    forward and backward, the optimizer's kernels, and the top non-GEMM kernels.
    Memsets count under 'loss, embedding, rest' whatever the GEMM flag says."""
    ranges = {r["name"]: r for r in profile.get("ranges", [])}
    out = {"gemm": 0.0, "attention": 0.0, "optimizer": 0.0, "other": {}, "top": [], "kernels": 0.0}
    opt_names = {k["name"] for k in ranges.get("optimizer_step", {}).get("kernels", [])}
    for k in ranges.get("step", {}).get("kernels", []):
        sec = k.get("totalSeconds", 0) / steps
        out["kernels"] += sec
        name = k["name"]
        gemm = k.get("gemm") and not name.startswith("Memset") and not ATTENTION_BEFORE_GEMM.search(name)
        if name in opt_names or OPTIMIZER_KERNEL.search(name):
            out["optimizer"] += sec
        elif gemm:
            out["gemm"] += sec
        elif ATTENTION_KERNEL.search(name):
            out["attention"] += sec
        else:
            kind = other_kind(name)
            out["other"][kind] = out["other"].get(kind, 0) + sec
        if not gemm:
            out["top"].append((sec, int(k.get("instances", 0)) // steps, name))
    out["top"].sort(reverse=True)
    return out


def profile_flags(args, preset, record):
    """The profiled step's flags: the preset's fast flags without --cuda-graph
    (--profile-flags: others, or a variant's '@best,--flag' form)."""
    by_head_dim = record.get("attention_by_head_dim")
    if args.profile_flags and args.profile_flags.startswith("@"):
        flags = variant_flags(args, args.profile_flags, preset, by_head_dim)
    else:
        flags = args.profile_flags or fast_model_flags(args.fast_precision, preset, by_head_dim)
    return " ".join(flags.replace("--cuda-graph", "").split())


def profile_lines(args, record):
    """The profile section as markdown, from record['profiles'] (in the order
    profiled) and the fast table's rows at --profile-context."""
    context = args.profile_context
    rows = [row for row in record.get("fast", []) if row["context"] == context]
    graph_median, roofs = {}, {}
    by_head_dim = record.get("attention_by_head_dim")
    for row in rows:
        # The graph step of the profiled flags (with --cuda-graph) where a
        # variant ran them, else the best one.
        profiled = set(profile_flags(args, row["preset"], record).split())
        same = [c for name, flags, _ in fast_variants(args.fast_variants)
                if set(variant_flags(args, flags, row["preset"], by_head_dim).split()) - {"--cuda-graph"} == profiled
                for c in [row["benchd"].get(name, {})] if "median" in c]
        for cell in same[:1] or row["benchd"].values():
            if "median" in cell and cell["median"] < graph_median.get(row["preset"], 1e9):
                graph_median[row["preset"]] = cell["median"]
                roofs[row["preset"]] = cell
    kinds = [label for label, _ in OTHER_KINDS] + ["loss, embedding, rest"]
    header = ("| preset | step ms (graph) | kernels ms | GEMM | attention | optimizer | "
              + " | ".join(kinds) + " | waits (step - kernels) | matmul floor | GEMM / matmul floor "
              "| optimizer floor | optimizer / floor |")
    profiled = list(record.get("profiles", {}))
    lines = ["## Where the fast step's time goes (ms per step)", "",
             f"benchd's profile request, {args.fast_precision}, batch {args.model_batch_size} × {context}, each "
             f"preset's fast flags without --cuda-graph ("
             + "; ".join(f"{p}: `{profile_flags(args, p, record)}`" for p in profiled)
             + "): the same kernels launched eagerly, so each is timed under its phase; "
             f"{args.profile_steps} profiled steps. 'waits' is the fast table's best graph step minus these "
             "kernels: time the GPU sits idle inside the step (the graph step of the same flags where the "
             "table has it, else the best). The floors are that job's (the profile measures no peaks).", "",
             header, "|" + "---|" * (header.count("|") - 1)]
    tops = []
    for preset in profiled:
        br = profile_breakdown(record["profiles"][preset], args.profile_steps)
        roof = roofs.get(preset, {})
        k = br["kernels"] * 1e3
        step = graph_median.get(preset)
        mm = roof.get("matmul_floor") or 0
        of = roof.get("optimizer_floor") or 0
        lines.append(
            f"| {preset} | {fmt_ms(step)} | {k:.3f} | {br['gemm'] * 1e3:.3f} | {br['attention'] * 1e3:.3f} "
            f"| {br['optimizer'] * 1e3:.3f} | "
            + " | ".join(f"{br['other'].get(kind, 0) * 1e3:.3f}" for kind in kinds)
            + f" | {fmt_ms(step - k if step else None)} | {mm:.3f} | {ratio(br['gemm'] * 1e3, mm)} | {of:.3f} "
            f"| {ratio(br['optimizer'] * 1e3, of)} |")
        tops.append(f"- {preset}: " + "; ".join(f"{short_kernel(n)} {s * 1e3:.3f} ms ({c}×)"
                                                 for s, c, n in br["top"][:args.profile_top]))
    if not profiled:
        return []
    return lines + ["", "The largest non-GEMM kernels per step (ms per step, launches per step):", ""] + tops


def fast_profile(args, cli, record, flush):
    """benchd's profile request on each preset's fast step without the CUDA
    graph (the same kernels, launched eagerly, so the profiler sees each under
    its phase), set against the graph step's median from the fast table: the
    step minus its kernels is the time the GPU waits inside the graph step.
    Each profile goes into record['profiles'], then flush(); none is started
    with less than --profile-reserve seconds left."""
    context = args.profile_context
    for preset in words(args.presets):
        if seconds_left(args) < args.profile_reserve:
            print(f"compiled_vs_eager: profile {preset}: not run, {seconds_left(args):.0f} s left", file=sys.stderr)
            continue
        cli.evict_all()
        try:
            job_id = cli.submit("profile", "--device", args.device, "--preset", preset, "--mode", "train_step",
                                "--precision", args.fast_precision, "--batch-size", args.model_batch_size,
                                "--context-length", context, "--warmup-steps", "3", "--steps", "3",
                                "--profile-steps", args.profile_steps, "--activities", "cpu,cuda",
                                *profile_flags(args, preset, record).split())
        except BenchctlError as e:
            print(f"compiled_vs_eager: profile {preset}: {e.stderr.strip()}", file=sys.stderr)
            continue
        job = cli.wait(job_id)
        cli.evict_all()
        if job["state"] != SUCCEEDED:
            print(f"compiled_vs_eager: profile {preset}: {job.get('errorMessage', job['state'])}", file=sys.stderr)
            continue
        record.setdefault("profiles", {})[preset] = job["result"]["profile"]
        print(next(x for x in profile_lines(args, record) if x.startswith(f"| {preset} |")), flush=True)
        flush()


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
    p.add_argument("--skip", choices=["attention", "model", "fastpath", "profile"], action="append",
                   default=[])
    fp = p.add_argument_group("the fast path (issue 37): --fastpath runs these sections instead of the others")
    fp.add_argument("--fastpath", action="store_true",
                    help="the fast train step against the strongest PyTorch setup and the floor, then "
                         "benchd's profile of it (skip either with --skip fastpath / profile)")
    fp.add_argument("--contexts", default="256", help="contexts of the fast table")
    fp.add_argument("--peer-contexts", default="256",
                    help="contexts at which the peer runs too (each compile costs tens of seconds)")
    fp.add_argument("--peer-presets", default="", help="presets the peer runs for (default: every preset)")
    fp.add_argument("--peer-cells", default="",
                    help="'preset:context,...': the peer at these, in this order (instead of --peer-presets "
                         "and --peer-contexts); cells not in the benchd table get a row of their own")
    fp.add_argument("--fast-variants", default="",
                    help="'name[@preset+preset]=flags;...' benchd columns; flags '@best' (each preset's fast "
                         "flags) or '@ATTN' (the fast flags with that attention), either optionally followed "
                         "by ',--flag,...' (e.g. 'overlap=@best,--optimizer-overlap') (default: the fast "
                         "flags with flash, cudnn, fused)")
    fp.add_argument("--fast-precision", default="bf16", choices=["bf16", "fp16"])
    fp.add_argument("--fast-steps", type=int, default=20)
    fp.add_argument("--peer-warmup-steps", type=int, default=5)
    fp.add_argument("--profile-context", type=int, default=256)
    fp.add_argument("--profile-steps", type=int, default=3)
    fp.add_argument("--profile-flags", default="", help="flags of the profiled step (default: the fast flags)")
    fp.add_argument("--profile-top", type=int, default=8)
    fp.add_argument("--json", help="write the fast-path jobs and profiles (JSON) here")
    fp.add_argument("--deadline", type=float, default=0,
                    help="epoch seconds by which the sections must end (gpu-fastpath.sh sets it from "
                         "GPU_FASTPATH_BUDGET): a job is not started within its reserve of it")
    fp.add_argument("--benchd-reserve", type=float, default=20, help="seconds a benchd job needs")
    fp.add_argument("--profile-reserve", type=float, default=40, help="seconds a profile job needs")
    fp.add_argument("--peer-reserve", type=float, default=150,
                    help="seconds a peer needs (torch.compile of the model and loss: 1-3 minutes)")
    fp.add_argument("--datasheet-tflops", type=float, default=989.0,
                    help="the device's dense bf16 peak by its datasheet (H100 SXM: 989), for the %% column")
    fp.add_argument("--rerender", metavar="JSON",
                    help="no jobs: the tables again from an earlier run's --json (its own flags, but "
                         "--out/--json from this command line), e.g. after a change to the profile's kinds")
    args = p.parse_args()
    saved = None
    if args.rerender:
        with open(args.rerender) as f:
            saved = json.load(f)
        rerender, out, out_json = args.rerender, args.out, args.json
        args = p.parse_args(saved["argv"])
        args.rerender, args.out, args.json = rerender, out, out_json
        args.benchctl = args.benchctl or "-"
    cli = Benchctl(args.benchctl) if args.benchctl else None
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "CPU"
    lines = [f"# Compiled vs eager on {name} (torch {torch.__version__})", ""]
    if args.fastpath:
        if not cli:
            raise SystemExit("--fastpath needs --benchctl")
        record = saved if args.rerender else {"device": name, "torch": torch.__version__, "argv": sys.argv[1:],
                                              "started": time.time(),
                                              "attention_by_head_dim": FAST_ATTENTION_BY_HEAD_DIM}

        def flush():
            # Everything so far, after each row, profile and peer: a call cut
            # at its limit still returns what it finished.
            text = "\n".join([f"# benchd's fast path on {record['device']} (torch {record['torch']})", ""]
                              + fast_table_lines(args, record) + [""] + profile_lines(args, record)) + "\n"
            for path, data in ((args.out, text), (args.json, json.dumps(record, indent=1))):
                if path:
                    with open(path + ".tmp", "w") as f:
                        f.write(data)
                    os.replace(path + ".tmp", path)
            return text

        if args.rerender:
            print(flush())
            return
        if "fastpath" not in args.skip:
            fastpath_table(args, cli, record, flush)
        if "profile" not in args.skip:
            fast_profile(args, cli, record, flush)
        if "fastpath" not in args.skip:
            fastpath_peers(args, record, flush)
        record["wall_s"] = round(time.time() - record["started"], 1)
        print(flush())
        return
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
