"""to_pandas(): one row per step / kernel / memory run / size, units in the
column names, values the result's own (converted)."""
from __future__ import annotations

import pandas as pd
import pytest

import benchd
from benchd.v1 import bench_pb2 as pb


def test_benchmark_frame(results: dict[str, benchd.Job]) -> None:
    r = results["tiny-fp32"].result
    df = r.to_pandas()
    assert len(df) == len(r.proto.steps) == 4  # 1 warm-up + 3 measured
    for col in ("step", "warmup", "step_ms", "host_ms", "forward_ms", "backward_ms",
                "optimizer_ms", "loss", "model", "mode", "precision", "batch_size",
                "context_length", "job_id"):
        assert col in df.columns, col
    assert df["warmup"].tolist() == [True, False, False, False]
    assert df["step_ms"].tolist() == pytest.approx([s.step_seconds * 1e3 for s in r.proto.steps])
    assert set(df["mode"]) == {"train_step"} and set(df["model"]) == {"tiny"}
    assert (df["optimizer_ms"] > 0).all()  # train_step has an optimizer phase
    stats = r.stats()
    assert stats["phase"].tolist()[:2] == ["step", "forward"]
    med = stats.set_index("phase").loc["step", "median_ms"]
    assert med == pytest.approx(r.median_step_ms)
    assert med == pytest.approx(df[~df["warmup"]]["step_ms"].median())
    html = r._repr_html_()
    assert "median step ms" in html and "<table" in html
    # The daemon's noise verdict rides along (3 measured steps: too few to judge).
    assert "iqr_ms" in stats.columns and "noise_warning" in stats.columns
    assert stats.set_index("phase").loc["step", "noise_warning"] == ""
    assert r.noise_warnings == []
    noisy = benchd.BenchmarkResult(pb.BenchmarkResult(), "7")
    noisy.proto.step.noise_warning = "interquartile range is 31.0% of the median (over 25%)"
    assert noisy.noise_warnings == ["step: interquartile range is 31.0% of the median (over 25%)"]
    assert "interquartile range is 31.0%" in noisy._repr_html_()


def test_profile_frames(results: dict[str, benchd.Job]) -> None:
    r = results["profile"].result
    df = r.to_pandas()
    assert len(df) == sum(len(x.kernels) for x in r.proto.ranges) > 0
    for col in ("range", "kernel", "gemm", "time_percent", "total_ms", "instances", "avg_us",
                "med_us", "ms_per_step"):
        assert col in df.columns, col
    step = df[df["range"] == "step"]
    assert step["time_percent"].sum() == pytest.approx(100.0, abs=0.5)  # CPU rows add up
    top = r.top_kernels("step", 3)
    assert len(top) == 3 and top["total_ms"].is_monotonic_decreasing
    ranges = r.ranges()
    assert ranges["range"].tolist() == r.range_names
    assert {"wall_ms", "kernel_ms", "idle_fraction", "gemm_fraction"} <= set(ranges.columns)
    with pytest.raises(benchd.ArgumentError):
        r.top_kernels("nope")


def test_collective_frame(results: dict[str, benchd.Job]) -> None:
    r = results["collective"].result
    df = r.to_pandas()
    assert df["bytes"].tolist() == [4096, 65536]
    for col in ("backend", "world_size", "median_ms", "p99_ms", "algbw_gbps", "busbw_gbps",
                "wrong_elements"):
        assert col in df.columns, col
    assert df["median_ms"].tolist() == pytest.approx([x.duration.median * 1e3
                                                      for x in r.proto.rows])
    assert set(df["backend"]) == {"gloo"} and set(df["world_size"]) == {2}
    assert "wrong elements" in r._repr_html_()


def test_memory_frames_from_a_result_message() -> None:
    # No CUDA here: a MemoryResult as the daemon would send one, two runs.
    step = pb.BenchmarkSpec(mode=pb.BENCHMARK_MODE_FORWARD, precision=pb.PRECISION_BF16,
                            batch_size=4, context_length=128,
                            model=pb.ModelConfig(preset="small", d_model=768))
    proto = pb.MemoryResult(device="cuda:0", runs=[
        pb.MemoryRun(name="ctx128-forward-bf16", step=step, peak_allocated_bytes=3 << 30,
                     phases=[pb.MemoryPhase(name="forward", peak_allocated_bytes=3 << 30)],
                     largest_allocations=[pb.MemoryAllocation(size_bytes=1 << 28, count=2,
                                                              phase="forward", origin="x.cc:1")],
                     snapshot_artifact="memory-ctx128-forward-bf16.pickle"),
        pb.MemoryRun(name="ctx256-forward-bf16", step=step, out_of_memory=True,
                     out_of_memory_message="CUDA out of memory")])
    r = benchd.MemoryResult(proto, "9")
    df = r.to_pandas()
    assert df["run"].tolist() == r.run_names and len(df) == 2
    assert df["peak_allocated_bytes"].tolist() == [3 << 30, 0]
    assert df["out_of_memory"].tolist() == [False, True]
    assert {"precision", "context_length", "max_memory_allocated_bytes"} <= set(df.columns)
    assert r.phases()["phase"].tolist() == ["forward"]
    assert r.allocations()["bytes"].tolist() == [1 << 28]


def test_job_list_frame_and_records(client: benchd.Client, results: dict[str, benchd.Job]) -> None:
    df = client.jobs(limit=5).to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == 5
    assert df["created"].notna().all()
    bench = df[df["kind"] == "benchmark"]
    assert bench["median_step_ms"].notna().all()
