"""sweep= on the request methods against a real CPU daemon: one job, a
SweepResult whose to_pandas() has one row per cell, pivot(), and the checks
made before any RPC."""
from __future__ import annotations

import math

import pytest

import benchd
from benchd.v1 import bench_pb2 as pb
from conftest import TINY


def test_a_benchmark_sweep_is_one_job_with_a_row_per_cell(client: benchd.Client) -> None:
    job = client.benchmark(**TINY, mode="train_step",
                           sweep={"precision": ["fp32", "bf16"], "context_length": [16, 32]})
    assert [(a.field, list(a.values)) for a in job.spec.sweep.axes] == [
        ("precision", ["fp32", "bf16"]), ("context_length", ["16", "32"])]
    job.wait(timeout=240, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    r = job.result
    assert isinstance(r, benchd.SweepResult)
    assert r.fields == ["precision", "context_length"]
    df = r.to_pandas()
    assert list(df["precision"]) == ["fp32", "fp32", "bf16", "bf16"]
    assert list(df["context_length"]) == ["16", "32", "16", "32"]
    assert list(df["outcome"]) == ["ok"] * 4
    for i, row in df.iterrows():
        cell = r.proto.cells[i]
        b = cell.result.benchmark
        assert row["median_step_ms"] == pytest.approx(b.step.median * 1e3)
        assert row["tokens_per_second"] == pytest.approx(2 * int(row["context_length"]) / b.step.median)
        fp32 = r.proto.cells[0 if row["context_length"] == "16" else 1].result.benchmark
        assert row["speedup_vs_fp32"] == pytest.approx(fp32.step.median / b.step.median)
        assert row["forward_share"] == pytest.approx(b.forward.mean / b.step.mean)
    # A cell's own typed result, and the write-up's layout.
    cell = r.cell_result(3)
    assert isinstance(cell, benchd.BenchmarkResult) and cell.spec.context_length == 32
    p = r.pivot("context_length", "precision")
    assert list(p.columns) == ["fp32", "bf16"] and list(p.index) == ["16", "32"]
    assert p.loc["32", "bf16"] == pytest.approx(df.loc[3, "median_step_ms"])


def test_a_profile_sweeps_its_step(client: benchd.Client) -> None:
    job = client.profile(**TINY, profile_steps=1, sweep={"step.mode": ["forward", "train_step"]})
    job.wait(timeout=240, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    df = job.result.to_pandas()
    assert list(df["step.mode"]) == ["forward", "train_step"]
    assert math.isnan(df.loc[0, "backward_share"]) and df.loc[1, "backward_share"] > 0
    assert isinstance(job.result.cell_result(1), benchd.ProfileResult)


def test_bad_sweeps(client: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="expected a non-empty mapping"):
        client.benchmark(**TINY, sweep=["precision"])  # type: ignore[arg-type]
    with pytest.raises(benchd.ArgumentError, match="cell_timeout: needs sweep"):
        client.benchmark(**TINY, cell_timeout=5)
    with pytest.raises(benchd.InvalidArgument, match=r"sweep\.axes\[0\]\.values\[1\]: 'bf17'"):
        client.benchmark(**TINY, sweep={"precision": "fp32,bf17"})
    assert pb.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY == 2
