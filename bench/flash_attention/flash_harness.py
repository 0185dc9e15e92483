#!/usr/bin/env python3
"""Correctness and benchmark harness for benchd's FlashAttention-2 kernels
(worker/flash/), called through ctypes (flash_shim.cu) on torch tensors.

  flash_harness.py test  --lib build/libbenchd_flash.so   # exits 1 on any failure
  flash_harness.py bench --lib build/libbenchd_flash.so   # do_bench table vs SDPA cuDNN / FLASH
  flash_harness.py profile --lib ...                      # one fwd + bwd (for ncu)

Reference: plain torch ops in float64 on the same (rounded) inputs,
softmax(Q K^T·scale + mask) V, L = logsumexp, autograd for dQ, dK, dV.
Error per tensor: max abs error and the norm-relative error
||x − ref|| / max(||ref||, 1e-3·sqrt(numel)); pass when the norm-relative error is under the
dtype's tolerance (TOL) and every element was written (outputs are poisoned
with NaN first). SDPA's math backend in the same dtype is measured against
the same reference and printed beside ours.
"""
import argparse
import ctypes
import math
import os
import sys

import torch
import torch.nn.functional as F

DT = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
# absolute tolerance used only where the float64 reference is exactly zero
ATOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
# norm-relative tolerances: (O, L, dQ/dK/dV)
TOL = {
    torch.float32: (1e-5, 1e-5, 1e-5),
    torch.float16: (1e-3, 1e-4, 1e-3),
    torch.bfloat16: (5e-3, 1e-4, 1e-2),
}


