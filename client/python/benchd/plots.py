"""The plots of the CS336 systems write-ups, from benchd's results (needs
matplotlib: pip install 'benchd[plot]'). Each returns a matplotlib Figure and
draws nothing on screen by itself (Jupyter shows a returned Figure).

    step_time_by_phase(results)          forward / backward / optimizer ms per model size
    precision_speedup(results)           bf16/fp16 speed-up over fp32 per model size
    collective_vs_size(results)          duration vs message size, one line per backend x world size
    collective_vs_world_size(results)    duration vs number of processes, one line per size
    collective_backend_comparison(res)   duration per size, one bar per backend
    memory_timeline(snapshot)            the allocator's active memory over the recorded steps
    kernel_time_share(profile)           each range's kernel time split by its top kernels
    ddp_timeline(ddp)                    each run's profiled step per rank: compute and communication

`results` is a BenchmarkResult / CollectiveResult, a Job holding one, a list
of them, or the DataFrame their to_pandas()/summary() rows make.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pandas as pd

from ._errors import ArgumentError, ArgumentTypeError, BenchdError
from ._results import BenchmarkResult, CollectiveResult, DdpResult, ProfileResult, frame

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["step_time_by_phase", "precision_speedup", "collective_vs_size",
           "collective_vs_world_size", "collective_backend_comparison", "memory_timeline",
           "memory_timeline_series", "kernel_time_share", "benchmark_summary", "ddp_timeline"]

MiB = float(1 << 20)
PRESET_ORDER = ["tiny", "mini", "small", "medium", "large", "xl", "2.7B"]
PRECISION_ORDER = ["fp32", "bf16", "fp16"]


def _figure(width: float = 7.0, height: float = 4.2) -> tuple["Figure", "Axes"]:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("benchd.plots needs matplotlib: pip install 'benchd[plot]'") from e
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _results(obj: object, cls: type, what: str) -> list[Any]:
    """Results of type cls from a result, a Job, or a list of either."""
    items: Iterable[object] = obj if isinstance(obj, (list, tuple)) else [obj]
    out = []
    for x in items:
        r = x
        if not isinstance(r, cls) and hasattr(r, "result") and not isinstance(r, pd.DataFrame):
            r = getattr(r, "result")
        if not isinstance(r, cls):
            raise ArgumentTypeError(what, x, f"{cls.__name__}, a Job holding one, a list of "
                                    "them, or a DataFrame",
                                    f"{what}: expected {cls.__name__} (or a Job holding one, a "
                                    f"list of them, or a DataFrame), got {type(x).__name__}")
        out.append(r)
    if not out:
        raise ArgumentError(what, obj, "at least one result", f"{what}: no results to plot")
    return out


def _model_label(row: Mapping[Any, Any]) -> str:
    if row["model"] != "custom":
        return str(row["model"])
    return f"d{row['d_model']}xL{row['num_layers']}"


def _order(labels: Iterable[str], frame: pd.DataFrame) -> list[str]:
    """Model labels by size (preset order, then parameters)."""
    uniq = list(dict.fromkeys(labels))
    params = frame.groupby("label")["parameters"].max().to_dict() if "parameters" in frame else {}

    def key(label: str) -> tuple[int, float, str]:
        if label in PRESET_ORDER:
            return (0, PRESET_ORDER.index(label), label)
        return (1, float(params.get(label, 0)), label)
    return sorted(uniq, key=key)


def benchmark_summary(results: object) -> pd.DataFrame:
    """One row per benchmark (BenchmarkResult.summary()), with a 'label' per
    model size: the DataFrame the benchmark plots draw from."""
    df: pd.DataFrame
    if isinstance(results, pd.DataFrame):
        df = results.copy()
    else:
        df = pd.DataFrame([r.summary() for r in _results(results, BenchmarkResult, "results")])
    if "label" not in df:
        df["label"] = [_model_label(r) for r in df.to_dict("records")]
    return df


def step_time_by_phase(results: object, *, mode: str | None = None,
                       precision: str | None = None) -> "Figure":
    """Median forward, backward and optimizer time per step, stacked, one bar
    per model size (and per mode when several ran: 'small\\ntrain_step').
    mode / precision: keep only those rows."""
    df = benchmark_summary(results)
    if mode is not None:
        df = df[df["mode"] == mode]
    if precision is not None:
        df = df[df["precision"] == precision]
    if df.empty:
        raise ArgumentError("results", mode or precision, "rows matching the filters",
                            "results: nothing left to plot after the mode/precision filters")
    several_modes = df["mode"].nunique() > 1
    several_precisions = df["precision"].nunique() > 1
    df = df.assign(bar=[
        r["label"] + (f"\n{r['mode']}" if several_modes else "")
        + (f"\n{r['precision']}" if several_precisions else "") for r in df.to_dict("records")])
    order = _order(df["label"], df)
    df = df.assign(_o=[order.index(x) for x in df["label"]]).sort_values(["_o", "mode", "precision"])
    g = df.groupby("bar", sort=False)[["forward_ms", "backward_ms", "optimizer_ms", "step_ms"]].median()
    fig, ax = _figure()
    bottom = [0.0] * len(g)
    x = list(range(len(g)))
    handles: list[Any] = []
    for phase, color in (("forward", "#4c72b0"), ("backward", "#dd8452"),
                         ("optimizer", "#55a868")):
        values = [float(v) for v in g[f"{phase}_ms"]]
        if phase != "forward" and not any(values):
            continue
        handles.append(ax.bar(x, values, bottom=bottom, label=f"{phase} (median)", color=color))
        bottom = [b + v for b, v in zip(bottom, values)]
    # Medians do not add up: the step's median is its own series (the phases
    # are timed apart, and the step holds what lies between them: the loss,
    # zero_grad, the synchronisation). The gap is drawn as such, not hidden.
    steps = [float(v) for v in g["step_ms"]]
    rest = [max(0.0, s - b) for s, b in zip(steps, bottom)]
    if any(rest):
        handles.append(ax.bar(x, rest, bottom=bottom, color="#cccccc", hatch="//",
                              label="rest of the step (median step − phases)"))
    handles += ax.plot(x, steps, linestyle="none", marker="_", markersize=18, color="black",
                       label="step (median)")
    ax.set_xticks(x, list(g.index))
    ax.set_xlabel("model")
    ax.set_ylabel("median time per step (ms)")
    ax.set_title("Step time by phase and model size")
    ax.legend(handles=handles)
    ax.text(0.01, 0.99, "each bar: the phase's own median; marker: the step's median",
            transform=ax.transAxes, fontsize=7, va="top")
    return fig


def precision_speedup(results: object, *, baseline: str = "fp32",
                      mode: str | None = None) -> "Figure":
    """Speed-up of each precision over `baseline` (median step time of the
    baseline / of the precision), grouped bars per model size."""
    df = benchmark_summary(results)
    if mode is not None:
        df = df[df["mode"] == mode]
    if baseline not in set(df["precision"]):
        raise ArgumentError("baseline", baseline, sorted(set(df["precision"])),
                            f"baseline: no {baseline} results to compare with; have "
                            f"{', '.join(sorted(set(df['precision'])))}")
    med = df.groupby(["label", "precision"])["step_ms"].median()
    labels = [m for m in _order(df["label"], df) if (m, baseline) in med.index]
    others = [p for p in PRECISION_ORDER + sorted(set(df["precision"]))
              if p != baseline and p in set(df["precision"])]
    others = list(dict.fromkeys(others))
    fig, ax = _figure()
    width = 0.8 / max(1, len(others))
    for i, p in enumerate(others):
        xs, ys = [], []
        for j, m in enumerate(labels):
            if (m, p) in med.index:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(float(med[(m, baseline)] / med[(m, p)]))
        bars = ax.bar(xs, ys, width=width, label=p)
        ax.bar_label(bars, labels=[f"{y:.2f}x" for y in ys], fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(list(range(len(labels))), labels)
    ax.set_xlabel("model")
    ax.set_ylabel(f"speed-up over {baseline} (x)")
    ax.set_title(f"Mixed precision speed-up over {baseline}")
    ax.legend(title="precision")
    return fig


def _collective_frame(results: object) -> pd.DataFrame:
    if isinstance(results, pd.DataFrame):
        return results
    frames = [r.to_pandas() for r in _results(results, CollectiveResult, "results")]
    df: pd.DataFrame = pd.concat(frames, ignore_index=True)
    return df


def _bytes_label(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)} {unit}"
    return f"{int(n)} B"


def _size_ticks(sizes: Sequence[float], most: int = 8) -> list[float]:
    """At most `most` of the sizes, evenly spaced, the first and last kept:
    a 1 KiB .. 1 GiB doubling sweep has 21, too many labels to read."""
    ticks = sorted(set(sizes))
    if len(ticks) <= most:
        return ticks
    step = -(-(len(ticks) - 1) // (most - 1))  # ceil
    kept = ticks[::step]
    if kept[-1] != ticks[-1]:
        kept.append(ticks[-1])
    return kept


def _left_out(df: pd.DataFrame) -> list[str]:
    """'nccl x4: 1 GiB' for each size some series has and another lacks
    (a size that did not fit, or a world size that ran fewer sizes)."""
    every = set(df["bytes"])
    out = []
    for (backend, world), g in df.groupby(["backend", "world_size"], sort=True):
        missing = sorted(every - set(g["bytes"]))
        if missing:
            out.append(f"{backend} x{world}: " + ", ".join(_bytes_label(m) for m in missing))
    return out


def collective_vs_size(results: object) -> "Figure":
    """Bus bandwidth against message size (as nccl-tests users read it), one
    line per backend and world size; below it the median duration (log-log).
    Sizes one series lacks and another has are named under the plot."""
    df = _collective_frame(results)
    fig, bw = _figure(7.0, 6.4)
    bw.remove()
    bw, dur = fig.subplots(2, 1, sharex=True)
    for (backend, world), g in df.groupby(["backend", "world_size"], sort=True):
        m = g.groupby("bytes")[["busbw_gbps", "median_ms"]].median().sort_index()
        x = [float(v) for v in m.index]
        label = f"{backend} x{world}"
        bw.plot(x, [float(v) for v in m["busbw_gbps"]], marker="o", label=label)
        dur.plot(x, [float(v) for v in m["median_ms"]], marker="o", label=label)
    dur.set_xscale("log", base=2)
    dur.set_yscale("log")
    ticks = _size_ticks([float(b) for b in df["bytes"]])
    dur.set_xticks(ticks, [_bytes_label(t) for t in ticks], rotation=30)
    dur.set_xlabel("message size (bytes)")
    dur.set_ylabel("median duration (ms)")
    bw.set_ylabel("bus bandwidth (GB/s)")
    bw.set_title(f"{_ops(df)} bus bandwidth vs data size")
    bw.legend(title="backend x processes")
    left_out = _left_out(df)
    if left_out:
        fig.text(0.01, 0.0, "not run: " + "; ".join(left_out), fontsize=8, va="bottom")
    return fig


def _ops(df: pd.DataFrame) -> str:
    return "/".join(sorted(set(df["op"]))) if "op" in df else "collective"


def collective_vs_world_size(results: object, *, backend: str | None = None) -> "Figure":
    """Median duration against the number of processes, one line per message
    size (and backend, unless one is chosen)."""
    df = _collective_frame(results)
    if backend is not None:
        df = df[df["backend"] == backend]
    fig, ax = _figure()
    several = df["backend"].nunique() > 1
    for (b, size), g in df.groupby(["backend", "bytes"], sort=True):
        m = g.groupby("world_size")["median_ms"].median().sort_index()
        label = _bytes_label(float(str(size))) + (f" ({b})" if several else "")
        ax.plot([int(v) for v in m.index], [float(v) for v in m.values], marker="o", label=label)
    ax.set_xticks(sorted(set(int(w) for w in df["world_size"])))
    ax.set_yscale("log")
    ax.set_xlabel("processes (world size)")
    ax.set_ylabel("median duration (ms)")
    title_backend = f" ({backend})" if backend else ""
    ax.set_title(f"{_ops(df)} duration vs number of processes{title_backend}")
    ax.legend(title="message size")
    return fig


def collective_backend_comparison(results: object, *, world_size: int | None = None) -> "Figure":
    """Median duration per message size, one bar per backend, at one world
    size (default: the largest every backend ran)."""
    df = _collective_frame(results)
    if world_size is None:
        common = set.intersection(*(set(g["world_size"]) for _, g in df.groupby("backend")))
        world_size = int(max(common)) if common else int(df["world_size"].max())
    df = df[df["world_size"] == world_size]
    sizes = sorted(set(df["bytes"]))
    backends = sorted(set(df["backend"]))
    fig, ax = _figure()
    width = 0.8 / max(1, len(backends))
    for i, b in enumerate(backends):
        g = df[df["backend"] == b].groupby("bytes")["median_ms"].median()
        xs = [j - 0.4 + width * (i + 0.5) for j, s in enumerate(sizes) if s in g.index]
        ax.bar(xs, [float(g[s]) for s in sizes if s in g.index], width=width, label=b)
    ax.set_xticks(list(range(len(sizes))), [_bytes_label(s) for s in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel("median duration (ms)")
    ax.set_title(f"{_ops(df)} backend comparison, {world_size} processes")
    ax.legend(title="backend")
    return fig


def memory_timeline_series(snapshot: Mapping[str, Any], device: int = 0) -> pd.DataFrame:
    """The active memory timeline as memory_viz counts it: one row per trace
    event (x = its index), allocated_bytes (alloc adds, free_completed takes
    away, from what was resident when recording began) and reserved_bytes
    (segment_alloc / segment_free), with the phase open at that event."""
    if not isinstance(snapshot, Mapping) or "device_traces" not in snapshot:
        raise ArgumentTypeError("snapshot", snapshot, "a snapshot dict (Job.memory_snapshot())",
                                "snapshot: expected the dict Job.memory_snapshot() returns "
                                "(segments, device_traces, ...)")
    traces = snapshot["device_traces"]
    if device >= len(traces):
        raise ArgumentError("device", device, [str(i) for i in range(len(traces))])
    trace = traces[device]
    segs = [s for s in snapshot.get("segments", []) if s.get("device", 0) == device]
    final_alloc = sum(b.get("requested_size", 0) for s in segs for b in s.get("blocks", [])
                      if str(b.get("state", "")).startswith("active"))
    final_reserved = sum(s.get("total_size", 0) for s in segs)
    net_alloc = net_reserved = 0
    for e in trace:
        a = e.get("action")
        if a == "alloc":
            net_alloc += e["size"]
        elif a == "free_completed":
            net_alloc -= e["size"]
        elif a == "segment_alloc":
            net_reserved += e["size"]
        elif a == "segment_free":
            net_reserved -= e["size"]
    allocated, reserved = final_alloc - net_alloc, final_reserved - net_reserved
    marks = sorted((a["time_us"], a["stage"], a["name"])
                   for a in snapshot.get("external_annotations", [])
                   if a.get("device", device) == device)
    rows = []
    open_phase = ""
    mi = 0
    for i, e in enumerate(trace):
        while mi < len(marks) and marks[mi][0] <= e.get("time_us", 0):
            _, stage, name = marks[mi]
            open_phase = name if stage == "START" else ("" if open_phase == name else open_phase)
            mi += 1
        a = e.get("action")
        if a == "alloc":
            allocated += e["size"]
        elif a == "free_completed":
            allocated -= e["size"]
        elif a == "segment_alloc":
            reserved += e["size"]
        elif a == "segment_free":
            reserved -= e["size"]
        rows.append({"event": i, "action": a, "bytes": e.get("size", 0),
                     "allocated_bytes": allocated, "reserved_bytes": reserved,
                     "phase": open_phase})
    return frame(rows, ["event", "action", "bytes", "allocated_bytes", "reserved_bytes", "phase"])


PHASE_COLORS = {"forward": "#4c72b0", "backward": "#dd8452", "optimizer_step": "#55a868"}


def memory_timeline(snapshot: Mapping[str, Any], *, device: int = 0,
                    title: str = "Active memory timeline") -> "Figure":
    """Allocated (filled) and reserved (line) memory over the recorded steps,
    the phases shaded and named, the peak dashed, in MiB; x = allocator
    events in trace order, as memory_viz draws it."""
    s = memory_timeline_series(snapshot, device)
    if s.empty:
        raise BenchdError("the snapshot's trace is empty: nothing was recorded")
    fig, ax = _figure(9.0, 4.5)
    x = list(s["event"])
    alloc = [v / MiB for v in s["allocated_bytes"]]
    ax.fill_between(x, alloc, step="post", alpha=0.6, color="#4c72b0", label="allocated")
    ax.step(x, [v / MiB for v in s["reserved_bytes"]], where="post", color="#c44e52",
            label="reserved")
    peak = max(alloc)
    ax.axhline(peak, color="black", linestyle="--", linewidth=0.8,
               label=f"peak {peak:.1f} MiB")
    # Phase spans: consecutive events under one phase.
    start, current = 0, ""
    for i, p in enumerate(list(s["phase"]) + [""]):
        if p != current:
            if current:
                ax.axvspan(start, i, color=PHASE_COLORS.get(current, "grey"), alpha=0.12)
                ax.text((start + i) / 2, peak * 1.02, current, ha="center", va="bottom",
                        fontsize=8)
            start, current = i, p
    ax.set_ylim(0, max(peak, max(s["reserved_bytes"]) / MiB) * 1.12)
    ax.set_xlabel("allocator event")
    ax.set_ylabel("memory (MiB)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    return fig


def ddp_timeline(ddp: object, *, runs: Sequence[str] | None = None) -> "Figure":
    """The write-up's profiler screenshots: for each run (or those named in
    `runs`) and rank, the profiled step's computation (top bar) and
    communication (bottom bar) on one time axis, so overlap shows at a
    glance. `ddp`: a DdpResult or a Job holding one, run with traces."""
    r = _results(ddp, DdpResult, "ddp")[0]
    df = r.timeline()
    if df.empty:
        raise BenchdError("the result has no timelines: the job ran with traces=False")
    order = [x for x in dict.fromkeys(df["run"]) if runs is None or x in runs]
    if runs is not None and (missing := [x for x in runs if x not in order]):
        raise ArgumentError("runs", missing, sorted(set(df["run"])),
                            f"runs: {missing} not among the result's runs with timelines "
                            f"{sorted(set(df['run']))}")
    bars = [(run, rank) for run in order
            for rank in sorted(set(df[df["run"] == run]["rank"]))]
    fig, ax = _figure(10.0, 0.9 + 0.42 * len(bars))
    colors = {"compute": "#3b6fb6", "communication": "#e8871e"}
    for i, (run, rank) in enumerate(bars):
        y = len(bars) - 1 - i
        spans = df[(df["run"] == run) & (df["rank"] == rank)]
        for lane, offset in (("compute", 0.45), ("communication", 0.05)):
            part = spans[spans["lane"] == lane]
            ax.broken_barh(list(zip(part["start_ms"], part["end_ms"] - part["start_ms"])),
                           (y + offset, 0.38), color=colors[lane],
                           label=lane if i == 0 else None)
    ax.set_yticks([len(bars) - 1 - i + 0.45 for i in range(len(bars))],
                  [f"{run} / rank {rank}" for run, rank in bars], fontsize=8)
    ax.set_xlabel("ms from the rank's first activity (one profiled step)")
    ax.set_title(f"{r.world_size} ranks, {r.device_name}: computation and communication")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def kernel_time_share(profile: object, *, ranges: Sequence[str] | None = None,
                      top: int = 5) -> "Figure":
    """Per named range, its kernel time split among its `top` kernels and
    'other' (percent of the range's kernel time), one horizontal bar per range."""
    (p,) = _results(profile, ProfileResult, "profile")[:1]
    df = p.to_pandas()
    names = list(ranges) if ranges is not None else p.range_names
    for r in names:
        if r not in p.range_names:
            raise ArgumentError("ranges", r, p.range_names)
    per_range: dict[str, pd.DataFrame] = {}
    kernels: list[str] = []
    for r in names:
        g = df[df["range"] == r].sort_values("total_ms", ascending=False)
        per_range[r] = g
        kernels += list(g["kernel"].head(top))
    kernels = list(dict.fromkeys(kernels))
    fig, ax = _figure(9.0, 1.2 + 0.45 * len(names))
    left = [0.0] * len(names)
    cmap = _colors(len(kernels))
    for k, color in zip(kernels, cmap):
        shares = []
        for r in names:
            g = per_range[r]
            top_k = set(g["kernel"].head(top))
            shares.append(float(g.loc[g["kernel"] == k, "time_percent"].sum())
                          if k in top_k else 0.0)
        ax.barh(names, shares, left=left, label=_short(k), color=color)
        left = [a + b for a, b in zip(left, shares)]
    other = [max(0.0, 100.0 - v) for v in left]
    ax.barh(names, other, left=left, label="other", color="#d9d9d9")
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the range's kernel time (%)")
    ax.set_ylabel("range")
    source = "operator self time" if p.kernel_source.startswith("cpu") else "kernel time"
    ax.set_title(f"Top {top} kernels per range ({source})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps
    cmap = colormaps["tab20"]
    return [cmap(i % 20) for i in range(n)]

