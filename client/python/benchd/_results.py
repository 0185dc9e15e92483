"""Results as typed objects: each wraps the daemon's result message (`.proto`,
every field), names the figures people read, and turns its rows into a pandas
DataFrame with the units in the column names (`step_ms`, `bytes`, `busbw_gbps`).

    BenchmarkResult.to_pandas()   one row per step (warm-up steps flagged)
    ProfileResult.to_pandas()     one row per kernel (or CPU operator) per range
    MemoryResult.to_pandas()      one row per memory run (a sweep's cells)
    CollectiveResult.to_pandas()  one row per size (per backend and world size)
    SweepResult.to_pandas()       one row per cell of a sweep (any kind's `sweep=`)
    AttentionResult.to_pandas()   one row: the cell as the write-up's table has it
    PrecisionResult.to_pandas()   one row per accumulation loop (autocast_dtypes(): one row
                                  per tensor of the ToyModel, a column per autocast dtype)
    DdpResult.to_pandas()         one row per data-parallel run, compute only first (ranks():
                                  one row per rank of each run; steps(): per measured step)

Each has `_repr_html_` (a summary and the table) for Jupyter.
"""
from __future__ import annotations

import math

import html
from typing import (Any, Callable, Generic, Iterable, Iterator, Mapping, NamedTuple, Optional,
                    Sequence, TypeVar, Union, overload)

import pandas as pd

from . import _enums as E
from .v1 import bench_pb2 as pb

__all__ = ["Nodes", "BenchmarkResult", "ProfileResult", "MemoryResult", "CollectiveResult",
           "SweepResult", "AttentionResult", "PrecisionResult", "DdpResult", "Result",
           "make_result", "ddp_run_label", "ddp_row_label", "SweepColumn", "SWEEP_COLUMNS", "sweep_columns",
           "step_columns", "Records", "Node",
           "MemoryEstimate"]

MS = 1e3
US = 1e6


def step_columns(spec: pb.BenchmarkSpec) -> dict[str, Any]:
    """What a step was, as columns: model (preset or 'custom'), its sizes,
    mode, precision, batch and context."""
    m = spec.model
    return {
        "model": m.preset or "custom", "d_model": m.d_model, "num_layers": m.num_layers,
        "num_heads": m.num_heads, "d_ff": m.d_ff, "vocab_size": m.vocab_size,
        "mode": E.MODE.name(spec.mode), "precision": E.PRECISION.name(spec.precision),
        "batch_size": spec.batch_size, "context_length": spec.context_length,
        "attention": E.ATTENTION.name(spec.attention),
    }


