"""Each plot renders (Agg) with the axes, series and labels it promises, and
draws the numbers it was given."""
from __future__ import annotations

import json
import os
import pickle

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import benchd  # noqa: E402
from benchd import plots  # noqa: E402
from benchd.v1 import bench_pb2 as pb  # noqa: E402
from conftest import FIXTURES  # noqa: E402


def render(fig: Figure) -> None:
    assert isinstance(fig, Figure)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    w, h = canvas.get_width_height()
    assert w > 100 and h > 100


def bars(ax: matplotlib.axes.Axes) -> list[BarContainer]:
    return [c for c in ax.containers if isinstance(c, BarContainer)]


def legend(ax: matplotlib.axes.Axes) -> list[str]:
    leg = ax.get_legend()
    assert leg is not None
    return [t.get_text() for t in leg.get_texts()]


def benchmarks(results: dict[str, benchd.Job]) -> list[benchd.BenchmarkResult]:
    return [results[k].result for k in ("tiny-fp32", "tiny-bf16", "custom-fp32", "custom-bf16")]


def test_step_time_by_phase(results: dict[str, benchd.Job]) -> None:
    rs = benchmarks(results)
    fig = plots.step_time_by_phase([r for r in rs if r.spec.precision == pb.PRECISION_FP32])
    render(fig)
    (ax,) = fig.axes
    assert ax.get_title() == "Step time by phase and model size"
    assert ax.get_ylabel() == "median time per step (ms)" and ax.get_xlabel() == "model"
    labels = legend(ax)
    assert labels[:3] == ["forward (median)", "backward (median)", "optimizer (median)"]
    assert labels[-1] == "step (median)"
    # Medians do not add up: what the phases' medians leave of the step's is
    # its own segment, labelled as such, never a silent gap under the marker.
    assert set(labels[3:-1]) <= {"rest of the step (median step − phases)"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tiny", "d32xL1"]
    fwd, bwd, opt = bars(ax)[:3]
    tiny = next(r for r in rs if r.spec.model.preset == "tiny" and
                r.spec.precision == pb.PRECISION_FP32)
    assert fwd.patches[0].get_height() == pytest.approx(tiny.proto.forward.median * 1e3)
    assert bwd.patches[0].get_y() == pytest.approx(tiny.proto.forward.median * 1e3)
    assert opt.patches[0].get_height() == pytest.approx(tiny.proto.optimizer.median * 1e3)
    # Both precisions at once: one bar per model x precision.
    fig2 = plots.step_time_by_phase(rs)
    labels = [t.get_text() for t in fig2.axes[0].get_xticklabels()]
    assert labels == ["tiny\nbf16", "tiny\nfp32", "d32xL1\nbf16", "d32xL1\nfp32"]


def test_precision_speedup(results: dict[str, benchd.Job]) -> None:
    rs = benchmarks(results)
    fig = plots.precision_speedup(rs)
    render(fig)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "speed-up over fp32 (x)"
    assert "speed-up" in ax.get_title()
    assert legend(ax) == ["bf16"]
    (bf16,) = bars(ax)
    med = {(r.spec.model.preset or "custom", r.spec.precision): r.proto.step.median for r in rs}
    want = med[("tiny", pb.PRECISION_FP32)] / med[("tiny", pb.PRECISION_BF16)]
    assert bf16.patches[0].get_height() == pytest.approx(want)
    assert len(bf16.patches) == 2
    with pytest.raises(benchd.ArgumentError, match="baseline"):
        plots.precision_speedup(rs, baseline="fp16")


def synthetic_collective() -> benchd.CollectiveResult:
    """Gloo and NCCL at 2 and 4 ranks, 1 and 4 MiB: what a GPU node reports."""
    rows = []
    for backend, base in ((pb.COLLECTIVE_BACKEND_GLOO, 10.0), (pb.COLLECTIVE_BACKEND_NCCL, 1.0)):
        for world in (2, 4):
            for size in (1 << 20, 4 << 20):
                ms = base * world * size / (1 << 20)
                rows.append(pb.CollectiveRow(backend=backend, world_size=world, size_bytes=size,
                                             duration=pb.Stats(median=ms / 1e3)))
    proto = pb.CollectiveResult(spec=pb.CollectiveSpec(op=pb.COLLECTIVE_OP_ALL_REDUCE),
                                rows=rows)
    return benchd.CollectiveResult(proto, "7")


def test_collective_vs_size(results: dict[str, benchd.Job]) -> None:
    real = results["collective"].result
    fig = plots.collective_vs_size(real)
    render(fig)
    bw, ax = fig.axes
    # Bus bandwidth first, as nccl-tests users read it; the duration below.
    assert bw.get_ylabel() == "bus bandwidth (GB/s)"
    assert bw.get_title() == "all_reduce bus bandwidth vs data size"
    (bw_line,) = bw.get_lines()
    assert list(bw_line.get_ydata()) == pytest.approx([r.busbw_gbps for r in real.proto.rows])
    assert ax.get_xlabel() == "message size (bytes)" and ax.get_ylabel() == "median duration (ms)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    (line,) = ax.get_lines()
    assert line.get_label() == "gloo x2"
    assert list(line.get_xdata()) == [4096, 65536]
    assert list(line.get_ydata()) == pytest.approx([r.duration.median * 1e3
                                                    for r in real.proto.rows])
    assert not fig.texts  # every series ran every size
    fig2 = plots.collective_vs_size(synthetic_collective())
    assert sorted(legend(fig2.axes[0])) == ["gloo x2", "gloo x4", "nccl x2", "nccl x4"]


def test_collective_vs_size_thins_ticks_and_names_sizes_left_out() -> None:
    rows = []
    sizes = [1024 << i for i in range(21)]  # 1 KiB .. 1 GiB
    for world in (2, 4):
        for size in sizes[:-1] if world == 4 else sizes:  # x4 did not run 1 GiB
            rows.append(pb.CollectiveRow(backend=pb.COLLECTIVE_BACKEND_NCCL, world_size=world,
                                         size_bytes=size, busbw_gbps=100.0,
                                         duration=pb.Stats(median=size / 1e11)))
    proto = pb.CollectiveResult(spec=pb.CollectiveSpec(op=pb.COLLECTIVE_OP_ALL_REDUCE),
                                rows=rows)
    fig = plots.collective_vs_size(benchd.CollectiveResult(proto, "8"))
    render(fig)
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert 2 <= len(labels) <= 8 and labels[0] == "1 KiB" and labels[-1] == "1 GiB", labels
    (note,) = fig.texts
    assert note.get_text() == "not run: nccl x4: 1 GiB"


def test_collective_vs_world_size() -> None:
    fig = plots.collective_vs_world_size(synthetic_collective(), backend="nccl")
    render(fig)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "processes (world size)"
    assert ax.get_title() == "all_reduce duration vs number of processes (nccl)"
    lines = ax.get_lines()
    assert [l.get_label() for l in lines] == ["1 MiB", "4 MiB"]
    assert list(lines[0].get_xdata()) == [2, 4]
    assert list(lines[1].get_ydata()) == pytest.approx([8.0, 16.0])  # 1.0 x world x 4


def test_collective_backend_comparison() -> None:
    fig = plots.collective_backend_comparison(synthetic_collective())
    render(fig)
    (ax,) = fig.axes
    assert ax.get_title() == "all_reduce backend comparison, 4 processes"
    assert legend(ax) == ["gloo", "nccl"]
    gloo, nccl = bars(ax)
    assert [p.get_height() for p in gloo.patches] == pytest.approx([40.0, 160.0])
    assert [p.get_height() for p in nccl.patches] == pytest.approx([4.0, 16.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1 MiB", "4 MiB"]


def test_memory_timeline_matches_the_fixtures_figures() -> None:
    with open(os.path.join(FIXTURES, "snapshot.pickle"), "rb") as f:
        snap = benchd.load_snapshot(f.read())
    with open(os.path.join(FIXTURES, "expected.json")) as f:
        expected = json.load(f)
    series = plots.memory_timeline_series(snap)
    assert len(series) == expected["entries"]
    assert series["allocated_bytes"].max() == expected["peak_allocated"]
    assert series["reserved_bytes"].max() == expected["peak_reserved"]
    for phase, figures in expected["phases"].items():
        assert series[series["phase"] == phase]["allocated_bytes"].max() == \
            figures["peak_allocated"]
    fig = plots.memory_timeline(snap)
    render(fig)
    (ax,) = fig.axes
    assert ax.get_title() == "Active memory timeline"
    assert ax.get_ylabel() == "memory (MiB)" and ax.get_xlabel() == "allocator event"
    peak_mib = expected["peak_allocated"] / (1 << 20)
    assert legend(ax) == ["allocated", "reserved", f"peak {peak_mib:.1f} MiB"]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("forward") == 2 and texts.count("backward") == 2
    assert texts.count("optimizer_step") == 2  # two recorded steps
    reserved = next(l for l in ax.get_lines() if l.get_label() == "reserved")
    assert max(reserved.get_ydata()) == pytest.approx(expected["peak_reserved"] / (1 << 20))
    with open(os.path.join(FIXTURES, "snapshot.pickle"), "rb") as f:
        assert pickle.load(f) == snap  # the safe reader reads what pickle reads


def test_load_snapshot_refuses_objects() -> None:
    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, ("true",))
    with pytest.raises(pickle.UnpicklingError, match="only plain data"):
        benchd.load_snapshot(pickle.dumps({"segments": Evil()}))


def test_kernel_time_share(results: dict[str, benchd.Job]) -> None:
    r = results["profile"].result
    fig = plots.kernel_time_share(r, ranges=["step", "forward"], top=3)
    render(fig)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "share of the range's kernel time (%)"
    assert ax.get_title() == "Top 3 kernels per range (operator self time)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["step", "forward"]
    labels = legend(ax)
    assert labels[-1] == "other"
    df = r.to_pandas()
    top_step = df[df["range"] == "step"].sort_values("total_ms", ascending=False)["kernel"]
    assert labels[0] == top_step.iloc[0][:48] or labels[0].endswith("…")
    # Every range's bar adds up to 100 %.
    totals = [0.0, 0.0]
    for c in bars(ax):
        for i, p in enumerate(c.patches):
            totals[i] += p.get_width()
    assert totals == pytest.approx([100.0, 100.0], abs=0.6)
    with pytest.raises(benchd.ArgumentError):
        plots.kernel_time_share(r, ranges=["nope"])


def test_plots_refuse_the_wrong_result(results: dict[str, benchd.Job]) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="BenchmarkResult"):
        plots.step_time_by_phase(results["collective"])
