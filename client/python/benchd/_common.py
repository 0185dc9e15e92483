"""Pieces the blocking and the asyncio clients share: job states, events,
error translation, progress bars, the snapshot reader."""
# DEFAULT_ADDRESS is re-exported (benchd.DEFAULT_ADDRESS).
from __future__ import annotations

import datetime as _dt
import enum
import io
import math
import os
import pickle
import sys
import time
from typing import Any, Callable, Iterable, Sequence

import grpc
import pandas as pd

from . import _enums as E
from ._errors import (BenchdError, DeadlineExceeded, JobFailed, JobNotDone, RpcError,
                      Unavailable, error_for)
from ._credentials import DEFAULT_ADDRESS
from ._results import (MS, Result, _frame_html, ddp_row_label, frame, make_result,
                       sweep_cell_line)
from .v1 import bench_pb2 as pb

class JobState(str, enum.Enum):
    """A job's state (JobState in bench.proto), by its short name."""

    UNSPECIFIED = "unspecified"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @classmethod
    def of(cls, number: int) -> "JobState":
        try:
            return cls(E.JOB_STATE.name(number))
        except ValueError:
            return cls.UNSPECIFIED

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED,
                        JobState.INTERRUPTED)

    def __str__(self) -> str:
        return self.value


TERMINAL_EVENTS = ("result", "failed", "cancelled", "interrupted")


class Event:
    """One JobEvent of a job's Watch stream.

    kind: 'queued', 'started', 'warmup_step', 'step', 'log', 'collective_row',
    'sweep_cell' (a sweep's cell as it ends), 'ddp_row' (a data-parallel run as
    it ends), or a terminal one: 'result', 'failed', 'cancelled', 'interrupted'."""

    def __init__(self, proto: pb.JobEvent) -> None:
        self.proto = proto
        self.kind: str = proto.WhichOneof("event") or ""

    @property
    def job_id(self) -> str:
        return self.proto.job_id

    @property
    def time(self) -> _dt.datetime:
        return self.proto.time.ToDatetime(tzinfo=_dt.timezone.utc)

    @property
    def terminal(self) -> bool:
        return self.kind in TERMINAL_EVENTS

    @property
    def job(self) -> pb.Job | None:
        """The Job of queued, started and the terminal events."""
        if self.kind in ("queued", "started", *TERMINAL_EVENTS):
            j: pb.Job = getattr(self.proto, self.kind)
            return j
        return None

    @property
    def step(self) -> pb.StepTiming | None:
        if self.kind in ("warmup_step", "step"):
            s: pb.StepEvent = getattr(self.proto, self.kind)
            return s.timing
        return None

    @property
    def total_steps(self) -> int | None:
        if self.kind in ("warmup_step", "step"):
            s: pb.StepEvent = getattr(self.proto, self.kind)
            return s.total_steps
        return None

    @property
    def message(self) -> str | None:
        return self.proto.log if self.kind == "log" else None

    @property
    def row(self) -> pb.CollectiveRow | None:
        return self.proto.collective_row if self.kind == "collective_row" else None

    @property
    def cell(self) -> pb.SweepCell | None:
        return self.proto.sweep_cell if self.kind == "sweep_cell" else None

    @property
    def ddp_row(self) -> pb.DdpRow | None:
        return self.proto.ddp_row if self.kind == "ddp_row" else None

    def __repr__(self) -> str:
        extra = ""
        if self.step is not None:
            extra = f" {self.step.index}: {self.step.step_seconds * MS:.3f} ms"
        elif self.message is not None:
            extra = f" {self.message!r}"
        elif self.job is not None:
            extra = f" {E.JOB_STATE.name(self.job.state)}"
        return f"<Event job {self.job_id} {self.kind}{extra}>"


def kind_of(job: pb.Job) -> str:
    return E.JOB_KIND.name(job.kind)


def error_code(job: pb.Job) -> grpc.StatusCode | None:
    for c in grpc.StatusCode:
        if c.value[0] == job.error_code:
            return c if job.error_code != 0 else None
    return None


def result_of(job: pb.Job) -> Result:
    """The typed result, JobFailed if the job ended without one, JobNotDone
    while it runs."""
    state = JobState.of(job.state)
    if state == JobState.SUCCEEDED:
        r = make_result(job)
        if r is None:
            raise BenchdError(f"job {job.id} succeeded but carries no result this client knows")
        return r
    if state.terminal:
        raise JobFailed(job.id, state.value, error_code(job), job.error_message)
    raise JobNotDone(f"job {job.id} is {state.value}: call .wait() first")


