"""sweep= on the request methods against a real CPU daemon: one job, a
SweepResult whose to_pandas() has one row per cell with the kind's own
columns, pivot(), the checks made before any RPC, and the columns checked
against what `benchctl get --csv` prints for the same job (the C++ table in
common/sweep_table.cc and the Python one in benchd/_results.py must agree)."""
from __future__ import annotations

import csv
import io
import math
import os
import subprocess

import pytest

import benchd
from benchd import _args as A
from benchd._results import SWEEP_COLUMNS, make_result, sweep_cell_line, sweep_columns
from benchd.v1 import bench_pb2 as pb
from conftest import BIN, TINY, Daemon

# A small attention grid for 2 CPU cores.
ATTENTION = dict(device="cpu:0", batch_size=2, head_dim=16, warmup=1, passes=3)


def benchctl_csv(daemon: Daemon, job_id: str) -> list[dict[str, str]]:
    r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", daemon.address, "get",
                        job_id, "--csv"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    reader = csv.DictReader(io.StringIO(r.stdout))
    rows = list(reader)
    assert reader.fieldnames is not None
    rows.insert(0, {name: name for name in reader.fieldnames})  # the header, first
    return rows


def assert_same_as_benchctl(daemon: Daemon, job: benchd.Job) -> None:
    """to_pandas() has benchctl's CSV columns (by SWEEP_COLUMNS' names and
    scales) and the same figures in every cell."""
    r = job.result
    assert isinstance(r, benchd.SweepResult)
    rows = benchctl_csv(daemon, job.id)
    header, rows = list(rows[0]), rows[1:]
    columns = sweep_columns(r.request_kind)
    assert header == ["job_id", "index", *r.fields, "outcome", *(c.csv for c in columns),
                      "error_code", "error_message"]
    df = r.to_pandas()
    assert list(df.columns) == ["job_id", "index", *r.fields, "outcome",
                                *(c.name for c in columns), "error_code", "error_message"]
    assert len(rows) == len(df)
    for i, row in enumerate(rows):
        assert row["outcome"] == df.loc[i, "outcome"]
        for c in columns:
            got = df.loc[i, c.name]
            if row[c.csv] == "":
                assert math.isnan(got), (c.name, got)
            else:
                assert got == pytest.approx(float(row[c.csv]) * c.scale, rel=1e-12), c.name


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
    # The benchmark's columns as they were, and peak memory as benchctl's --value has it.
    assert list(df.columns) == ["job_id", "index", "precision", "context_length", "outcome",
                                "median_step_ms", "tokens_per_second", "speedup_vs_fp32",
                                "forward_share", "backward_share", "optimizer_share",
                                "peak_memory_mib", "wall_seconds", "error_code", "error_message"]


