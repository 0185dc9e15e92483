#!/usr/bin/env python3
"""The host cost of one eager op: C++ (LibTorch, bench/op_overhead/op_overhead.cc)
against Python (the same ops, the same tensors, the same loop), on one device,
in one command. A step bound by its own launch overhead (the small and medium
presets at batch 4 on an H100) can be at best about this ratio faster in C++
than in Python while issuing the same ops.

  bench/op_overhead/op_overhead.py --binary build/bin/op_overhead --device cuda:0
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import cs336_lm as ref  # noqa: E402

PRESETS = {"small": (10000, 768, 3072, 12, 12), "medium": (10000, 1024, 4096, 24, 16)}
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def python_cases(device):
    a = torch.randn(256, device=device)
    b = torch.randn(256, device=device)
    ag = torch.randn(256, device=device).requires_grad_()
    inplace = torch.randn(256, device=device)
    x = torch.randn(16, 64, device=device)
    w = torch.randn(64, 64, device=device).requires_grad_()
    wc = torch.randn(256, device=device).requires_grad_()

    def add():
        a + b

    def add_autograd():
        ag + b

    def mul_inplace():
        with torch.no_grad():
            inplace.mul_(0.999)

    def linear_autograd():
        torch.nn.functional.linear(x, w)

    def chain_fwd_bwd():
        y = a
        for _ in range(8):
            y = y * wc + b
        y.sum().backward()

    def chain_fwd_bwd_explicit():
        # chain_fwd_bwd's kernels without the engine (as op_overhead.cc's case).
        with torch.no_grad():
            ys, y = [], a
            for _ in range(8):
                ys.append(y)
                y = y * wc + b
            s = y.sum()
            g, g_wc = torch.ones_like(s).expand(y.shape), None
            for i in range(7, -1, -1):
                c = g * ys[i]
                g_wc = c if g_wc is None else g_wc + c
                if i > 0:
                    g = g * wc
            if wc.grad is None:
                wc.grad = g_wc
            else:
                wc.grad.add_(g_wc)

    return [("add", 1, add), ("add_autograd", 1, add_autograd), ("mul_inplace", 1, mul_inplace),
            ("linear_autograd", 1, linear_autograd), ("chain_fwd_bwd", 17, chain_fwd_bwd),
            ("chain_fwd_bwd_explicit", 17, chain_fwd_bwd_explicit)]


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def run_python(device, iters, repeats):
    rows = {}
    for name, ops_per_iter, body in python_cases(device):
        for _ in range(200):
            body()
        sync(device)
        issue, total = [], []
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            for _ in range(iters):
                body()
            t1 = time.perf_counter()
            sync(device)
            t2 = time.perf_counter()
            ops = iters * ops_per_iter
            issue.append((t1 - t0) * 1e6 / ops)
            total.append((t2 - t0) * 1e6 / ops)
        rows[name] = {"issue_us_median": statistics.median(issue), "issue_us_min": min(issue),
                      "issue_us_max": max(issue), "total_us_median": statistics.median(total)}
    return rows


def step_kernels(device, preset, batch, context, steps):
    """Kernels one reference step launches (torch.profiler's CUDA kernel events)
    and its median time: the time per kernel of a step bound by launches."""
    V, d, dff, L, H = PRESETS[preset]
    torch.manual_seed(0)
    model = ref.TransformerLM(V, context, d, L, H, dff).to(device)
    opt = ref.AdamW(model.parameters())
    x = torch.randint(0, V, (batch, context), device=device)
    y = torch.randint(0, V, (batch, context), device=device)
    rows = []
    for mode in ("forward", "forward_backward", "train_step"):
        for precision, dtype in DTYPES.items():
            def step():
                model.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
                    loss = ref.cross_entropy(model(x), y)
                if mode != "forward":
                    loss.backward()
                if mode == "train_step":
                    opt.step()
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                          and not e.name.startswith("Memcpy") and not e.name.startswith("Memset"))
            med = statistics.median(times)
            rows.append((mode, precision, kernels, med, med / kernels))
    print(f"\nreference {preset} batch {batch} context {context}: kernels per step and host time per kernel "
          f"(median of {steps} synchronized steps)")
    print("| mode | precision | kernels | step ms | µs per kernel |")
    print("| --- | --- | --- | --- | --- |")
    for mode, precision, kernels, med, per in rows:
        print(f"| {mode} | {precision} | {kernels} | {med * 1e3:.2f} | {per * 1e6:.2f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", required=True, help="the op_overhead executable (build/bin/op_overhead)")
    p.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--step-kernels", nargs="*", default=[], choices=sorted(PRESETS),
                   help="also count the kernels of the reference's steps of these presets (CUDA only)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--context-length", type=int, default=256)
    args = p.parse_args()

    out = subprocess.run([args.binary, "--device", args.device, "--iters", str(args.iters),
                          "--repeats", str(args.repeats)], check=True, capture_output=True, text=True)
    cpp = {r["case"]: r for r in map(json.loads, out.stdout.splitlines())}
    py = run_python(args.device, args.iters, args.repeats)

    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"host cost per eager op on {args.device} ({name}), torch {torch.__version__}, "
          f"median of {args.repeats} x {args.iters} iterations (min-max)")
    print("| case | C++ µs/op | Python µs/op | C++ / Python |")
    print("| --- | --- | --- | --- |")
    for case, r in py.items():
        c = cpp[case]
        print(f"| {case} | {c['issue_us_median']:.2f} ({c['issue_us_min']:.2f}-{c['issue_us_max']:.2f}) "
              f"| {r['issue_us_median']:.2f} ({r['issue_us_min']:.2f}-{r['issue_us_max']:.2f}) "
              f"| {c['issue_us_median'] / r['issue_us_median']:.3f} |")
    for preset in args.step_kernels:
        step_kernels(args.device, preset, args.batch_size, args.context_length, 10)


if __name__ == "__main__":
    main()
