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
import re
import statistics
import sys
import time

import torch

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError
from compare import PRESETS, Reference
from reference import cs336_lm as ref

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FAST_MODEL_FLAGS = {  # benchd's speed options per precision (README, "Using it")
    "fp32": "--attention sdpa --optimizer fused --tf32 --cuda-graph",
    "bf16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops",
    "fp16": "--attention flash --optimizer fused --cuda-graph --weight-copies --fused-ops",
}
# The half-precision attention that gave the fastest whole train step, by head
# dim, where it was measured (docs/results/fast-path-h100.md, H100, 2026-11-27):
# at head dim 64 (small to xl, contexts 256-1024) cuDNN through SDPA was the
# fastest in all 12 cells: 0.6-3.8% ahead of SDPA's flash and 0.1-1.1% ahead of
# benchd's own fused kernel, which beat flash in 10 (the other two within 0.1%).
# Head dims not measured (2.7B's 80, which fused lacks) keep flash.
FAST_ATTENTION_BY_HEAD_DIM = {64: "cudnn"}


def fast_model_flags(precision, preset):
    """FAST_MODEL_FLAGS[precision] with the attention measured fastest for the
    preset's head dim (bf16/fp16; fp32 keeps SDPA's own pick)."""
    flags = FAST_MODEL_FLAGS[precision]
    if precision == "fp32" or preset not in PRESETS:
        return flags
    _, d_model, _, _, heads = PRESETS[preset]
    attention = FAST_ATTENTION_BY_HEAD_DIM.get(d_model // heads)
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
    """'name=flags;name=flags' -> [(name, flags)]; '' -> the bf16 fast flags with
    each of flash, cudnn and fused (benchd's own kernel) as the attention."""
    if not text:
        base = FAST_MODEL_FLAGS["bf16"]
        return [(a, attention_variant(base, a)) for a in ("flash", "cudnn", "fused")]
    out = []
    for part in text.split(";"):
        name, sep, flags = part.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--fast-variants: '{part}' is not name=flags (e.g. 'flash=--attention flash "
                             f"--cuda-graph')")
        out.append((name.strip(), flags.strip()))
    return out


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
    """(median ms, min, max) of the strongest PyTorch setup's train step
    (compare.Reference with strongest=True), or 'OOM'."""
    ns = argparse.Namespace(device=args.device, context_length=context, batch_size=args.model_batch_size)
    r = None
    try:
        r = Reference(ns, preset, "train_step", args.fast_precision, compiled=True, strongest=True)
        steps = [t * 1e3 for t in r.steps(args.peer_warmup_steps, args.fast_steps)]
        return statistics.median(steps), min(steps), max(steps)
    except (torch.OutOfMemoryError, MemoryError):
        return "OOM"
    finally:
        if r:
            r.close()


def fastpath_table(args, cli, record):
    variants = fast_variants(args.fast_variants)
    names = [n for n, _ in variants]
    header = ("| preset | context | peer ms | " + " | ".join(f"benchd {n} ms" for n in names)
              + " | best | floor ms (sum) | floor ms (max) | best / floor | best / max floor | best / peer "
              "| best TFLOP/s | % of measured peak |")
    lines = ["## The fast train step against the strongest PyTorch setup and the roofline floor", "",
             f"{args.fast_precision}, batch {args.model_batch_size}, {args.warmup_steps} warm-up + "
             f"{args.fast_steps} measured steps (the peer: {args.peer_warmup_steps} warm-up); median ms "
             f"(min-max). Peer: the course's model and loss under torch.compile(mode='reduce-overhead'), "
             f"torch.optim.AdamW(fused=True), bf16 autocast. Variants: "
             + "; ".join(f"{n} = `{f}`" for n, f in variants)
             + ". Floor (sum): model FLOPs at the measured bf16 matmul peak + AdamW's 28 bytes/parameter at "
             "the measured copy bandwidth; floor (max): the larger of the two (the optimizer hidden "
             "under the matmuls).", "", header, "|" + "---|" * (header.count("|") - 1)]
    peer_contexts = set(ints(args.peer_contexts))
    for preset in words(args.presets):
        for context in ints(args.contexts):
            with_peer = context in peer_contexts and (not args.peer_presets or preset in words(args.peer_presets))
            peer = peer_model(args, preset, context) if with_peer else None
            cli.evict_all()
            cells = {n: benchd_fast_job(cli, args, preset, context, f) for n, f in variants}
            cli.evict_all()
            record.setdefault("fast", []).append({"preset": preset, "context": context, "peer": peer,
                                                  "benchd": cells})
            ok = {n: c for n, c in cells.items() if "median" in c}
            best = min(ok, key=lambda n: ok[n]["median"]) if ok else None
            b = ok.get(best)

            def show(c):
                return (f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})" if "median" in c else c["error"])

            peer_col = ("-" if peer is None else peer if isinstance(peer, str)
                        else f"{peer[0]:.2f} ({peer[1]:.2f}-{peer[2]:.2f})")
            floor_max = max(b["matmul_floor"], b["optimizer_floor"]) if b and b["matmul_floor"] else None
            tail = "- | - | - | - | - | - | - |"
            if b:
                peak = (f"{100 * b['tflops'] / b['peak_tflops']:.1f}" if b["tflops"] and b["peak_tflops"]
                        else "-")
                tail = (f"{fmt_ms(b['floor'])} | {fmt_ms(floor_max)} | {ratio(b['median'], b['floor'])} "
                        f"| {ratio(b['median'], floor_max)} "
                        f"| {ratio(b['median'], peer[0] if isinstance(peer, tuple) else None)} "
                        f"| {b['tflops'] or 0:.0f} | {peak} |")
            lines.append(f"| {preset} | {context} | {peer_col} | " + " | ".join(show(cells[n]) for n in names)
                         + f" | {best or '-'} | " + tail)
            print(lines[-1], flush=True)
    return lines


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