def frame(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A DataFrame with these columns (also when there are no rows)."""
    df: pd.DataFrame = pd.DataFrame(list(rows), columns=list(columns))
    return df


def _html_table(pairs: Iterable[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                   for k, v in pairs)
    return f"<table>{rows}</table>"


def _frame_html(df: pd.DataFrame, max_rows: int = 20) -> str:
    return str(df.to_html(max_rows=max_rows, index=False, float_format=lambda x: f"{x:.4g}"))


class _Result:
    kind = ""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id

    def to_pandas(self) -> pd.DataFrame:
        raise NotImplementedError

    def _summary(self) -> list[tuple[str, object]]:
        return []

    def _repr_html_(self) -> str:
        title = f"<b>benchd {self.kind} result, job {html.escape(self.job_id)}</b>"
        return title + _html_table(self._summary()) + _frame_html(self.to_pandas())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self._summary()[:6])
        return f"<{type(self).__name__} job {self.job_id}: {inner}>"


class BenchmarkResult(_Result):
    """A benchmark's steps and statistics (BenchmarkResult in bench.proto)."""

    kind = "benchmark"

    def __init__(self, proto: pb.BenchmarkResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.BenchmarkSpec:
        """The step as it ran, every default written out."""
        return self.proto.spec

    @property
    def device(self) -> str:
        return self.proto.device

    @property
    def device_name(self) -> str:
        return self.proto.device_name

    @property
    def parameter_count(self) -> int:
        return self.proto.parameter_count

    @property
    def median_step_ms(self) -> float:
        return self.proto.step.median * MS

    @property
    def tokens_per_second(self) -> float:
        return self.proto.tokens_per_second

    @property
    def tflops_per_second(self) -> float:
        return self.proto.tflops_per_second

    @property
    def peak_memory_bytes(self) -> int:
        return self.proto.peak_memory_bytes

    def to_pandas(self) -> pd.DataFrame:
        """One row per step: step, warmup, step_ms, host_ms, forward_ms,
        backward_ms, optimizer_ms, loss, and what the step was (job_id, device,
        model, d_model, ..., mode, precision, batch_size, context_length)."""
        cols = {"job_id": self.job_id, "device": self.proto.device, **step_columns(self.spec)}
        rows = [{**cols, "step": s.index, "warmup": s.warmup, "step_ms": s.step_seconds * MS,
                 "host_ms": s.host_seconds * MS, "forward_ms": s.forward_seconds * MS,
                 "backward_ms": s.backward_seconds * MS,
                 "optimizer_ms": s.optimizer_seconds * MS, "loss": s.loss}
                for s in self.proto.steps]
        return frame(rows, columns=[*cols, "step", "warmup", "step_ms", "host_ms",
                                           "forward_ms", "backward_ms", "optimizer_ms", "loss"])

    def stats(self) -> pd.DataFrame:
        """One row per timed phase (step, forward, backward, optimizer,
        host_step) over the measured steps: count, median_ms, mean_ms, std_ms,
        min_ms, max_ms, p95_ms, p99_ms, cv, iqr_ms, and noise_warning (the
        daemon's, non-empty when the spread makes the median unreliable:
        torch.utils.benchmark's rule)."""
        rows = []
        for phase in ("step", "forward", "backward", "optimizer", "host_step"):
            if not self.proto.HasField(phase):  # type: ignore[arg-type,unused-ignore]
                continue
            s: pb.Stats = getattr(self.proto, phase)
            rows.append({"phase": phase, "count": s.count, "median_ms": s.median * MS,
                         "mean_ms": s.mean * MS, "std_ms": s.std * MS, "min_ms": s.min * MS,
                         "max_ms": s.max * MS, "p95_ms": s.p95 * MS, "p99_ms": s.p99 * MS,
                         "cv": s.cv, "iqr_ms": s.iqr * MS, "noise_warning": s.noise_warning})
        return frame(rows, columns=["phase", "count", "median_ms", "mean_ms", "std_ms",
                                           "min_ms", "max_ms", "p95_ms", "p99_ms", "cv", "iqr_ms",
                                           "noise_warning"])

    @property
    def noise_warnings(self) -> list[str]:
        """'phase: why' for each timed phase whose median is unreliable."""
        return [f"{phase}: {getattr(self.proto, phase).noise_warning}"
                for phase in ("step", "forward", "backward", "optimizer", "host_step")
                if getattr(self.proto, phase).noise_warning]

    def summary(self) -> dict[str, Any]:
        """One row's worth: what ran and its medians (for a sweep's table)."""
        p = self.proto
        return {"job_id": self.job_id, "device": p.device, **step_columns(self.spec),
                "parameters": p.parameter_count, "step_ms": p.step.median * MS,
                "forward_ms": p.forward.median * MS, "backward_ms": p.backward.median * MS,
                "optimizer_ms": p.optimizer.median * MS, "std_ms": p.step.std * MS,
                "tokens_per_s": p.tokens_per_second, "tflops_per_s": p.tflops_per_second,
                "peak_memory_bytes": p.peak_memory_bytes}

    def _summary(self) -> list[tuple[str, object]]:
        s = self.spec
        return [("model", s.model.preset or "custom"), ("mode", E.MODE.name(s.mode)),
                ("precision", E.PRECISION.name(s.precision)),
                ("batch x context", f"{s.batch_size} x {s.context_length}"),
                ("device", f"{self.device} ({self.device_name})"),
                ("median step ms", f"{self.median_step_ms:.3f}"),
                ("tokens/s", f"{self.tokens_per_second:,.0f}"),
                ("TFLOP/s", f"{self.tflops_per_second:.4g}"),
                ("parameters", f"{self.parameter_count:,}"),
                *(("warning", w) for w in self.noise_warnings)]

    def _repr_html_(self) -> str:
        title = f"<b>benchd benchmark result, job {html.escape(self.job_id)}</b>"
        return title + _html_table(self._summary()) + _frame_html(self.stats())


class ProfileResult(_Result):
    """Kernel tables per named range (ProfileResult in bench.proto)."""

    kind = "profile"

    def __init__(self, proto: pb.ProfileResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.ProfileSpec:
        return self.proto.spec

    @property
    def kernel_source(self) -> str:
        """'cuda_kernels' on a GPU, 'cpu_operator_self_time' on a CPU."""
        return self.proto.kernel_source

    @property
    def range_names(self) -> list[str]:
        return [r.name for r in self.proto.ranges]

    def to_pandas(self) -> pd.DataFrame:
        """One row per kernel (CPU: operator self time) per range: range,
        parent, kernel, gemm, launched_by, time_percent, total_ms, instances,
        avg_us, med_us, min_us, max_us, stddev_us, ms_per_step,
        instances_per_step (largest total first within a range)."""
        rows = []
        for r in self.proto.ranges:
            for k in r.kernels:
                rows.append({"job_id": self.job_id, "range": r.name, "parent": r.parent,
                             "kernel": k.name, "gemm": k.gemm, "launched_by": k.launched_by,
                             "time_percent": k.time_percent, "total_ms": k.total_seconds * MS,
                             "instances": k.instances, "avg_us": k.avg_seconds * US,
                             "med_us": k.med_seconds * US, "min_us": k.min_seconds * US,
                             "max_us": k.max_seconds * US, "stddev_us": k.stddev_seconds * US,
                             "ms_per_step": k.total_seconds_per_step * MS,
                             "instances_per_step": k.instances_per_step})
        return frame(rows, columns=[
            "job_id", "range", "parent", "kernel", "gemm", "launched_by", "time_percent",
            "total_ms", "instances", "avg_us", "med_us", "min_us", "max_us", "stddev_us",
            "ms_per_step", "instances_per_step"])

    def ranges(self) -> pd.DataFrame:
        """One row per named range: wall_ms, kernel_ms, idle_ms, idle_fraction,
        gemm_ms, gemm_fraction, kernel_count, wall_ms_per_step,
        kernel_ms_per_step, flops_per_step, kernel_tflops_per_s."""
        rows = [{"range": r.name, "parent": r.parent, "instances": r.instances,
                 "wall_ms": r.wall_seconds * MS, "kernel_ms": r.kernel_seconds * MS,
                 "idle_ms": r.idle_seconds * MS, "idle_fraction": r.idle_fraction,
                 "gemm_ms": r.gemm_seconds * MS, "gemm_fraction": r.gemm_fraction,
                 "kernel_count": r.kernel_count, "wall_ms_per_step": r.wall_seconds_per_step * MS,
                 "kernel_ms_per_step": r.kernel_seconds_per_step * MS,
                 "flops_per_step": r.flops_per_step,
                 "kernel_tflops_per_s": r.kernel_flops_per_second / 1e12}
                for r in self.proto.ranges]
        return frame(rows, columns=[
            "range", "parent", "instances", "wall_ms", "kernel_ms", "idle_ms", "idle_fraction",
            "gemm_ms", "gemm_fraction", "kernel_count", "wall_ms_per_step", "kernel_ms_per_step",
            "flops_per_step", "kernel_tflops_per_s"])

    def top_kernels(self, range: str = "step", n: int = 10) -> pd.DataFrame:
        """The n kernels with the most time in one range."""
        if range not in self.range_names:
            from ._errors import ArgumentError
            raise ArgumentError("range", range, self.range_names)
        df = self.to_pandas()
        top: pd.DataFrame = df[df["range"] == range].sort_values("total_ms", ascending=False)
        head: pd.DataFrame = top.head(n)
        return head

    def _summary(self) -> list[tuple[str, object]]:
        s = self.spec.step
        return [("model", s.model.preset or "custom"), ("mode", E.MODE.name(s.mode)),
                ("precision", E.PRECISION.name(s.precision)),
                ("device", f"{self.proto.device} ({self.proto.device_name})"),
                ("kernel source", self.kernel_source),
                ("profiled step ms", f"{self.proto.profiled_step.median * MS:.3f}"),
                ("unprofiled step ms", f"{self.proto.unprofiled_step.median * MS:.3f}"),
                ("profiler overhead", f"{self.proto.profiler_overhead:.3f}x"),
                ("trace", self.proto.trace_artifact)]

    def _repr_html_(self) -> str:
        title = f"<b>benchd profile result, job {html.escape(self.job_id)}</b>"
        top = self.top_kernels("step", 10) if "step" in self.range_names else self.to_pandas()
        return title + _html_table(self._summary()) + _frame_html(self.ranges()) + _frame_html(top)


class MemoryResult(_Result):
    """Peaks and phases of each memory run (MemoryResult in bench.proto)."""

    kind = "memory"

    def __init__(self, proto: pb.MemoryResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.MemorySpec:
        return self.proto.spec

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.proto.runs]

    @property
    def snapshot_artifacts(self) -> list[str]:
        """The snapshot pickles, one per run ('' for a run that ran out of
        memory before recording began)."""
        return [r.snapshot_artifact for r in self.proto.runs]

    def to_pandas(self) -> pd.DataFrame:
        """One row per run: run, what the step was, out_of_memory,
        peak_allocated_bytes, peak_reserved_bytes, baseline_allocated_bytes,
        baseline_reserved_bytes, max_memory_allocated_bytes, activation_bytes,
        trace_entries, trace_wrapped, snapshot_artifact."""
        rows = []
        for r in self.proto.runs:
            rows.append({"job_id": self.job_id, "run": r.name, **step_columns(r.step),
                         "out_of_memory": r.out_of_memory,
                         "peak_allocated_bytes": r.peak_allocated_bytes,
                         "peak_reserved_bytes": r.peak_reserved_bytes,
                         "baseline_allocated_bytes": r.baseline_allocated_bytes,
                         "baseline_reserved_bytes": r.baseline_reserved_bytes,
                         "max_memory_allocated_bytes": r.max_memory_allocated_bytes,
                         "activation_bytes": r.activation_bytes,
                         "trace_entries": r.trace_entries, "trace_wrapped": r.trace_wrapped,
                         "snapshot_artifact": r.snapshot_artifact})
        cols = ["job_id", "run", *step_columns(pb.BenchmarkSpec()), "out_of_memory",
                "peak_allocated_bytes", "peak_reserved_bytes", "baseline_allocated_bytes",
                "baseline_reserved_bytes", "max_memory_allocated_bytes", "activation_bytes",
                "trace_entries", "trace_wrapped", "snapshot_artifact"]
        return frame(rows, columns=cols)

    def phases(self) -> pd.DataFrame:
        """One row per run and phase: start_/peak_ allocated_/reserved_bytes."""
        rows = [{"run": r.name, "phase": p.name,
                 "start_allocated_bytes": p.start_allocated_bytes,
                 "start_reserved_bytes": p.start_reserved_bytes,
                 "peak_allocated_bytes": p.peak_allocated_bytes,
                 "peak_reserved_bytes": p.peak_reserved_bytes}
                for r in self.proto.runs for p in r.phases]
        return frame(rows, columns=["run", "phase", "start_allocated_bytes",
                                           "start_reserved_bytes", "peak_allocated_bytes",
                                           "peak_reserved_bytes"])

    def allocations(self) -> pd.DataFrame:
        """The largest allocations of each run: run, bytes, phase, count, origin."""
        rows = [{"run": r.name, "bytes": a.size_bytes, "phase": a.phase, "count": a.count,
                 "origin": a.origin}
                for r in self.proto.runs for a in r.largest_allocations]
        return frame(rows, columns=["run", "bytes", "phase", "count", "origin"])

    def _summary(self) -> list[tuple[str, object]]:
        return [("device", f"{self.proto.device} ({self.proto.device_name})"),
                ("parameters", f"{self.proto.parameter_count:,}"),
                ("runs", len(self.proto.runs))]


class CollectiveResult(_Result):
    """A collective sweep's cells (CollectiveResult in bench.proto)."""

    kind = "collective"

    def __init__(self, proto: pb.CollectiveResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.CollectiveSpec:
        return self.proto.spec

    @property
    def op(self) -> str:
        return E.OP.name(self.spec.op)

    @property
    def dtype(self) -> str:
        return E.DTYPE.name(self.spec.dtype)

    @property
    def wrong_elements(self) -> int:
        return self.proto.wrong_elements

    def svg(self, name: str) -> str:
        """One of the daemon's own plots (duration_vs_size,
        duration_vs_world_size, backend_comparison) as SVG text."""
        for p in self.proto.plots:
            if p.name == name:
                return p.svg
        from ._errors import ArgumentError
        raise ArgumentError("name", name, [p.name for p in self.proto.plots])

    def to_pandas(self) -> pd.DataFrame:
        """One row per cell (backend x world size x size): op, dtype, backend,
        world_size, devices, group, bytes, count, median_ms, mean_ms, min_ms,
        max_ms, p95_ms, p99_ms, algbw_gbps, busbw_gbps, wrong_elements, timer."""
        op, dtype = self.op, self.dtype
        rows = [{"job_id": self.job_id, "op": op, "dtype": dtype,
                 "backend": E.BACKEND.name(r.backend), "world_size": r.world_size,
                 "devices": ",".join(r.devices), "group": r.group, "bytes": r.size_bytes,
                 "count": r.count, "median_ms": r.duration.median * MS,
                 "mean_ms": r.duration.mean * MS, "min_ms": r.duration.min * MS,
                 "max_ms": r.duration.max * MS, "p95_ms": r.duration.p95 * MS,
                 "p99_ms": r.duration.p99 * MS, "algbw_gbps": r.algbw_gbps,
                 "busbw_gbps": r.busbw_gbps, "wrong_elements": r.wrong_elements,
                 "timer": r.timer}
                for r in self.proto.rows]
        return frame(rows, columns=[
            "job_id", "op", "dtype", "backend", "world_size", "devices", "group", "bytes",
            "count", "median_ms", "mean_ms", "min_ms", "max_ms", "p95_ms", "p99_ms",
            "algbw_gbps", "busbw_gbps", "wrong_elements", "timer"])

    def _summary(self) -> list[tuple[str, object]]:
        groups = "; ".join(f"{g.group} ({E.BACKEND.name(g.backend)} on {','.join(g.devices)}"
                           f"{', transient' if g.transient else ''})" for g in self.proto.groups)
        return [("op", self.op), ("dtype", self.dtype), ("groups", groups),
                ("wrong elements", self.wrong_elements), ("cells", len(self.proto.rows))]


_OUTCOMES = {pb.SWEEP_CELL_OUTCOME_OK: "ok", pb.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY: "out_of_memory",
             pb.SWEEP_CELL_OUTCOME_TIMEOUT: "timeout", pb.SWEEP_CELL_OUTCOME_FAILED: "failed"}


SweepRead = Callable[[pb.SweepCell], Optional[float]]


class SweepColumn(NamedTuple):
    """One value column of a kind's sweep, as common/sweep_table.cc has it
    (SweepColumnsOf): its name (a column of SweepResult.to_pandas(), a value
    of pivot(), benchctl's --value), its header in `benchctl get --csv` (SI
    units: seconds, bytes), the scale (the column's value = the CSV's x
    scale) and how to read the CSV's value from a cell (None: it has none).
    tests/test_sweep.py checks these against benchctl's CSV of real sweeps."""
    name: str
    csv: str
    scale: float
    read: SweepRead


_MIB = 1.0 / (1 << 20)


def _derived(field: str) -> SweepRead:
    def read(c: pb.SweepCell) -> Optional[float]:
        has = c.HasField(field)  # type: ignore[arg-type,unused-ignore]
        return float(getattr(c, field)) if has else None
    return read


def _ok(c: pb.SweepCell, kind: str) -> bool:
    return c.outcome == pb.SWEEP_CELL_OUTCOME_OK and c.result.WhichOneof("kind") == kind


def _step_peak(c: pb.SweepCell) -> Optional[float]:
    """A benchmark's peak memory, or a profile's unprofiled run's."""
    if _ok(c, "benchmark"):
        b = c.result.benchmark
    elif _ok(c, "profile") and c.result.profile.HasField("unprofiled"):
        b = c.result.profile.unprofiled
    else:
        return None
    return float(b.peak_memory_bytes) if b.peak_memory_bytes > 0 else None


def _positive(v: float) -> Optional[float]:
    return float(v) if v > 0 else None


def _attention(f: Callable[[pb.AttentionResult], Optional[float]]) -> SweepRead:
    return lambda c: f(c.result.attention) if _ok(c, "attention") else None


def _median(s: pb.Stats) -> Optional[float]:
    return s.median if s.count > 0 else None


def _measured(a: pb.AttentionResult, nbytes: int) -> Optional[float]:
    """Measured by the CUDA caching allocator; a CPU has none (the bytes are 0)."""
    return float(nbytes) if a.memory_source == "cuda_caching_allocator" else None


def _memory_runs(f: Callable[[pb.MemoryRun], int]) -> SweepRead:
    """The largest over the cell's memory runs that fit."""
    def read(c: pb.SweepCell) -> Optional[float]:
        if not _ok(c, "memory"):
            return None
        values = [f(r) for r in c.result.memory.runs if not r.out_of_memory]
        return float(max(values)) if values else None
    return read


def _loop(name: str, f: Callable[[pb.PrecisionAccumulationRow], float]) -> SweepRead:
    def read(c: pb.SweepCell) -> Optional[float]:
        if not _ok(c, "precision"):
            return None
        return next((f(r) for r in c.result.precision.accumulation if r.name == name), None)
    return read


def _loss(dtype: int) -> SweepRead:
    def read(c: pb.SweepCell) -> Optional[float]:
        if not _ok(c, "precision"):
            return None
        return next((r.loss for r in c.result.precision.autocast if r.autocast_dtype == dtype),
                    None)
    return read


def _profiler_overhead(c: pb.SweepCell) -> Optional[float]:
    return _positive(c.result.profile.profiler_overhead) if _ok(c, "profile") else None


_WALL = SweepColumn("wall_seconds", "wall_seconds", 1, lambda c: c.wall_seconds)
_STEP = (
    SweepColumn("median_step_ms", "median_step_s", MS, _derived("median_step_seconds")),
    SweepColumn("tokens_per_second", "tokens_per_second", 1, _derived("tokens_per_second")),
    SweepColumn("speedup_vs_fp32", "speedup_vs_fp32", 1, _derived("speedup_vs_fp32")),
    SweepColumn("forward_share", "forward_share", 1, _derived("forward_share")),
    SweepColumn("backward_share", "backward_share", 1, _derived("backward_share")),
    SweepColumn("optimizer_share", "optimizer_share", 1, _derived("optimizer_share")),
    SweepColumn("peak_memory_mib", "peak_memory_bytes", _MIB, _step_peak),
)
_LOOPS = ("fp32", "fp16", "mixed", "mixed_cast")

# Each kind's value columns, in benchctl's CSV order (wall_seconds last),
# keyed by the request's kind.
SWEEP_COLUMNS: dict[str, tuple[SweepColumn, ...]] = {
    "benchmark": (*_STEP, _WALL),
    "profile": (*_STEP, SweepColumn("profiler_overhead", "profiler_overhead", 1,
                                    _profiler_overhead), _WALL),
    "attention": (
        SweepColumn("median_forward_ms", "median_forward_s", MS,
                    _attention(lambda a: _median(a.forward))),
        SweepColumn("median_backward_ms", "median_backward_s", MS,
                    _attention(lambda a: _median(a.backward))),
        SweepColumn("median_step_ms", "median_step_s", MS, _attention(lambda a: _median(a.step))),
        # FlashAttention's FLOP count (causal halved, backward 2.5x the forward).
        SweepColumn("flash_forward_tflops", "flash_forward_tflops_per_second", 1,
                    _attention(lambda a: _positive(a.flash_forward_tflops_per_second))),
        SweepColumn("flash_backward_tflops", "flash_backward_tflops_per_second", 1,
                    _attention(lambda a: _positive(a.flash_backward_tflops_per_second))),
        SweepColumn("flash_step_tflops", "flash_step_tflops_per_second", 1,
                    _attention(lambda a: _positive(a.flash_step_tflops_per_second))),
        SweepColumn("saved_activation_mib", "saved_activation_bytes", _MIB,
                    _attention(lambda a: _measured(a, a.saved_activation_bytes))),
        SweepColumn("peak_pass_mib", "peak_pass_bytes", _MIB,
                    _attention(lambda a: _measured(a, a.peak_pass_bytes))),
        SweepColumn("saved_by_formula_mib", "saved_by_formula_bytes", _MIB,
                    _attention(lambda a: _positive(a.saved_by_formula_bytes))),
        SweepColumn("score_matrix_mib", "score_matrix_bytes", _MIB,
                    _attention(lambda a: _positive(a.score_matrix_bytes))),
        _WALL),
    "memory": (
        SweepColumn("peak_allocated_mib", "peak_allocated_bytes", _MIB,
                    _memory_runs(lambda r: r.peak_allocated_bytes)),
        SweepColumn("peak_reserved_mib", "peak_reserved_bytes", _MIB,
                    _memory_runs(lambda r: r.peak_reserved_bytes)),
        SweepColumn("baseline_allocated_mib", "baseline_allocated_bytes", _MIB,
                    _memory_runs(lambda r: r.baseline_allocated_bytes)),
        SweepColumn("max_memory_allocated_mib", "max_memory_allocated_bytes", _MIB,
                    _memory_runs(lambda r: r.max_memory_allocated_bytes)),
        _WALL),
    "precision": (
        *(SweepColumn(f"{n}_result", f"{n}_result", 1, _loop(n, lambda r: r.result))
          for n in _LOOPS),
        *(SweepColumn(f"{n}_relative_error", f"{n}_relative_error", 1,
                      _loop(n, lambda r: r.relative_error)) for n in _LOOPS),
        SweepColumn("bf16_loss", "bf16_loss", 1, _loss(pb.PRECISION_BF16)),
        SweepColumn("fp16_loss", "fp16_loss", 1, _loss(pb.PRECISION_FP16)),
        _WALL),
}


def sweep_columns(kind: str) -> tuple[SweepColumn, ...]:
    """The value columns of a sweep of `kind` ("benchmark", "attention", ...;
    "" = benchmark); a kind that cannot sweep has wall_seconds only."""
    return SWEEP_COLUMNS.get(kind or "benchmark", (_WALL,))


def sweep_cell_line(cell: pb.SweepCell) -> str:
    """A finished cell as the progress bar writes it: its number, values,
    outcome and the first three figures of its kind ("cell 1 64 faithful: ok,
    median_forward_ms 0.112, median_backward_ms 0.208, median_step_ms 0.32"),
    or the error of a cell that did not succeed."""
    kind = cell.spec.WhichOneof("kind") or cell.result.WhichOneof("kind") or ""
    outcome = {pb.SWEEP_CELL_OUTCOME_OK: "ok", pb.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY: "out of memory",
               pb.SWEEP_CELL_OUTCOME_TIMEOUT: "timeout",
               pb.SWEEP_CELL_OUTCOME_FAILED: "failed"}.get(cell.outcome, "?")
    parts = [f"cell {cell.index + 1} {' '.join(cell.values)}: {outcome}"]
    for c in sweep_columns(kind)[:-1]:  # wall_seconds aside
        v = c.read(cell)
        if v is not None and len(parts) < 4:
            parts.append(f"{c.name} {v * c.scale:.4g}")
    line = ", ".join(parts)
    if cell.outcome != pb.SWEEP_CELL_OUTCOME_OK and cell.error_message:
        line += ": " + cell.error_message[:200]
    return line


class SweepResult(_Result):
    """A sweep's rows (SweepResult in bench.proto): each cell's values, how it
    ended, its own result (`cell_result(i)`) and the derived columns the
    daemon computed (docs/architecture.md "Sweeps")."""

    kind = "sweep"

    def __init__(self, proto: pb.SweepResult, job_id: str = "", request_kind: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto
        if not request_kind:
            for c in proto.cells:
                request_kind = c.spec.WhichOneof("kind") or c.result.WhichOneof("kind") or ""
                if request_kind:
                    break
        self.request_kind = request_kind or "benchmark"

    @property
    def fields(self) -> list[str]:
        return list(self.proto.fields)

    @property
    def value_columns(self) -> list[str]:
        """This kind's value columns (benchctl's --value): a benchmark's
        median_step_ms, tokens_per_second, ...; an attention sweep's
        median_forward_ms, median_backward_ms, median_step_ms, ..."""
        return [c.name for c in sweep_columns(self.request_kind)]

    def cell_result(self, index: int) -> "Result | None":
        """The typed result of cell `index` (None for a cell that did not succeed)."""
        cell = self.proto.cells[index]
        job = pb.Job(id=self.job_id, spec=cell.spec, result=cell.result)
        return make_result(job) if cell.outcome == pb.SWEEP_CELL_OUTCOME_OK else None

    def to_pandas(self) -> pd.DataFrame:
        """One row per cell: job_id, index, one column per axis (its field, e.g.
        precision, model.preset), outcome (ok, out_of_memory, timeout, failed),
        the kind's value columns (value_columns; NaN where a cell has none),
        error_code, error_message. A benchmark's: median_step_ms,
        tokens_per_second, speedup_vs_fp32, forward_share, backward_share,
        optimizer_share, peak_memory_mib, wall_seconds. An attention sweep's:
        median_forward_ms, median_backward_ms, median_step_ms (forward +
        backward), flash_forward_tflops, flash_backward_tflops,
        flash_step_tflops (FlashAttention's FLOP count), saved_activation_mib,
        peak_pass_mib (measured on CUDA only), saved_by_formula_mib,
        score_matrix_mib, wall_seconds. The same figures as `benchctl get
        --csv` (which has them in seconds and bytes)."""
        columns = sweep_columns(self.request_kind)
        nan = float("nan")
        rows = []
        for c in self.proto.cells:
            row: dict[str, Any] = {"job_id": self.job_id, "index": c.index}
            for field, value in zip(self.fields, c.values):
                row[field] = value
            row["outcome"] = _OUTCOMES.get(c.outcome, "unspecified")
            for col in columns:
                v = col.read(c)
                row[col.name] = v * col.scale if v is not None else nan
            row.update(error_code=c.error_code, error_message=c.error_message)
            rows.append(row)
        return frame(rows, columns=["job_id", "index", *self.fields, "outcome",
                                    *(col.name for col in columns), "error_code",
                                    "error_message"])

    def pivot(self, rows: str, columns: str, value: Optional[str] = None) -> pd.DataFrame:
        """The write-up's layout: `rows` and `columns` are two of the axes
        (e.g. "model.preset", "precision"), `value` a column of to_pandas(),
        one of value_columns as a rule (default median_step_ms where the kind
        has it, as benchctl's --pivot: a benchmark's, a profile's, an attention
        sweep's fwd+bwd; else the first)."""
        names = self.value_columns
        if value is None:
            value = "median_step_ms" if "median_step_ms" in names else names[0]
        df = self.to_pandas()
        if value not in df.columns:
            raise ValueError(f"unknown value column {value!r} of a {self.request_kind} sweep; "
                             f"expected one of {', '.join(names)}")
        out: pd.DataFrame = df.pivot_table(index=rows, columns=columns, values=value,
                                           aggfunc="first", sort=False)
        return out

    def _summary(self) -> list[tuple[str, object]]:
        p = self.proto
        return [("axes", " x ".join(self.fields)), ("cells", f"{len(p.cells)} of {p.cells_total}"),
                ("ok", p.cells_ok), ("out of memory", p.cells_out_of_memory),
                ("timed out", p.cells_timeout), ("failed", p.cells_failed)]


class AttentionResult(_Result):
    """One attention cell (AttentionResult in bench.proto): forward and
    backward passes timed apart, memory measured (CUDA) and by formula."""

    kind = "attention"

    def __init__(self, proto: pb.AttentionResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.AttentionSpec:
        """The cell as it ran, every default written out."""
        return self.proto.spec

    @property
    def forward_ms(self) -> float:
        return self.proto.forward.median * MS

    @property
    def backward_ms(self) -> float:
        return self.proto.backward.median * MS

    @property
    def memory_measured(self) -> bool:
        """False on a CPU, which has no allocator to ask (the bytes are then 0)."""
        return self.proto.memory_source == "cuda_caching_allocator"

    def _cell(self) -> dict[str, Any]:
        s = self.spec
        return {"job_id": self.job_id, "device": self.proto.device,
                "impl": E.ATTENTION.name(s.implementation),
                "precision": E.PRECISION.name(s.precision), "causal": s.causal,
                "batch_size": s.batch_size,
                "heads": s.num_heads if s.HasField("num_heads") else None,
                "head_dim": s.head_dim, "seq_len": s.seq_len}

    def to_pandas(self) -> pd.DataFrame:
        """One row, the write-up's columns: what the cell is (job_id, device,
        impl, precision, causal, batch_size, heads, head_dim, seq_len), then
        forward_ms and backward_ms (medians), their p95, saved_bytes and
        peak_bytes (measured; NaN on a CPU), score_matrix_bytes and
        saved_by_formula_bytes (by formula), forward_tflops, backward_tflops."""
        p = self.proto
        nan = float("nan")
        row = {**self._cell(),
               "forward_ms": p.forward.median * MS, "backward_ms": p.backward.median * MS,
               "forward_p95_ms": p.forward.p95 * MS, "backward_p95_ms": p.backward.p95 * MS,
               "saved_bytes": p.saved_activation_bytes if self.memory_measured else nan,
               "peak_bytes": p.peak_pass_bytes if self.memory_measured else nan,
               "score_matrix_bytes": p.score_matrix_bytes,
               "saved_by_formula_bytes": p.saved_by_formula_bytes or nan,
               "forward_tflops": p.forward_tflops_per_second,
               "backward_tflops": p.backward_tflops_per_second}
        return frame([row], columns=list(row))

    def passes(self) -> pd.DataFrame:
        """One row per pass: pass, warmup, forward_ms, backward_ms, host_ms."""
        rows = [{"pass": t.index, "warmup": t.warmup, "forward_ms": t.forward_seconds * MS,
                 "backward_ms": t.backward_seconds * MS, "host_ms": t.host_seconds * MS}
                for t in self.proto.passes]
        return frame(rows, columns=["pass", "warmup", "forward_ms", "backward_ms", "host_ms"])

    def _summary(self) -> list[tuple[str, object]]:
        c = self._cell()
        return [("impl", c["impl"]), ("precision", c["precision"]),
                ("shape", f"batch {c['batch_size']} x seq {c['seq_len']} x d {c['head_dim']}"),
                ("forward ms", f"{self.forward_ms:.3f}"),
                ("backward ms", f"{self.backward_ms:.3f}"),
                ("device", f"{self.proto.device} ({self.proto.device_name})")]



class PrecisionResult(_Result):
    """The CS336 mixed_precision experiments (PrecisionResult in bench.proto):
    the accumulation loops and the ToyModel's dtypes under autocast, as the
    worker's device really gave them."""

    kind = "precision"

    def __init__(self, proto: pb.PrecisionResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.PrecisionSpec:
        """The request as it ran, every default written out."""
        return self.proto.spec

    @property
    def results(self) -> dict[str, float]:
        """Each accumulation loop's result by name: fp32, fp16, mixed, mixed_cast."""
        return {r.name: r.result for r in self.proto.accumulation}

    def dtypes(self, autocast_dtype: str) -> dict[str, str]:
        """The autocast run of that dtype ("bf16", "fp16"): tensor -> dtype
        ("fc1": "bfloat16", "ln.weight.grad": "float32", ...)."""
        number = E.PRECISION.parse("autocast_dtype", autocast_dtype)
        for run in self.proto.autocast:
            if run.autocast_dtype == number:
                return {t.tensor: t.dtype for t in run.tensors}
        raise KeyError(f"no autocast run in {E.PRECISION.name(number)}; the runs: "
                       f"{', '.join(E.PRECISION.name(r.autocast_dtype) for r in self.proto.autocast)}")

    def to_pandas(self) -> pd.DataFrame:
        """One row per accumulation loop, the write-up's order: name,
        accumulator_dtype, addend_dtype, addend_cast, addend_value (as its
        dtype holds it), result, exact (count x addend), absolute_error,
        relative_error."""
        columns = ["name", "accumulator_dtype", "addend_dtype", "addend_cast", "addend_value",
                   "result", "exact", "absolute_error", "relative_error"]
        rows = [{c: getattr(r, c) for c in columns} for r in self.proto.accumulation]
        return frame(rows, columns=columns)

    def autocast_dtypes(self) -> pd.DataFrame:
        """One row per tensor of the ToyModel (tensor, role), a column per
        autocast run named by its dtype (bf16, fp16): the dtype torch gave it."""
        order: dict[str, dict[str, Any]] = {}
        names = [E.PRECISION.name(r.autocast_dtype) for r in self.proto.autocast]
        for name, run in zip(names, self.proto.autocast):
            for t in run.tensors:
                row = order.setdefault(t.tensor, {"tensor": t.tensor, "role": t.role})
                row[name] = t.dtype
        return frame(order.values(), columns=["tensor", "role", *names])

    def _summary(self) -> list[tuple[str, object]]:
        p = self.proto
        out: list[tuple[str, object]] = [
            (f"accumulation {r.name}", f"{r.result:.9g}") for r in p.accumulation]
        for run in p.autocast:
            d = {t.tensor: t.dtype for t in run.tensors}
            out.append((f"autocast {E.PRECISION.name(run.autocast_dtype)}",
                        f"fc1 {d.get('fc1')}, ln {d.get('ln')}, logits {d.get('fc2')}, "
                        f"loss {d.get('loss')}"))
        out.append(("device", f"{p.device} ({p.device_name})"))
        return out


def ddp_run_label(variant: int, bucket_mb: float, optimizer: int,
                  gradient_compression: int = 0) -> str:
    """A data-parallel run's name, as benchctl prints it (common/ddp_spec.h
    DdpRunLabel): "compute only", "naive", "bucketed 25 MB + sharded_adamw",
    "overlap + bf16 gradients"."""
    if variant == pb.DDP_VARIANT_UNSPECIFIED:
        return "compute only"
    label = E.DDP_VARIANT.name(variant)
    if E.ddp_takes_buckets(variant):
        label += f" {bucket_mb:g} MB"
    if optimizer != pb.DDP_OPTIMIZER_ADAMW:
        label += f" + {E.DDP_OPTIMIZER.name(optimizer)}"
    if gradient_compression not in (pb.DDP_GRADIENT_COMPRESSION_UNSPECIFIED,
                                    pb.DDP_GRADIENT_COMPRESSION_NONE):
        label += f" + {E.DDP_GRADIENT_COMPRESSION.name(gradient_compression)} gradients"
    return label


def ddp_row_label(row: pb.DdpRow) -> str:
    """ddp_run_label of a result's row."""
    return ddp_run_label(row.variant, row.bucket_mb, row.optimizer, row.gradient_compression)


class DdpResult(_Result):
    """Data-parallel training (DdpResult in bench.proto): the compute-only
    run, then each variant x bucket size x optimizer x gradient
    compression, each run's step time
    (the slowest rank's), the communication the step waited for (exposed:
    step minus compute only's), traffic, memory and optimizer state per
    rank, and whether every rank ended with the same parameters."""

    kind = "ddp"

    def __init__(self, proto: pb.DdpResult, job_id: str = "") -> None:
        super().__init__(job_id)
        self.proto = proto

    @property
    def spec(self) -> pb.DdpSpec:
        """The request as it ran: the lists written out, batch_size per rank."""
        return self.proto.spec

    @property
    def group(self) -> pb.CollectiveGroupUse:
        """The group it ran on: id, backend, devices, resident or transient
        (made for the job, with its set-up seconds)."""
        return self.proto.group

    @property
    def world_size(self) -> int:
        return self.proto.world_size

    @property
    def global_batch_size(self) -> int:
        return self.proto.global_batch_size

    @property
    def parameter_count(self) -> int:
        return self.proto.parameter_count

    @property
    def device_name(self) -> str:
        return self.proto.device_name

    @property
    def timer(self) -> str:
        """'cuda_event' or 'host_steady_clock'."""
        return self.proto.timer

    @property
    def compute_only_ms(self) -> float:
        """The compute-only run's median step (no communication)."""
        return self.proto.compute_only.step.median * MS

    def _runs(self) -> list[pb.DdpRow]:
        runs = [self.proto.compute_only] if self.proto.HasField("compute_only") else []
        return runs + list(self.proto.rows)

    @property
    def diverged(self) -> list[str]:
        """The runs after which the ranks' parameters differ (the compute-only
        run, which synchronises nothing, is never compared)."""
        return [ddp_row_label(r) for r in self.proto.rows if not r.ranks_agree]

    @property
    def ranks_agree(self) -> bool:
        """Every synchronised run left the same parameters on every rank."""
        return not self.diverged

    def to_pandas(self) -> pd.DataFrame:
        """One row per run, compute only first: run (its label), variant
        ('' for compute only), bucket_mb, optimizer, gradient_compression
        (none, bf16; '' for compute only), step_ms (median),
        p95_ms, cv, exposed_comm_ms, exposed_comm_fraction, calls_per_step,
        bytes_per_step, buckets, peak_memory_bytes and optimizer_state_bytes
        (the largest rank's), backward_peak_bytes and optimizer_peak_bytes
        (the peak to the end of the synchronisation, and in the optimizer
        step: ZeRO-1's formula), unsharded_optimizer_state_bytes,
        ranks_agree (None for compute only), loss, predicted_exposed_ms (the
        overhead model's; NaN where it predicts nothing), comm_hidden_fraction
        (of the profiled step's communication, the share under computation;
        NaN without), world_size."""
        rows = []
        for r in self._runs():
            synced = r.variant != pb.DDP_VARIANT_UNSPECIFIED
            rows.append({
                "job_id": self.job_id, "run": ddp_row_label(r),
                "variant": E.DDP_VARIANT.name(r.variant) if synced else "",
                "bucket_mb": r.bucket_mb, "optimizer": E.DDP_OPTIMIZER.name(r.optimizer),
                "gradient_compression": (
                    E.DDP_GRADIENT_COMPRESSION.name(r.gradient_compression or
                                                    pb.DDP_GRADIENT_COMPRESSION_NONE)
                    if synced else ""),
                "step_ms": r.step.median * MS, "p95_ms": r.step.p95 * MS, "cv": r.step.cv,
                "exposed_comm_ms": r.exposed_comm_seconds * MS,
                "exposed_comm_fraction": r.exposed_comm_fraction,
                "calls_per_step": r.calls_per_step, "bytes_per_step": r.bytes_per_step,
                "buckets": r.buckets, "peak_memory_bytes": r.peak_memory_bytes,
                "optimizer_state_bytes": r.optimizer_state_bytes,
                "unsharded_optimizer_state_bytes": r.unsharded_optimizer_state_bytes,
                "backward_peak_bytes": r.backward_peak_memory_bytes,
                "optimizer_peak_bytes": r.optimizer_peak_memory_bytes,
                "ranks_agree": r.ranks_agree if synced else None, "loss": r.loss,
                "predicted_exposed_ms": (r.predicted_exposed_comm_seconds * MS
                                         if r.HasField("predicted_exposed_comm_seconds")
                                         else math.nan),
                "comm_hidden_fraction": _comm_hidden(r),
                "world_size": self.proto.world_size})
        return frame(rows, columns=[
            "job_id", "run", "variant", "bucket_mb", "optimizer", "gradient_compression",
            "step_ms", "p95_ms", "cv",
            "exposed_comm_ms", "exposed_comm_fraction", "calls_per_step", "bytes_per_step",
            "buckets", "peak_memory_bytes", "optimizer_state_bytes",
            "backward_peak_bytes", "optimizer_peak_bytes",
            "unsharded_optimizer_state_bytes", "ranks_agree", "loss", "predicted_exposed_ms",
            "comm_hidden_fraction", "world_size"])

    @property
    def overhead_model(self) -> pb.DdpOverheadModel:
        """The write-up's overhead model as fitted on the job's group:
        per_call_seconds (o), bandwidth_bytes_per_second (w), the sweep it
        was fitted to, the compute-only backward, the predicted and the
        measured best bucket; `unavailable` says why when it was not made."""
        return self.proto.overhead_model

    def timeline(self) -> pd.DataFrame:
        """Each rank's profiled step of each run (DdpSpec.traces), one row
        per busy span: run, rank, lane ('compute' or 'communication'),
        start_ms, end_ms (from the rank's first activity), trace (the Kineto
        trace's artifact name). Empty when the job ran without traces."""
        lanes = {pb.DDP_LANE_COMPUTE: "compute", pb.DDP_LANE_COMMUNICATION: "communication"}
        rows = [{"run": ddp_row_label(r), "rank": k.rank,
                 "lane": lanes.get(span.lane, "?"), "start_ms": span.start_seconds * MS,
                 "end_ms": span.end_seconds * MS, "trace": k.timeline.trace_artifact}
                for r in self._runs() for k in r.ranks for span in k.timeline.spans]
        return frame(rows, columns=["run", "rank", "lane", "start_ms", "end_ms", "trace"])

    def ranks(self) -> pd.DataFrame:
        """One row per rank of each run: run, rank, device, step_ms (its own
        median), comm_host_ms (host time inside the group's calls per step),
        peak_memory_bytes (0 on a CPU), optimizer_state_bytes."""
        rows = [{"run": ddp_row_label(r), "rank": k.rank,
                 "device": k.device, "step_ms": k.step_median_seconds * MS,
                 "comm_host_ms": k.comm_host_median_seconds * MS,
                 "peak_memory_bytes": k.peak_memory_bytes,
                 "optimizer_state_bytes": k.optimizer_state_bytes}
                for r in self._runs() for k in r.ranks]
        return frame(rows, columns=["run", "rank", "device", "step_ms", "comm_host_ms",
                                    "peak_memory_bytes", "optimizer_state_bytes"])

    def steps(self) -> pd.DataFrame:
        """One row per measured step of each run: run, step, step_ms (the
        slowest rank's)."""
        rows = [{"run": ddp_row_label(r), "step": i,
                 "step_ms": t * MS}
                for r in self._runs() for i, t in enumerate(r.step_seconds)]
        return frame(rows, columns=["run", "step", "step_ms"])

    def _summary(self) -> list[tuple[str, object]]:
        p = self.proto
        g = p.group
        group = (f"{g.group} ({E.BACKEND.name(g.backend)}, "
                 f"{'resident' if g.was_resident else f'set up in {g.setup_seconds:.3f} s'}"
                 f"{', transient' if g.transient else ''})")
        return [("ranks", f"{p.world_size}: {', '.join(g.devices or p.spec.target.devices)}"),
                ("group", group), ("global batch", p.global_batch_size),
                ("parameters", f"{p.parameter_count:,}"),
                ("compute only ms", f"{self.compute_only_ms:.3f}"),
                ("ranks agree", "yes" if self.ranks_agree
                 else f"DIVERGED after {'; '.join(self.diverged)}"),
                ("device", p.device_name), ("timer", p.timer)]


def _comm_hidden(row: pb.DdpRow) -> float:
    """The share of the profiled step's communication that ran under
    computation, over every rank; NaN without communication or timelines."""
    comm = sum(k.timeline.comm_seconds for k in row.ranks)
    hidden = sum(k.timeline.comm_overlapped_seconds for k in row.ranks)
    return hidden / comm if comm > 0 else math.nan


Result = Union[BenchmarkResult, ProfileResult, MemoryResult, CollectiveResult, AttentionResult,
               PrecisionResult, DdpResult, SweepResult]


def make_result(job: pb.Job) -> Result | None:
    """The typed result of a SUCCEEDED job (None when it has none); a sweep's
    is a SweepResult whatever the kind."""
    if job.result.HasField("sweep"):
        return SweepResult(job.result.sweep, job.id, job.spec.WhichOneof("kind") or "")
    kind = job.result.WhichOneof("kind")
    if kind == "benchmark":
        return BenchmarkResult(job.result.benchmark, job.id)
    if kind == "profile":
        return ProfileResult(job.result.profile, job.id)
    if kind == "memory":
        return MemoryResult(job.result.memory, job.id)
    if kind == "collective":
        return CollectiveResult(job.result.collective, job.id)
    if kind == "attention":
        return AttentionResult(job.result.attention, job.id)
    if kind == "precision":
        return PrecisionResult(job.result.precision, job.id)
    if kind == "ddp":
        return DdpResult(job.result.ddp, job.id)
    return None


# ------------------------------------------------------------------ lists

T = TypeVar("T")


class Records(Sequence[T], Generic[T]):
    """A list of the daemon's messages (models, groups, devices, artifacts)
    that also makes a DataFrame, one row per item."""

    def __init__(self, items: Sequence[T], columns: list[str],
                 row: "Any") -> None:
        self._items = list(items)
        self._columns = columns
        self._row = row

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...

    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def to_pandas(self) -> pd.DataFrame:
        return frame([self._row(x) for x in self._items], columns=self._columns)

    def _repr_html_(self) -> str:
        return _frame_html(self.to_pandas(), max_rows=50)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


def models_records(models: Sequence[pb.ResidentModel]) -> Records[pb.ResidentModel]:
    return Records(models, ["key", "device", "model", "precision", "parameter_count", "bytes",
                            "build_seconds", "uses"],
                   lambda m: {"key": m.key, "device": m.device,
                              "model": m.model.preset or "custom",
                              "precision": E.PRECISION.name(m.precision),
                              "parameter_count": m.parameter_count, "bytes": m.bytes,
                              "build_seconds": m.build_seconds, "uses": m.uses})


def groups_records(groups: Sequence[pb.Group]) -> Records[pb.Group]:
    return Records(groups, ["id", "devices", "backend", "state", "setup_seconds", "jobs_run",
                            "timeout_seconds", "transient", "broken_reason"],
                   lambda g: {"id": g.id, "devices": ",".join(g.devices),
                              "backend": E.BACKEND.name(g.backend),
                              "state": E.GROUP_STATE.name(g.state),
                              "setup_seconds": g.setup_seconds, "jobs_run": g.jobs_run,
                              "timeout_seconds": g.timeout_seconds, "transient": g.transient,
                              "broken_reason": g.broken_reason})


class Nodes(Records[pb.ClusterNode]):
    """ListNodes (`benchctl nodes`): the cluster's members in rank order, each
    a benchd.v1 ClusterNode (name, rank, state, address, hostname, devices,
    versions, last_heartbeat, detail, self); outside a cluster, this daemon
    alone. to_pandas(): one row per node."""

    def __init__(self, proto: pb.ListNodesResponse) -> None:
        super().__init__(list(proto.nodes), [
            "name", "rank", "state", "address", "hostname", "devices", "benchd", "detail",
            "self"],
            lambda n: {"name": n.name, "rank": n.rank, "state": E.NODE_STATE.name(n.state),
                       "address": n.address, "hostname": n.hostname,
                       "devices": ",".join(d.name for d in n.devices),
                       "benchd": n.versions.benchd, "detail": n.detail, "self": n.self})
        self.proto = proto

    @property
    def expected_nodes(self) -> int:
        """The cluster's size (1 outside a cluster)."""
        return self.proto.expected_nodes

    @property
    def coordinator(self) -> str:
        """Rank 0's address ("" outside a cluster)."""
        return self.proto.coordinator

    @property
    def ready(self) -> list[str]:
        """The names of the READY nodes."""
        return [n.name for n in self if n.state == pb.NODE_STATE_READY]

    def summary(self) -> str:
        """As benchctl says it: "1 of 2 nodes READY (node1 LOST: no heartbeat
        for 10.0 s)"."""
        out = f"{len(self.ready)} of {self.expected_nodes} nodes READY"
        why = [f"{n.name or f'rank {n.rank}'} {E.NODE_STATE.name(n.state).upper()}: "
               f"{n.detail or '-'}" for n in self if n.state != pb.NODE_STATE_READY]
        return f"{out} ({'; '.join(why)})" if why else out

    def _repr_html_(self) -> str:
        head = _html_table([("coordinator", self.coordinator or "-"),
                            ("nodes", self.summary())])
        return head + super()._repr_html_()

    def __repr__(self) -> str:
        return f"<benchd.Nodes {self.summary()}>"


def artifacts_records(artifacts: Sequence[pb.Artifact]) -> Records[pb.Artifact]:
    return Records(artifacts, ["name", "bytes"], lambda a: {"name": a.name, "bytes": a.size_bytes})


class MemoryEstimate:
    """Bench.Estimate: a step's memory by formula. total_bytes (one device,
    unsharded) and per_device_bytes (under the sharding) are the largest
    phase's; terms has a row per term (model state, one layer's saved
    tensors, the rest, the residual stream) with its formula; phases a row
    per phase. The message itself is .proto."""

    def __init__(self, proto: pb.MemoryEstimate) -> None:
        self.proto = proto
        rows = [("model_state", t) for t in proto.model_state] + \
            [("per_layer", t) for t in proto.activations_per_layer] + \
            [("activations", t) for t in proto.activations] + \
            [("residual_stream", proto.residual_stream)]
        self.terms = Records(rows, ["group", "term", "bytes", "per_device_bytes", "formula"],
                             lambda r: {"group": r[0], "term": r[1].name, "bytes": r[1].bytes,
                                        "per_device_bytes": r[1].per_device_bytes,
                                        "formula": r[1].formula})
        self.phases = Records(list(proto.phases), ["phase", "peak_bytes", "per_device_peak_bytes",
                                                   "terms"],
                              lambda p: {"phase": p.name, "peak_bytes": p.peak_bytes,
                                         "per_device_peak_bytes": p.per_device_peak_bytes,
                                         "terms": p.formula})

    @property
    def total_bytes(self) -> int:
        return self.proto.total_bytes

    @property
    def per_device_bytes(self) -> int:
        return self.proto.per_device_bytes

    @property
    def peak_phase(self) -> str:
        return self.proto.peak_phase

    @property
    def residual_stream_bytes(self) -> int:
        return self.proto.residual_stream.bytes

    def term(self, name: str) -> pb.EstimateTerm:
        """The term of that name (KeyError if there is none)."""
        for _, t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_pandas(self) -> pd.DataFrame:
        """One row per term."""
        return self.terms.to_pandas()

    def _repr_html_(self) -> str:
        head = _html_table([("peak", f"{self.total_bytes:,} B at the {self.peak_phase}"),
                            ("per device", f"{self.per_device_bytes:,} B on each of "
                                           f"{self.proto.devices}")])
        return "<b>benchd memory estimate</b>" + head + self.terms._repr_html_()

    def __repr__(self) -> str:
        return (f"<MemoryEstimate {self.total_bytes:,} B at the {self.peak_phase}, "
                f"{self.per_device_bytes:,} B per device>")


class Node:
    """GetNodeInfo: hostname, devices (their workers), versions, data dir."""

    def __init__(self, proto: pb.NodeInfo) -> None:
        self.proto = proto
        self.devices = Records(list(proto.devices), [
            "device", "description", "worker_state", "worker_pid", "worker_restarts",
            "total_memory_bytes", "free_memory_bytes", "compute_capability"],
            lambda d: {"device": d.name, "description": d.description,
                       "worker_state": E.WORKER_STATE.name(d.worker_state),
                       "worker_pid": d.worker_pid, "worker_restarts": d.worker_restarts,
                       "total_memory_bytes": d.total_memory_bytes,
                       "free_memory_bytes": d.free_memory_bytes,
                       "compute_capability": d.compute_capability})

    @property
    def hostname(self) -> str:
        return self.proto.hostname

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.proto.devices]

    @property
    def versions(self) -> dict[str, str]:
        v = self.proto.versions
        return {k: getattr(v, k) for k in ("benchd", "torch", "cuda_runtime", "cuda_driver",
                                           "nccl", "cudnn") if getattr(v, k)}

    @property
    def data_dir(self) -> str:
        return self.proto.data_dir

    def to_pandas(self) -> pd.DataFrame:
        """One row per device."""
        return self.devices.to_pandas()

    def _repr_html_(self) -> str:
        head = _html_table([("host", self.hostname), ("data dir", self.data_dir),
                            *self.versions.items()])
        return f"<b>benchd node {html.escape(self.hostname)}</b>" + head + \
            self.devices._repr_html_()

    def __repr__(self) -> str:
        return f"<Node {self.hostname}: {', '.join(self.device_names)}>"
