#!/usr/bin/env python3
"""Summarise an ncu source page (run_gpu.sh NCU_SRC=1: `--page source --csv --print-source sass`)
of one BwdWs128Kernel launch: shared-memory wavefronts per 128 x 128 step and CTA by opcode, and
the warps' stall samples per region of the main loop (the regions are found from the SASS:
the first Sᵀ HGMMA of the loop, the P loop after the Sᵀ wait, the STSM of dSᵀ, the dV issue, the
dQ/dK issue, the dQ staging and the loop's end).

    python3 ncu_source_summary.py source.csv [--steps N] [--annotate]

--steps: 128 x 128 steps over all CTAs (default: the leaderboard case, 16 heads x 8256, the causal
triangle of 128 key tiles).
"""
import argparse
import collections
import csv
import gzip


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        rows = list(csv.reader(f))
    hdr = rows[1]
    return {h: i for i, h in enumerate(hdr)}, rows[2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=float, default=16 * 8256)
    ap.add_argument("--annotate", action="store_true", help="print every instruction with its samples")
    a = ap.parse_args()
    idx, data = load(a.csv)

    def f(r, k):
        try:
            return float(r[idx[k]].replace(",", ""))
        except (KeyError, ValueError):
            return 0.0

    def opcode(r):
        w = r[idx["Source"]].split()
        if w and w[0].startswith("@"):
            w = w[1:]
        return w[0] if w else ""

    stalls = [h for h in idx if h.startswith("stall_") and "Not" not in h]
    tot = sum(f(r, "Warp Stall Sampling (All Samples)") for r in data)
    wf, ex = collections.Counter(), collections.Counter()
    for r in data:
        wf[opcode(r)] += f(r, "L1 Wavefronts Shared")
        ex[opcode(r)] += f(r, "L1 Wavefronts Shared Excessive")
    print(f"# shared-memory wavefronts per step and CTA ({a.steps:.0f} steps)")
    for o, v in wf.most_common():
        if v > 0:
            print(f"  {o:28s} {v / a.steps:8.1f}  excessive {ex[o] / a.steps:6.1f}")
    print(f"  {'total':28s} {sum(wf.values()) / a.steps:8.1f}")
    # region starts: instruction indices of landmarks in the loop
    src = [r[idx["Source"]] for r in data]
    hot = [i for i, r in enumerate(data) if f(r, "Instructions Executed") / a.steps > 4]

    def first(pred, start=0):
        for i in hot:
            if i >= (start or 0) and pred(src[i]):
                return i
        return None

    marks = []
    s_issue = first(lambda x: "HGMMA.64x128x16" in x)
    if s_issue is not None:
        top = first(lambda x: "SYNCS.PHASECHK" in x)
        marks.append(("top wait, Sᵀ/dPᵀ issue, Sᵀ wait", min(top, s_issue) if top is not None else s_issue))
        p_loop = first(lambda x: "WARPGROUP.DEPBAR.LE gsb0, 0x1" in x, s_issue)
        marks.append(("P loop", p_loop + 1))
        ds = first(lambda x: "WARPGROUP.DEPBAR.LE gsb0, 0x0" in x, p_loop + 1)
        marks.append(("dS (dPᵀ wait, dS, STSM)", ds))
        dv = first(lambda x: "WARPGROUP.ARRIVE" in x, first(lambda x: "STSM" in x, ds) or ds)
        marks.append(("dV issue, dSᵀ barrier", dv))
        bar = first(lambda x: "BAR.SYNC" in x and "0x100" in x, dv) or first(
            lambda x: "BAR.SYNC" in x, dv)
        marks.append(("dQ/dK issue, dQ wait", (bar + 1) if bar is not None else dv))
        dqw = first(lambda x: "WARPGROUP.DEPBAR.LE gsb0, 0x1" in x, marks[-1][1])
        marks.append(("dQ staging, reduction", dqw + 1))
        end = first(lambda x: "WARPGROUP.DEPBAR.LE gsb0, 0x0" in x, dqw + 1) or dqw + 1
        marks.append(("loop end (dK wait)", end))
        after = next((i for i in range(end + 1, len(data))
                      if f(data[i], "Instructions Executed") / a.steps < 4), len(data))
        marks.append(("after the loop (epilogue, producer)", after))
    marks = [("prologue", 0)] + [(n, i) for n, i in marks if i is not None]
    marks.sort(key=lambda m: m[1])
    print("# stall samples per region (% of all samples), warp instructions per step, top stalls")
    for k, (name, start) in enumerate(marks):
        stop = marks[k + 1][1] if k + 1 < len(marks) else len(data)
        seg = data[start:stop]
        s = sum(f(r, "Warp Stall Sampling (All Samples)") for r in seg)
        ins = sum(f(r, "Instructions Executed") for r in seg) / a.steps
        st = collections.Counter()
        for r in seg:
            for h in stalls:
                st[h[6:]] += f(r, h)
        top = " ".join(f"{h}:{v / tot * 100:.1f}" for h, v in st.most_common(4))
        print(f"  {name:36s} [{start:4d},{stop:4d}) {s / tot * 100:5.1f}%  {ins:7.1f} instr  {top}")
    tst = collections.Counter()
    for r in data:
        for h in stalls:
            tst[h[6:]] += f(r, h)
    print("# all stalls: " + " ".join(f"{h}:{v / tot * 100:.1f}" for h, v in tst.most_common(10)))
    if a.annotate:
        for i, r in enumerate(data):
            s = f(r, "Warp Stall Sampling (All Samples)")
            top = sorted(((f(r, h), h[6:]) for h in stalls), reverse=True)[:3]
            mark = (f"{s / tot * 100:5.2f}% " + " ".join(f"{h}:{v / tot * 100:.2f}" for v, h in top if v > 0)
                    if s > 0 else "")
            print(f"{i:5d} {f(r, 'Instructions Executed') / a.steps:7.2f} {src[i].strip()[:80]:80s} {mark}")


if __name__ == "__main__":
    main()