def profile_breakdown(profile, steps):
    """Seconds per step of GEMMs, attention and the rest (by kind) in the
    forward and backward, the optimizer's kernels, and the top non-GEMM kernels."""
    ranges = {r["name"]: r for r in profile.get("ranges", [])}
    out = {"gemm": 0.0, "attention": 0.0, "optimizer": 0.0, "other": {}, "top": [], "kernels": 0.0}
    opt_names = {k["name"] for k in ranges.get("optimizer_step", {}).get("kernels", [])}
    for k in ranges.get("step", {}).get("kernels", []):
        sec = k.get("totalSeconds", 0) / steps
        out["kernels"] += sec
        name = k["name"]
        if name in opt_names:
            out["optimizer"] += sec
        elif k.get("gemm"):
            out["gemm"] += sec
        elif ATTENTION_KERNEL.search(name):
            out["attention"] += sec
        else:
            kind = other_kind(name)
            out["other"][kind] = out["other"].get(kind, 0) + sec
        if not k.get("gemm"):
            out["top"].append((sec, int(k.get("instances", 0)) // steps, name))
    out["top"].sort(reverse=True)
    return out


def fast_profile(args, cli, record, fast_rows):
    """benchd's profile request on each preset's fast step without the CUDA
    graph (the same kernels, launched eagerly, so the profiler sees each under
    its phase), set against the graph step's median from the fast table: the
    step minus its kernels is the time the GPU waits inside the graph step."""
    def eager_flags_of(preset):
        flags = args.profile_flags or fast_model_flags(args.fast_precision, preset)
        return " ".join(flags.replace("--cuda-graph", "").split())

    eager_flags = eager_flags_of(words(args.presets)[0])
    context = args.profile_context
    graph_median = {}
    for row in fast_rows:
        if row["context"] == context:
            for cell in row["benchd"].values():
                if "median" in cell:
                    graph_median[row["preset"]] = min(graph_median.get(row["preset"], 1e9), cell["median"])
    kinds = [label for label, _ in OTHER_KINDS] + ["loss, embedding, rest"]
    roofs = {row["preset"]: cell for row in fast_rows if row["context"] == context
             for cell in row["benchd"].values() if "median" in cell}
    header = ("| preset | step ms (graph, best) | kernels ms | GEMM | attention | optimizer | "
              + " | ".join(kinds) + " | waits (step - kernels) | matmul floor | GEMM / matmul floor "
              "| optimizer floor | optimizer / floor |")
    lines = ["## Where the fast step's time goes (ms per step)", "",
             f"benchd's profile request, {args.fast_precision}, batch {args.model_batch_size} × {context}, "
             f"flags `{eager_flags}` (for {words(args.presets)[0]}; each preset's fast flags without "
             f"--cuda-graph: the same kernels launched eagerly, "
             f"so each is timed under its phase); {args.profile_steps} profiled steps. 'waits' is the fast "
             "table's best graph step minus these kernels: time the GPU sits idle inside the step.", "",
             header, "|" + "---|" * (header.count("|") - 1)]
    tops = []
    for preset in words(args.presets):
        cli.evict_all()
        try:
            job_id = cli.submit("profile", "--device", args.device, "--preset", preset, "--mode", "train_step",
                                "--precision", args.fast_precision, "--batch-size", args.model_batch_size,
                                "--context-length", context, "--warmup-steps", "3", "--steps", "3",
                                "--profile-steps", args.profile_steps, "--activities", "cpu,cuda",
                                *eager_flags_of(preset).split())
        except BenchctlError as e:
            print(f"compiled_vs_eager: profile {preset}: {e.stderr.strip()}", file=sys.stderr)
            continue
        job = cli.wait(job_id)
        cli.evict_all()
        if job["state"] != SUCCEEDED:
            print(f"compiled_vs_eager: profile {preset}: {job.get('errorMessage', job['state'])}", file=sys.stderr)
            continue
        prof = job["result"]["profile"]
        record.setdefault("profiles", {})[preset] = prof
        # The floors from the fast table's job at this context (the profile's
        # runs measure no peaks).
        roof = roofs.get(preset, {})
        br = profile_breakdown(prof, args.profile_steps)
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
        print(lines[-1], flush=True)
        tops.append(f"- {preset}: " + "; ".join(f"{short_kernel(n)} {s * 1e3:.3f} ms ({c}×)"
                                                 for s, c, n in br["top"][:args.profile_top]))
    return lines + ["", f"The largest non-GEMM kernels per step (ms per step, launches per step):", ""] + tops



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
    fp.add_argument("--fast-variants", default="",
                    help="'name=flags;...' benchd columns (default: the fast flags with flash, cudnn, fused)")
    fp.add_argument("--fast-precision", default="bf16", choices=["bf16", "fp16"])
    fp.add_argument("--fast-steps", type=int, default=20)
    fp.add_argument("--peer-warmup-steps", type=int, default=5)
    fp.add_argument("--profile-context", type=int, default=256)
    fp.add_argument("--profile-steps", type=int, default=3)
    fp.add_argument("--profile-flags", default="", help="flags of the profiled step (default: the fast flags)")
    fp.add_argument("--profile-top", type=int, default=8)
    fp.add_argument("--json", help="write the fast-path jobs and profiles (JSON) here")
    args = p.parse_args()
    cli = Benchctl(args.benchctl) if args.benchctl else None
    name = torch.cuda.get_device_name() if torch.device(args.device).type == "cuda" else "CPU"
    lines = [f"# Compiled vs eager on {name} (torch {torch.__version__})", ""]
    if args.fastpath:
        if not cli:
            raise SystemExit("--fastpath needs --benchctl")
        lines = [f"# benchd's fast path on {name} (torch {torch.__version__})", ""]
        record = {"device": name, "torch": torch.__version__}
        if "fastpath" not in args.skip:
            lines += fastpath_table(args, cli, record) + [""]
        if "profile" not in args.skip:
            lines += fast_profile(args, cli, record, record.get("fast", [])) + [""]
        if args.json:
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1)
        args.skip += ["attention", "model"]
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