def test_a_profile_sweeps_its_step(client: benchd.Client) -> None:
    job = client.profile(**TINY, profile_steps=1, sweep={"step.mode": ["forward", "train_step"]})
    job.wait(timeout=240, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    df = job.result.to_pandas()
    assert list(df["step.mode"]) == ["forward", "train_step"]
    assert math.isnan(df.loc[0, "backward_share"]) and df.loc[1, "backward_share"] > 0
    assert isinstance(job.result.cell_result(1), benchd.ProfileResult)
    assert (df["profiler_overhead"] > 0).all()


def test_bad_sweeps(client: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="expected a non-empty mapping"):
        client.benchmark(**TINY, sweep=["precision"])  # type: ignore[arg-type]
    with pytest.raises(benchd.ArgumentError, match="cell_timeout: needs sweep"):
        client.benchmark(**TINY, cell_timeout=5)
    with pytest.raises(benchd.InvalidArgument, match=r"sweep\.axes\[0\]\.values\[1\]: 'bf17'"):
        client.benchmark(**TINY, sweep={"precision": "fp32,bf17"})
    assert pb.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY == 2


def test_an_attention_sweep_has_the_attentions_figures(client: benchd.Client,
                                                      daemon: Daemon) -> None:
    job = client.attention(**ATTENTION, sweep={"seq_len": [32, 64],
                                               "implementation": ["faithful", "math"]})
    assert [(a.field, list(a.values)) for a in job.spec.sweep.axes] == [
        ("seq_len", ["32", "64"]), ("implementation", ["faithful", "math"])]
    job.wait(timeout=240, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    r = job.result
    assert isinstance(r, benchd.SweepResult) and r.request_kind == "attention"
    df = r.to_pandas()
    assert list(df["outcome"]) == ["ok"] * 4
    for i, row in df.iterrows():
        a = r.proto.cells[i].result.attention
        assert a.spec.seq_len == int(row["seq_len"])
        assert row["median_forward_ms"] == pytest.approx(a.forward.median * 1e3) and a.forward.median > 0
        assert row["median_backward_ms"] == pytest.approx(a.backward.median * 1e3)
        assert row["median_step_ms"] == pytest.approx(a.step.median * 1e3)
        assert row["flash_forward_tflops"] == pytest.approx(a.flash_forward_tflops_per_second)
        assert row["flash_backward_tflops"] > 0 and row["flash_step_tflops"] > 0
        assert row["score_matrix_mib"] == pytest.approx(a.score_matrix_bytes / 2**20)
        # Not measured on a CPU: NaN, not 0.
        assert math.isnan(row["saved_activation_mib"]) and math.isnan(row["peak_pass_mib"])
        assert row["wall_seconds"] > 0
    p = r.pivot("seq_len", "implementation")
    assert list(p.index) == ["32", "64"] and list(p.columns) == ["faithful", "math"]
    assert p.loc["64", "math"] == pytest.approx(df.loc[3, "median_step_ms"])
    assert r.pivot("seq_len", "implementation", "flash_forward_tflops").notna().all().all()
    with pytest.raises(ValueError, match="expected one of median_forward_ms, median_backward_ms"):
        r.pivot("seq_len", "implementation", "tokens_per_second")
    assert isinstance(r.cell_result(0), benchd.AttentionResult)
    assert_same_as_benchctl(daemon, job)


def test_every_sweeping_kinds_columns_are_benchctls(client: benchd.Client,
                                                    daemon: Daemon) -> None:
    """A benchmark, a profile and a precision sweep: the Python table and
    benchctl's CSV agree (memory needs CUDA: its table is checked without)."""
    jobs = [client.benchmark(**TINY, sweep={"precision": ["fp32", "bf16"]}),
            client.profile(**TINY, profile_steps=1, sweep={"step.mode": ["forward"]}),
            client.precision(device="cpu:0", sweep={"count": [10, 100]})]
    for job in jobs:
        job.wait(timeout=240, progress=False)
        assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
        assert_same_as_benchctl(daemon, job)
    df = jobs[2].result.to_pandas()
    assert list(df["count"]) == ["10", "100"]
    assert df.loc[0, "fp32_result"] == pytest.approx(0.1, rel=1e-5)
    assert df.loc[1, "fp16_result"] == pytest.approx(1.0, rel=0.05)  # fp16 drifts: 0.988
    assert (df["bf16_loss"] > 0).all() and (df["fp16_relative_error"] >= 0).all()


def test_sweep_is_taken_by_every_kind_that_sweeps() -> None:
    spec = A.attention_spec({"seq_len": 64, "sweep": {"implementation": "faithful,math"},
                             "cell_timeout": 30})
    assert spec.attention.seq_len == 64
    assert [(a.field, list(a.values)) for a in spec.sweep.axes] == [
        ("implementation", ["faithful", "math"])]
    assert spec.sweep.cell_timeout_seconds == 30
    spec = A.precision_spec({"sweep": {"addend": [0.01, 0.5]}})
    assert list(spec.sweep.axes[0].values) == ["0.01", "0.5"]
    with pytest.raises(benchd.ArgumentError, match="cell_timeout: needs sweep"):
        A.attention_spec({"cell_timeout": 5})


def attention_cell(values: list[str], forward: float, cuda: bool) -> pb.SweepCell:
    c = pb.SweepCell(values=values, outcome=pb.SWEEP_CELL_OUTCOME_OK, wall_seconds=0.5)
    c.spec.attention.seq_len = int(values[0])
    a = c.result.attention
    for stats, median in ((a.forward, forward), (a.backward, 2 * forward),
                          (a.step, 3 * forward)):
        stats.count, stats.median = 3, median
    a.flash_forward_tflops_per_second = 1.5
    a.flash_backward_tflops_per_second = 2.5
    a.flash_step_tflops_per_second = 2.0
    a.forward_tflops_per_second = 99  # the dense count: not the sweep's
    a.memory_source = "cuda_caching_allocator" if cuda else "unavailable on cpu"
    a.saved_activation_bytes = (4 << 20) if cuda else 0
    a.peak_pass_bytes = (8 << 20) if cuda else 0
    a.score_matrix_bytes = 2 << 20
    return c


def test_an_attention_sweeps_frame_reads_each_cells_result() -> None:
    job = pb.Job(id="7", spec=pb.JobSpec(attention=pb.AttentionSpec(head_dim=16)))
    job.spec.sweep.axes.add(field="seq_len", values=["64", "128", "256"])
    r = job.result.sweep
    r.fields.append("seq_len")
    r.cells.append(attention_cell(["64"], 0.001, cuda=True))
    r.cells.append(attention_cell(["128"], 0.004, cuda=False))
    r.cells.append(pb.SweepCell(values=["256"], outcome=pb.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY,
                                error_code=8, error_message="out of memory on cuda:0",
                                wall_seconds=0.25))
    result = make_result(job)
    assert isinstance(result, benchd.SweepResult) and result.request_kind == "attention"
    df = result.to_pandas()
    assert list(df.columns) == ["job_id", "index", "seq_len", "outcome", "median_forward_ms",
                                "median_backward_ms", "median_step_ms", "flash_forward_tflops",
                                "flash_backward_tflops", "flash_step_tflops",
                                "saved_activation_mib", "peak_pass_mib", "saved_by_formula_mib",
                                "score_matrix_mib", "wall_seconds", "error_code", "error_message"]
    assert df.loc[0, "median_forward_ms"] == pytest.approx(1.0)
    assert df.loc[0, "median_backward_ms"] == pytest.approx(2.0)
    assert df.loc[0, "median_step_ms"] == pytest.approx(3.0)
    assert df.loc[0, "flash_forward_tflops"] == 1.5 and df.loc[0, "flash_step_tflops"] == 2.0
    assert df.loc[0, "saved_activation_mib"] == 4.0 and df.loc[0, "peak_pass_mib"] == 8.0
    assert df.loc[1, "median_step_ms"] == pytest.approx(12.0)
    assert math.isnan(df.loc[1, "peak_pass_mib"]) and math.isnan(df.loc[1, "saved_by_formula_mib"])
    # The OOM cell keeps its row: its outcome, no figures, its wall time.
    assert df.loc[2, "outcome"] == "out_of_memory" and math.isnan(df.loc[2, "median_forward_ms"])
    assert df.loc[2, "wall_seconds"] == 0.25 and df.loc[2, "error_code"] == 8
    # The progress bar's line for each cell: the kind's first figures, or the error.
    assert sweep_cell_line(r.cells[0]) == ("cell 1 64: ok, median_forward_ms 1, "
                                           "median_backward_ms 2, median_step_ms 3")
    assert sweep_cell_line(r.cells[2]) == "cell 1 256: out of memory: out of memory on cuda:0"
    # A result without the job's spec: the kind from its cells.
    assert benchd.SweepResult(r).request_kind == "attention"
    assert set(SWEEP_COLUMNS) == {"benchmark", "profile", "attention", "memory", "precision"}
    assert [c.name for c in sweep_columns("collective")] == ["wall_seconds"]


def test_a_sweeps_progress_bar_counts_its_cells() -> None:
    """One bar over the cells (each cell's steps are its postfix), not one
    bar that restarts its step count in every cell."""
    from benchd import _common as C

    job = pb.Job(id="5")
    job.spec.benchmark.SetInParent()
    for field, values in (("context_length", ["32", "64"]), ("precision", ["fp32", "bf16"])):
        job.spec.sweep.axes.add(field=field, values=values)
    progress = C.Progress(job, enabled=True)
    bar = progress._bar
    assert bar.total == 4 and bar.unit == "cell"
    progress.update(C.Event(pb.JobEvent(job_id="5", step=pb.StepEvent(
        timing=pb.StepTiming(index=3, step_seconds=0.01)))))
    assert bar.n == 0
    progress.update(C.Event(pb.JobEvent(job_id="5", sweep_cell=pb.SweepCell(index=0))))
    assert bar.n == 1
    progress.close()