def translate(err: grpc.RpcError, *, address: str, method: str, connected: bool,
              timeout: float | None) -> RpcError:
    """A grpc.RpcError as benchd's exception. `connected`: whether the
    channel was up when it failed (an UNAVAILABLE from a daemon that answered
    keeps its message; one from no connection says where we tried)."""
    call: Any = err
    code: grpc.StatusCode = call.code() if hasattr(call, "code") else grpc.StatusCode.UNKNOWN
    details: str = (call.details() if hasattr(call, "details") else None) or str(err)
    if code == grpc.StatusCode.UNAVAILABLE and not connected:
        return Unavailable(
            f"cannot reach benchd at {address} ({details}); check that the daemon runs there, "
            "or pass address= or set BENCHD_ADDRESS", address=address, method=method, field="")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and timeout is not None:
        return DeadlineExceeded(
            f"benchd at {address} did not answer {method} within {timeout:g} s (raise timeout=?)",
            address=address, method=method, field="")
    return error_for(code, details, address=address, method=method)


def unreachable(address: str, why: str, method: str) -> Unavailable:
    if why.startswith("TLS"):  # it answered, but not in the same terms: why says what to change
        return Unavailable(f"cannot reach benchd: {why}", address=address, method=method,
                           field="")
    return Unavailable(f"cannot reach benchd at {address} ({why}); check that the daemon runs "
                       "there, or pass address= or set BENCHD_ADDRESS",
                       address=address, method=method, field="")


# ------------------------------------------------------------------ progress

def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = getattr(shell, "get_ipython")()
    except Exception:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def show_progress(progress: bool | None) -> bool:
    """progress=None: a bar in a notebook or when stderr is a terminal."""
    if progress is not None:
        from ._args import as_bool
        return as_bool("progress", progress)
    if _in_notebook():
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def collective_cells(spec: pb.JobSpec) -> int | None:
    """How many rows a collective job will report (its resolved spec)."""
    if spec.WhichOneof("kind") != "collective":
        return None
    c = spec.collective
    series = 0
    for t in c.targets:
        series += len(c.world_sizes) if (c.world_sizes and not t.group) else 1
    return series * len(c.sizes_bytes) or None


def ddp_runs(spec: pb.JobSpec) -> int | None:
    """How many runs a data-parallel job will report, compute only included
    (its resolved spec: the lists written out)."""
    if spec.WhichOneof("kind") != "ddp":
        return None
    d = spec.ddp
    per_optimizer = sum(len(d.bucket_mb) if E.ddp_takes_buckets(v) else 1
                        for v in d.variants)
    runs = per_optimizer * len(d.optimizers) * max(1, len(d.gradient_compressions))
    return 1 + runs if runs else None


def progress_bar_class() -> Any:
    """tqdm's notebook widget where it can draw (a notebook with ipywidgets),
    else its text bar: without ipywidgets tqdm.auto warns "IProgress not
    found" on every bar, so that case takes the text bar quietly."""
    import importlib.util

    if _in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm as notebook_bar
        return notebook_bar
    from tqdm import tqdm as text_bar
    return text_bar