class Flash:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        f = self.lib.benchd_flash_forward
        f.restype = ctypes.c_char_p
        f.argtypes = [ctypes.c_int, i64, i64, i64, i64, i64, ctypes.c_int, ctypes.c_float,
                      vp, vp, vp, vp, vp, vp, vp, vp, vp, vp]
        w = self.lib.benchd_flash_backward_workspace
        w.restype = ctypes.c_uint64
        w.argtypes = [ctypes.c_int, i64, i64, i64, i64]
        self.lib.benchd_flash_set_variant.restype = None
        self.lib.benchd_flash_set_variant.argtypes = [ctypes.c_int, ctypes.c_int]
        b = self.lib.benchd_flash_backward
        b.restype = ctypes.c_char_p
        b.argtypes = [ctypes.c_int, i64, i64, i64, i64, i64, ctypes.c_int, ctypes.c_float,
                      vp, vp, vp, vp, vp]

    @staticmethod
    def _strides(*ts):
        arr = (ctypes.c_int64 * (4 * len(ts)))()
        for i, t in enumerate(ts):
            for j, s in enumerate(t.stride()):
                arr[4 * i + j] = s
        return arr

    def forward(self, q, k, v, causal, scale, o=None, lse=None):
        B, H, Sq, D = q.shape
        Sk = k.shape[2]
        if o is None:
            o = torch.empty_like(q)
        if lse is None:
            lse = torch.empty(B, H, Sq, device=q.device, dtype=torch.float32)
        st = [self._strides(t) for t in (q, k, v, o)]
        err = self.lib.benchd_flash_forward(
            DT[q.dtype], B, H, Sq, Sk, D, int(causal), scale,
            q.data_ptr(), ctypes.addressof(st[0]), k.data_ptr(), ctypes.addressof(st[1]),
            v.data_ptr(), ctypes.addressof(st[2]), o.data_ptr(), ctypes.addressof(st[3]),
            lse.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(err.decode())
        return o, lse

    def backward(self, q, k, v, o, do, lse, causal, scale, dq=None, dk=None, dv=None):
        B, H, Sq, D = q.shape
        Sk = k.shape[2]
        dq = torch.empty_like(q) if dq is None else dq
        dk = torch.empty_like(k) if dk is None else dk
        dv = torch.empty_like(v) if dv is None else dv
        ws = torch.empty(self.lib.benchd_flash_backward_workspace(DT[q.dtype], B, H, Sq, D),
                         dtype=torch.uint8, device=q.device)
        ts = (q, k, v, o, do, dq, dk, dv)
        ptrs = (ctypes.c_void_p * 8)(*[t.data_ptr() for t in ts])
        st = self._strides(*ts)
        err = self.lib.benchd_flash_backward(
            DT[q.dtype], B, H, Sq, Sk, D, int(causal), scale, ptrs, st, lse.data_ptr(),
            ws.data_ptr(), torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(err.decode())
        return dq, dk, dv


# backward variants checked on every d64 bf16/fp16 grid case, and those timed at d64
# (BWD_VARIANTS="name:var,..." overrides the timed ones)
BWD_GRID_VARIANTS = tuple(int(v) for v in os.environ.get("BWD_GRID_VARIANTS", "13,34,38,41").split(",") if v)
# the variants run on the 10-case subset by `test` (TEST_VARIANTS="34,35" restricts them)
TEST_VARIANTS = tuple(int(v) for v in os.environ.get(
    "TEST_VARIANTS", ",".join(str(v) for v in (2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                               20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
                                               34, 35, 36, 37, 38, 39, 40, 41))).split(",") if v)
# BENCH_CASES: the leading cases of cmd_bench's list to time (1 = the leaderboard case only);
# BENCH_REPEAT: time every implementation that many times, interleaved (run-to-run spread)
BENCH_CASES = int(os.environ.get("BENCH_CASES", "3"))
BENCH_REPEAT = int(os.environ.get("BENCH_REPEAT", "1"))
BENCH_FWD_VARIANTS = tuple((kv.split(":")[0], int(kv.split(":")[1])) for kv in os.environ.get(
    "FWD_VARIANTS", "ours-ftree:30,ours-femu8:31,ours-ftree-emu8:32,ours-ftree-emu4:33").split(",") if kv)
BENCH_BWD_VARIANTS = tuple((kv.split(":")[0], int(kv.split(":")[1])) for kv in os.environ.get(
    "BWD_VARIANTS",
    "ours-v13:13,ours-writer:34,ours-wc:38,ours-wc-early:41").split(",") if kv)


def reference(q, k, v, do, causal, scale):
    """float64 attention with autograd: O, L, dQ, dK, dV."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        mask = torch.ones(Sq, Sk, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ v
    o.backward(do.double())
    return o.detach(), lse.detach(), q.grad, k.grad, v.grad


def sdpa_math(q, k, v, do, causal, scale):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad


def err(x, ref, atol=None):
    if torch.isnan(x).any():
        return float("nan"), float("nan")
    d = (x.double() - ref)
    if atol is not None and ref.abs().max().item() == 0:
        # an exactly-zero reference (dQ, dK at Sk = 1: a one-element softmax has no
        # gradient): the criterion is the max abs error against ATOL, reported
        # as max_abs / ATOL · tol so the table's pass rule stays rel <= tol
        return d.abs().max().item(), None
    # a floor of 1e-3·sqrt(n) under ||ref|| keeps all-zero references (e.g. dQ, dK at
    # Sk = 1, where the softmax has no gradient) from dividing rounding noise by 0
    den = max(ref.norm().item(), 1e-3 * math.sqrt(ref.numel()))
    return d.abs().max().item(), d.norm().item() / den


def make(shape, dtype, layout, seed_gen):
    B, H, S, D = shape
    if layout == "bshd":  # [B, S, H, D] transposed to [B, H, S, D]: non-contiguous strides
        t = torch.randn(B, S, H, D, device="cuda", dtype=torch.float32, generator=seed_gen)
        return t.to(dtype).transpose(1, 2)
    return torch.randn(B, H, S, D, device="cuda", dtype=torch.float32, generator=seed_gen).to(dtype)


def run_case(fl, dtype, B, H, Sq, Sk, D, causal, layout, gen):
    scale = 1.0 / math.sqrt(D)
    q = make((B, H, Sq, D), dtype, layout, gen)
    k = make((B, H, Sk, D), dtype, layout, gen)
    v = make((B, H, Sk, D), dtype, layout, gen)
    do = make((B, H, Sq, D), dtype, layout, gen)
    # poisoned outputs in the same layout as the inputs (strided outputs too)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Sq), float("nan"), device="cuda")
    fl.forward(q, k, v, causal, scale, o=o, lse=lse)
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (q, k, v))
    fl.backward(q, k, v, o, do, lse, causal, scale, dq=dq, dk=dk, dv=dv)
    torch.cuda.synchronize()
    ro, rl, rdq, rdk, rdv = reference(q, k, v, do, causal, scale)
    mo, mdq, mdk, mdv = sdpa_math(q, k, v, do, causal, scale)
    tol_o, tol_l, tol_g = TOL[dtype]
    res = {}
    ok = True
    for name, x, r, m, tol in (("O", o, ro, mo, tol_o), ("L", lse, rl, None, tol_l),
                               ("dQ", dq, rdq, mdq, tol_g), ("dK", dk, rdk, mdk, tol_g),
                               ("dV", dv, rdv, mdv, tol_g)):
        a, rel = err(x, r, atol=ATOL[dtype])
        if rel is None:
            rel = a / ATOL[dtype] * tol
        mrel = err(m, r)[1] if m is not None else float("nan")
        good = rel <= tol  # NaN compares False
        ok &= good
        res[name] = (a, rel, mrel, good)
    return ok, res


def cmd_test(fl):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for D in (16, 32, 64, 128):
            for causal in (False, True):
                # S 512 (run 24): Sq % 128 == 0 reaches the default's permuted dQ accumulator
                for B, H, S in ((2, 3, 1), (2, 3, 17), (1, 2, 100), (2, 2, 1000), (1, 2, 512)):
                    cases.append((dtype, B, H, S, S, D, causal, "bhsd"))
        for D in (64, 128):
            for causal in (False, True):
                cases.append((dtype, 1, 2, 4097, 4097, D, causal, "bhsd"))
        for D in (32, 64, 128):
            cases.append((dtype, 2, 3, 333, 333, D, True, "bshd"))
            cases.append((dtype, 2, 3, 100, 257, D, False, "bshd"))
            cases.append((dtype, 1, 2, 300, 65, D, False, "bhsd"))
    print("# norm-relative tolerance per dtype (O, L, grads):",
          {str(k).replace("torch.", ""): v for k, v in TOL.items()})
    print(f"{'dtype':9s} {'B':>2s} {'H':>2s} {'Sq':>5s} {'Sk':>5s} {'D':>3s} {'causal':6s} {'layout':6s} "
          + " ".join(f"{n+' abs/rel (sdpa-math rel)':>34s}" for n in ("O", "L", "dQ", "dK", "dV")) + "  ok")
    failures = 0
    # TEST_GRID=0 skips the grid through the default kernels (a quick check of variants)
    for c in cases if os.environ.get("TEST_GRID", "1") != "0" else ():
        dtype, B, H, Sq, Sk, D, causal, layout = c
        try:
            ok, res = run_case(fl, *c, gen)
        except Exception as e:  # noqa: BLE001
            ok, res = False, {}
            print("ERROR", c, e)
        failures += not ok
        cols = []
        for n in ("O", "L", "dQ", "dK", "dV"):
            if n in res:
                a, rel, mrel, good = res[n]
                cols.append(f"{a:9.2e}/{rel:8.2e} ({mrel:8.2e}){'' if good else '!'}".rjust(34))
        print(f"{str(dtype).replace('torch.', ''):9s} {B:2d} {H:2d} {Sq:5d} {Sk:5d} {D:3d} {str(causal):6s} "
              f"{layout:6s} " + " ".join(cols) + ("  PASS" if ok else "  FAIL"), flush=True)
    print(f"# {len(cases) - failures}/{len(cases)} cases passed")
    # the alternative wgmma forward variants (timed by `bench`) on a subset
    vfail, vn = 0, 0
    for var in TEST_VARIANTS:
        for D in (64, 128):
            for c in ([(torch.bfloat16, 2, 2, 1000, 1000, D, cz, "bhsd") for cz in (False, True)]
                      + [(torch.bfloat16, 1, 2, 4097, 4097, D, True, "bhsd"),
                         (torch.float16, 2, 3, 333, 333, D, True, "bshd"),
                         (torch.bfloat16, 2, 3, 100, 257, D, False, "bshd")]
                      # Sq % 128 == 0 (run 23: variant 38's permuted dQ accumulator needs it)
                      + [(torch.bfloat16, 2, 2, 1024, 1024, D, True, "bhsd"),
                         (torch.float16, 1, 2, 2048, 2048, D, False, "bhsd"),
                         (torch.bfloat16, 2, 3, 512, 512, D, True, "bshd")]):
                fl.lib.benchd_flash_set_variant(var, var)
                try:
                    ok, res = run_case(fl, *c, gen)
                except Exception as e:  # noqa: BLE001
                    ok, res = False, {}
                    print("ERROR", c, e)
                fl.lib.benchd_flash_set_variant(0, 0)
                vn += 1
                vfail += not ok
                print(f"variant {var} {c[0]} S{c[3]}/{c[4]} d{D} causal={c[6]} {c[7]} "
                      + " ".join(f"{n} {res[n][1]:.2e}" for n in res) + ("  PASS" if ok else "  FAIL"),
                      flush=True)
    print(f"# variants: {vn - vfail}/{vn} cases passed")
    # the backward variants of runs 13- (BwdWs128Kernel) on every case of the grid above
    # that reaches the d64 wgmma backward (bf16/fp16, d64)
    gfail, gn = 0, 0
    for var in BWD_GRID_VARIANTS:
        for c in cases:
            if c[0] == torch.float32 or c[5] != 64:
                continue
            fl.lib.benchd_flash_set_variant(0, var)
            try:
                ok, res = run_case(fl, *c, gen)
            except Exception as e:  # noqa: BLE001
                ok, res = False, {}
                print("ERROR", c, e)
            fl.lib.benchd_flash_set_variant(0, 0)
            gn += 1
            gfail += not ok
            if not ok:
                print(f"bwd variant {var} {c} " + " ".join(f"{n} {res[n][1]:.2e}" for n in res) + "  FAIL")
    print(f"# bwd variants {'/'.join(map(str, BWD_GRID_VARIANTS))} on the grid's d64 bf16/fp16 cases: "
          f"{gn - gfail}/{gn} cases passed")
    vfail += gfail
    return 1 if failures or vfail else 0


def flops_fwd(B, H, S, D, causal):
    f = 4 * B * H * S * S * D
    return f / 2 if causal else f


def cmd_bench(fl, reps_ms):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    dev = torch.cuda.get_device_name()
    print(f"# device: {dev}; torch {torch.__version__}; do_bench(warmup=25 ms, rep={reps_ms} ms), "
          "median [p20, p80] ms; TFLOP/s: fwd 4·B·H·S²·d (/2 causal), bwd 2.5× fwd")
    rows = []
    configs = [
        ("leaderboard bf16 causal B1 H16 S16384 d64", torch.bfloat16, 1, 16, 16384, 64, True, ("fwd", "fwd+bwd")),
        ("bf16 causal B1 H16 S16384 d128", torch.bfloat16, 1, 16, 16384, 128, True, ("fwd", "fwd+bwd")),
        ("bf16 non-causal B1 H16 S4096 d128", torch.bfloat16, 1, 16, 4096, 128, False, ("fwd", "fwd+bwd")),
    ][:BENCH_CASES]
    for label, dtype, B, H, S, D, causal, modes in configs:
        gen = torch.Generator(device="cuda")
        gen.manual_seed(0)
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
        scale = 1.0 / math.sqrt(D)
        ones = torch.ones_like(q)
        # sanity: ours vs cuDNN at this size (outputs and gradients of o.sum())
        o, lse = fl.forward(q, k, v, causal, scale)
        dq, dk, dv = fl.backward(q, k, v, o, ones, lse, causal, scale)
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
        oc.sum().backward()
        chk = []
        for n, a, b in (("O", o, oc), ("dQ", dq, qg.grad), ("dK", dk, kg.grad), ("dV", dv, vg.grad)):
            chk.append(f"{n} {((a.float() - b.float()).norm() / b.float().norm()).item():.2e}")
        print(f"# {label}: ours vs cuDNN, norm-relative: " + ", ".join(chk))
        if D == 64:  # the timed backward variants at this size too (run 25)
            for name, var in BENCH_BWD_VARIANTS:
                fl.lib.benchd_flash_set_variant(0, var)
                dq, dk, dv = fl.backward(q, k, v, o, ones, lse, causal, scale)
                fl.lib.benchd_flash_set_variant(0, 0)
                print(f"#   {name}: " + ", ".join(
                    f"{n} {((a.float() - b.float()).norm() / b.float().norm()).item():.2e}"
                    for n, a, b in (("dQ", dq, qg.grad), ("dK", dk, kg.grad), ("dV", dv, vg.grad))))
        del oc, qg, kg, vg

        fwd_flops = flops_fwd(B, H, S, D, causal)
        impls = {}

        def ours_fwd():
            fl.forward(q, k, v, causal, scale)

        def ours_fb():
            o_, l_ = fl.forward(q, k, v, causal, scale)
            fl.backward(q, k, v, o_, ones, l_, causal, scale)

        def with_variant(fn, var):
            def run():
                fl.lib.benchd_flash_set_variant(var, var)
                fn()
                fl.lib.benchd_flash_set_variant(0, 0)
            return run

        impls["ours"] = (ours_fwd, ours_fb, None)
        # variant 6: the previous default (runs 9/10's kernels); 8: run 9's backward
        # in LPT grid order; 9: backward pipelined across query tiles + scheduler
        # barrier + LPT; 10: backward with the scheduler barrier + LPT; 11: K as a
        # register operand of S^T (see BwdWsDtype
        # in flash_attention_sm90.cu). Variant 7 (forward in LPT order, run 11) and
        # variants 1-4 are still selectable and tested but no longer timed here.
        # Runs 13-: the backward with FlashAttention-3's d64 tiling (128 queries x 128 keys
        # per step, BwdWs128Kernel): default = variant 13 (kOpt); 12 without kOpt (run 13);
        # 15 kOpt + dV before the dP wait. Variants 8-11 and 14 are still tested but no
        # longer timed. The backward variants only differ at d64.
        impls["ours-prev"] = (with_variant(ours_fwd, 6), with_variant(ours_fb, 6), None)
        # run 16: variant 16 (dK of step u-1 under step u's exponentials, dQ beside dV);
        # run 17: variant 17 (variant 13 with a quarter of the exponentials on the FMA
        # pipe), 18 (half of them; tested, no longer timed); the default stays 13
        # run 18: 19 (L/D permuted in shared memory), 20 (dQ by red.global from the registers),
        # 21 (both), 22 (the default with the scalar pre/conversion kernels), 23 (conflict-free
        # dQ staging), 24 (+ per-warp dQ reductions), 25 (dV before the dP wait, float32 dS from
        # the packed P), 26 (23 + 24 + 25), 27 (dQ per warpgroup over its own keys, no
        # cross-warpgroup barrier), 28 (27 + warpgroup 1 started half a step late), 29 (28 + 25);
        # see BwdWs128Kernel's kFlags. 16-21, 24, 26 tested only
        if D == 64:
            for name, var in BENCH_BWD_VARIANTS:
                impls[name] = (None, with_variant(ours_fb, var), None)
            # run 18's forward variants (d64; the backward stays the default): 30 tree row max/sum,
            # 31 every 8th key block's exponentials on the FMA pipe, 32 = 30 + 31, 33 30 + every 4th
            for name, var in BENCH_FWD_VARIANTS:
                impls[name] = (with_variant(ours_fwd, var), with_variant(ours_fb, var), None)
        for name, be in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
            qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))

            def f_fwd(be=be):
                with sdpa_kernel(be), torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def f_fb(be=be, qr=qr, kr=kr, vr=vr):
                with sdpa_kernel(be):
                    oo = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
                oo.sum().backward()

            impls[name] = (f_fwd, f_fb, [qr, kr, vr])
        for mode in modes:
            mult = 1.0 if mode == "fwd" else 3.5
            res = {}
            for rep in range(BENCH_REPEAT):
                for name, (ff, fb, g) in impls.items():
                    fn = ff if mode == "fwd" else fb
                    if fn is None:
                        continue
                    key = name if BENCH_REPEAT == 1 else f"{name} #{rep + 1}"
                    try:
                        med, lo, hi = do_bench(fn, warmup=25, rep=reps_ms, grad_to_none=g,
                                               quantiles=[0.5, 0.2, 0.8])
                        res[key] = (med, lo, hi)
                    except Exception as e:  # noqa: BLE001
                        print(f"# {name} {mode} failed: {e}")
            cud = [v[0] for k, v in res.items() if k.split(" #")[0] == "sdpa-cudnn"]
            base = sorted(cud)[len(cud) // 2] if cud else float("nan")
            if BENCH_REPEAT > 1:  # the median over the repeats of each implementation's median
                names = dict.fromkeys(k.split(" #")[0] for k in res)
                print(f"# {label} {mode}: median of {BENCH_REPEAT} interleaved medians (ms): " + ", ".join(
                    f"{n} {sorted(v[0] for k, v in res.items() if k.split(' #')[0] == n)[BENCH_REPEAT // 2]:.3f}"
                    for n in names))
            for name, (med, lo, hi) in res.items():
                tf = fwd_flops * mult / (med * 1e-3) / 1e12
                rows.append((label, mode, name, med, lo, hi, tf, med / base))
    print()
    print(f"| case | pass | impl | median ms | [p20, p80] ms | TFLOP/s | time / cuDNN |")
    print(f"|---|---|---|---|---|---|---|")
    for label, mode, name, med, lo, hi, tf, ratio in rows:
        print(f"| {label} | {mode} | {name} | {med:.3f} | [{lo:.3f}, {hi:.3f}] | {tf:.0f} | {ratio:.2f} |")
    return 0


def cmd_profile(fl):
    B, H, S, D = 1, 16, 16384, 64
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    ones = torch.ones_like(q)
    # the default kernels, then the backward variant PROFILE_BWD_VARIANT (default 6: run 9's
    # backward, the default until run 13) so that ncu's first 5 kernels hold both backwards
    for var in (0, int(os.environ.get("PROFILE_BWD_VARIANT", "6"))):
        fl.lib.benchd_flash_set_variant(0, var)
        o, lse = fl.forward(q, k, v, True, 1 / 8)
        fl.backward(q, k, v, o, ones, lse, True, 1 / 8)
    fl.lib.benchd_flash_set_variant(0, 0)
    q, k, v = (torch.randn(B, H, S, 128, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    fl.forward(q, k, v, True, 128 ** -0.5)
    torch.cuda.synchronize()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["test", "bench", "profile"])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rep-ms", type=int, default=300)
    a = ap.parse_args()
    fl = Flash(a.lib)
    if a.cmd == "test":
        return cmd_test(fl)
    if a.cmd == "bench":
        return cmd_bench(fl, a.rep_ms)
    return cmd_profile(fl)


if __name__ == "__main__":
    sys.exit(main())