class Progress:
    """A tqdm bar over a job's steps (or a collective's cells, a data-parallel
    job's runs); no-op when off."""

    def __init__(self, job: pb.Job, enabled: bool) -> None:
        self._bar: Any = None
        self._unit = "step"
        if not enabled:
            return
        bar_class = progress_bar_class()
        total = collective_cells(job.spec)
        unit = "cell" if total is not None else "step"
        if job.spec.WhichOneof("kind") == "ddp":
            total, unit = ddp_runs(job.spec), "run"
        if job.spec.HasField("sweep") and job.spec.sweep.axes:
            # A sweep's progress is its cells; each cell's steps are the postfix.
            total, unit = math.prod(len(a.values) for a in job.spec.sweep.axes), "cell"
        self._unit = unit
        self._bar = bar_class(total=total, unit=unit, desc=f"job {job.id} {kind_of(job)}",
                         leave=True, dynamic_ncols=True)

    def update(self, e: Event) -> None:
        bar = self._bar
        if bar is None:
            return
        if e.kind == "started":
            bar.set_postfix_str("running", refresh=True)
        elif e.kind in ("warmup_step", "step") and e.step is not None and self._unit in ("run",
                                                                                       "cell"):
            bar.set_postfix_str(f"step {e.step.step_seconds * MS:.2f} ms", refresh=True)
        elif e.kind in ("warmup_step", "step") and e.step is not None:
            if e.total_steps:
                bar.total = e.total_steps
            bar.n = e.step.index + 1
            what = "warm-up" if e.kind == "warmup_step" else "step"
            bar.set_postfix_str(f"{what} {e.step.step_seconds * MS:.2f} ms", refresh=False)
            bar.refresh()
        elif e.kind == "collective_row" and e.row is not None:
            bar.update(1)
            bar.set_postfix_str(f"{e.row.size_bytes} B busbw {e.row.busbw_gbps:.3g} GB/s",
                                refresh=True)
        elif e.kind == "ddp_row" and e.ddp_row is not None:
            r = e.ddp_row
            bar.update(1)
            line = (f"run {ddp_row_label(r)}: step "
                    f"{r.step.median * MS:.3f} ms")
            if r.variant != pb.DDP_VARIANT_UNSPECIFIED:
                line += (f", exposed comm {r.exposed_comm_seconds * MS:.3f} ms "
                         f"({r.exposed_comm_fraction:.1%})")
                if not r.ranks_agree:
                    line += ", ranks DIVERGED"
            bar.write(line)
        elif e.kind == "sweep_cell" and e.cell is not None:
            bar.update(1)
            bar.write(sweep_cell_line(e.cell))
        elif e.kind == "log" and e.message:
            bar.write(e.message)
        elif e.terminal:
            bar.set_postfix_str(e.kind, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


# ------------------------------------------------------------------ artifacts

class _DataOnly(pickle.Unpickler):
    """Plain data only (dicts, lists, tuples, strings, numbers): a snapshot
    pickle needs nothing else, and no class is ever imported from one."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"the snapshot refers to {module}.{name}; only plain data is read")


def load_snapshot(data: bytes) -> dict[str, Any]:
    """A CUDA allocator snapshot pickle as the dict torch.cuda._memory_viz reads."""
    obj = _DataOnly(io.BytesIO(data)).load()
    if not isinstance(obj, dict):
        raise BenchdError(f"the snapshot holds a {type(obj).__name__}, not a dict")
    return obj


def snapshot_name(job: pb.Job, names: Sequence[str], run: str | int | None) -> str:
    """Which artifact a memory_snapshot(run=...) call reads."""
    from ._errors import ArgumentError
    runs = list(job.result.memory.runs) if job.result.HasField("memory") else []
    if runs:
        if run is None:
            if len(runs) > 1:
                raise ArgumentError("run", run, [r.name for r in runs],
                                    f"run: job {job.id} recorded {len(runs)} runs; name one of "
                                    f"{', '.join(r.name for r in runs)} (or its index)")
            chosen = runs[0]
        elif isinstance(run, int) and not isinstance(run, bool):
            if not 0 <= run < len(runs):
                raise ArgumentError("run", run, [str(i) for i in range(len(runs))])
            chosen = runs[run]
        else:
            match = [r for r in runs if r.name == run]
            if not match:
                raise ArgumentError("run", run, [r.name for r in runs])
            chosen = match[0]
        if not chosen.snapshot_artifact:
            raise BenchdError(f"run {chosen.name} of job {job.id} has no snapshot "
                              f"({chosen.out_of_memory_message or 'none was written'})")
        return chosen.snapshot_artifact
    pickles = [n for n in names if n.endswith(".pickle")]
    if isinstance(run, str) and run in pickles:
        return run
    if run is None and len(pickles) == 1:
        return pickles[0]
    raise ArgumentError("run", run, pickles or ["(no .pickle artifact)"],
                        f"job {job.id} has {'no snapshot' if not pickles else 'several'}: "
                        f"artifacts {', '.join(names) or 'none'}")


def write_atomically(path: str, chunks: Iterable[bytes]) -> int:
    """Writes path.part, renamed to path when whole; returns the bytes written."""
    part = path + ".part"
    n = 0
    try:
        with open(part, "wb") as f:
            for c in chunks:
                f.write(c)
                n += len(c)
        os.replace(part, path)
    except BaseException:
        try:
            os.remove(part)
        except OSError:
            pass
        raise
    return n


# ------------------------------------------------------------------ job lists

def jobs_frame(jobs: Iterable[pb.Job]) -> pd.DataFrame:
    rows = []
    for j in jobs:
        median = None
        if j.result.HasField("benchmark"):
            median = j.result.benchmark.step.median * MS
        rows.append({"job_id": j.id, "kind": kind_of(j), "state": E.JOB_STATE.name(j.state),
                     "devices": ",".join(j.devices),
                     "created": j.created.ToDatetime(tzinfo=_dt.timezone.utc)
                     if j.HasField("created") else None,
                     "started": j.started.ToDatetime(tzinfo=_dt.timezone.utc)
                     if j.HasField("started") else None,
                     "finished": j.finished.ToDatetime(tzinfo=_dt.timezone.utc)
                     if j.HasField("finished") else None,
                     "median_step_ms": median, "error_message": j.error_message})
    return frame(rows, columns=["job_id", "kind", "state", "devices", "created", "started",
                                       "finished", "median_step_ms", "error_message"])


def jobs_html(jobs: Iterable[pb.Job]) -> str:
    return _frame_html(jobs_frame(jobs), max_rows=50)


def sleep_until(deadline: float | None, seconds: float) -> None:
    if deadline is not None:
        seconds = min(seconds, max(0.0, deadline - time.monotonic()))
    time.sleep(seconds)


def call_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", "call")
