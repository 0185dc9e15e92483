"""benchd.Client: the blocking client, and Job, the handle of a submitted job."""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterator, Sequence, TypeVar, cast

import grpc
import pandas as pd
from typing_extensions import Unpack

from . import _args as A
from . import _base as B
from ._base import Call, ClientBase, JobBase
from ._common import (Event, JobState, Progress, jobs_frame, jobs_html, load_snapshot,
                      show_progress, snapshot_name, write_atomically)
from ._credentials import Credentials
from ._errors import BenchdError, DeadlineExceeded, RpcError, Unavailable
from ._results import (AttentionResult, BenchmarkResult, CollectiveResult, DdpResult,
                       MemoryEstimate, MemoryResult, Node, Nodes, PrecisionResult, ProfileResult,
                       Records, Result)
from .v1 import bench_pb2 as pb
from .v1 import bench_pb2_grpc as pb_grpc

R = TypeVar("R", bound=Result)
T = TypeVar("T")

__all__ = ["Client", "Job", "JobList"]


class _Connectivity:
    """Follows the channel's state so a call can fail at once when nothing
    answers at the address (TRANSIENT_FAILURE after an attempt) instead of
    waiting for its deadline."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel
        self._cond = threading.Condition()
        self._state: grpc.ChannelConnectivity | None = None
        self._changes = 0
        channel.subscribe(self._on_change, try_to_connect=True)

    def _on_change(self, state: grpc.ChannelConnectivity) -> None:
        with self._cond:
            self._state = state
            self._changes += 1
            self._cond.notify_all()

    @property
    def ready(self) -> bool:
        with self._cond:
            return self._state == grpc.ChannelConnectivity.READY

    def _poke(self) -> None:
        def noop(_: grpc.ChannelConnectivity) -> None:
            pass
        self._channel.subscribe(noop, try_to_connect=True)
        self._channel.unsubscribe(noop)

    def wait_ready(self, timeout: float) -> str | None:
        """None once READY; else why not: a connection attempt made after
        this call began failed, or none succeeded within `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            start = self._changes
            while True:
                s = self._state
                if s == grpc.ChannelConnectivity.READY:
                    return None
                if s == grpc.ChannelConnectivity.SHUTDOWN:
                    return "the client is closed"
                if s == grpc.ChannelConnectivity.TRANSIENT_FAILURE and self._changes > start:
                    return "connection failed"
                if s in (None, grpc.ChannelConnectivity.IDLE,
                         grpc.ChannelConnectivity.TRANSIENT_FAILURE):
                    self._cond.release()
                    try:
                        self._poke()
                    finally:
                        self._cond.acquire()
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"no connection within {timeout:g} s"
                self._cond.wait(min(left, 0.1))

    def close(self) -> None:
        try:
            self._channel.unsubscribe(self._on_change)
        except Exception:
            pass
        # grpcio's polling thread checks the channel every 0.2 s until it sees
        # no subscriber; closing the channel before that makes it raise in
        # its thread ("Channel closed!"). Let it notice first.
        state = getattr(self._channel, "_connectivity_state", None)
        deadline = time.monotonic() + 1.0
        while getattr(state, "polling", False) and time.monotonic() < deadline:
            time.sleep(0.02)


class Client(ClientBase):
    """A connection to one benchd daemon.

        c = benchd.Client("gpu-node:7531")        # or $BENCHD_ADDRESS, else 127.0.0.1:7531
        job = c.benchmark(preset="small", mode="train_step", precision="bf16")
        job.wait().result.to_pandas()

    timeout: seconds each call may take (Watch, i.e. Job.wait, excepted: it
    takes wait(timeout=)). connect_timeout: seconds to connect before a call
    fails with benchd.Unavailable naming the address (refused connections fail
    at once). reconnect_timeout: how long Job.wait keeps trying to reach a
    daemon that went away (a restart) before it gives up. credentials: a
    benchd.Credentials (token, TLS, client certificate); None, or a setting
    it leaves unset, comes from the environment (BENCHD_TOKEN,
    BENCHD_TLS_CA, ...) or the client config file (benchd.Credentials says
    which). options: extra gRPC channel options.
    """

    def __init__(self, address: str | None = None, *, timeout: float = 30.0,
                 connect_timeout: float = 5.0, reconnect_timeout: float = 60.0,
                 credentials: Credentials | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> None:
        super().__init__(address, timeout=timeout, connect_timeout=connect_timeout,
                         reconnect_timeout=reconnect_timeout, credentials=credentials,
                         options=options)
        p = self._parts
        self._channel = (grpc.secure_channel(self.address, p.credentials, options=p.options)
                         if p.credentials is not None
                         else grpc.insecure_channel(self.address, options=p.options))
        self._conn = _Connectivity(self._channel)
        self._stub = pb_grpc.BenchStub(self._channel)

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        self._conn.close()
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<benchd.Client {self.address}{' (TLS)' if self.tls else ''}>"

    def _ensure_connected(self, method: str) -> None:
        why = self._conn.wait_ready(self.connect_timeout)
        if why is not None:
            raise self._unreachable(why, method)

    def _error(self, err: grpc.RpcError, method: str, timeout: float | None) -> RpcError:
        return self._translate(err, method, timeout, self._conn.ready)

    def _do(self, call: Call[T]) -> T:
        t = self.timeout if call.timeout is None else call.timeout
        self._ensure_connected(call.method)
        try:
            resp = getattr(self._stub, call.method)(call.request, **self._call_options(t))
        except grpc.RpcError as e:
            raise self._error(e, call.method, t) from None
        return call.wrap(resp)

    def _watch(self, job_id: str, deadline: float | None) -> Iterator[Event]:
        self._ensure_connected("Watch")
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        stream = self._stub.Watch(pb.WatchRequest(job_id=job_id), **self._call_options(timeout))
        try:
            for ev in stream:
                e = Event(ev)
                yield e
                if e.terminal:
                    return
        except grpc.RpcError as err:
            raise self._error(err, "Watch", None) from None
        finally:
            cast(Any, stream).cancel()

    def _job(self, proto: pb.Job) -> "Job[Any]":
        return Job(self, proto)

    def _submit(self, spec: pb.JobSpec) -> "Job[Any]":
        return self._job(self._do(B.submit(spec)))

    # ------------------------------------------------------------ request kinds

    def benchmark(self, *args: object, **kwargs: Unpack[A.BenchmarkArgs]) -> "Job[BenchmarkResult]":
        """Queue a benchmark: `benchctl submit benchmark` (flags as keywords).

        device, preset (tiny, mini, small, medium, large, xl, 2.7B), vocab_size,
        d_model, d_ff, num_layers, num_heads, rope_theta, mode (forward,
        forward_backward, train_step), precision (fp32, bf16, fp16), batch_size,
        context_length, warmup_steps, seed, warmup ('auto' or N),
        warmup_max_steps, attention (faithful, sdpa, flash, efficient, cudnn,
        math, tiled, fused), optimizer (faithful, foreach, fused), tf32, weight_copies,
        fused_ops, autograd, optimizer_overlap (train_step with optimizer
        fused: each parameter's update beside the backward), steps,
        export_parity, cuda_graph.
        Unset arguments take the daemon's defaults. Returns the Job.

        sweep={"precision": ["fp32", "bf16"], "model.preset": ["small", ...]}
        (any request but collective; fields relative to the request, e.g.
        "step.precision" for profile and memory) runs the product as one job
        whose result is a SweepResult (one row per cell); cell_timeout
        (seconds) makes a cell still running a TIMEOUT row."""
        A.check_positionals("benchmark", args, A.BENCHMARK_CHECKS)
        return self._submit(A.benchmark_spec(kwargs))

    def profile(self, *args: object, **kwargs: Unpack[A.ProfileArgs]) -> "Job[ProfileResult]":
        """Queue a profile: `benchctl submit profile`. The step's arguments
        as benchmark() (steps = the unprofiled reference run's), plus
        profile_steps, activities ('cpu', 'cuda' or both), record_shapes,
        profile_memory."""
        A.check_positionals("profile", args, A.PROFILE_CHECKS)
        return self._submit(A.profile_spec(kwargs))

    def memory(self, *args: object, **kwargs: Unpack[A.MemoryArgs]) -> "Job[MemoryResult]":
        """Queue a memory request (CUDA only): `benchctl submit memory`. The
        step's arguments as benchmark() (no steps), plus record_steps,
        max_entries, stacks (none, cpp, all), top, and the sweep lists
        contexts, modes, precisions."""
        A.check_positionals("memory", args, A.MEMORY_CHECKS)
        return self._submit(A.memory_spec(kwargs))

    def collective(self, *args: object,
                   **kwargs: Unpack[A.CollectiveArgs]) -> "Job[CollectiveResult]":
        """Queue a collective benchmark: `benchctl submit collective`.

        group, or devices (rank order) with backend (nccl, gloo) or backends;
        world_sizes, op (all_reduce, all_gather, reduce_scatter, broadcast,
        all_to_all), dtype (fp32, fp16, bf16, fp64, int32), min, max, factor
        or sizes (bytes or '64KiB', '1MiB'), warmup, iters, in_place,
        group_timeout."""
        A.check_positionals("collective", args, A.COLLECTIVE_CHECKS)
        return self._submit(A.collective_spec(kwargs))

    def attention(self, *args: object,
                  **kwargs: Unpack[A.AttentionArgs]) -> "Job[AttentionResult]":
        """Queue one attention cell (CS336 pytorch_attention): `benchctl
        submit attention`.

        device, batch_size (8), heads (none: inputs (batch, seq, d)), head_dim
        (64), seq_len (1024), causal, precision (fp32, bf16, fp16: Q, K, V in
        that dtype), impl (faithful = the course's ops, sdpa, flash, efficient,
        cudnn, math, tiled = FlashAttention-2's algorithm in ATen ops, fused = benchd's
        FlashAttention-2 CUDA kernels), warmup (5), passes (100), seed, memory_cap (CUDA only,
        e.g. '2GiB'). A cell that runs out of memory fails with
        ResourceExhausted.

        sweep={"seq_len": [256, 1024], "implementation": ["faithful", "flash"]}
        (fields of AttentionSpec) runs the grid as one job whose result is a
        SweepResult: to_pandas() has a row per cell with its forward,
        backward and forward+backward medians (ms), FlashAttention TFLOP/s
        and measured memory (MiB, CUDA); a cell that runs out of memory is
        an out_of_memory row and the sweep goes on. cell_timeout as for
        benchmark()."""
        A.check_positionals("attention", args, A.ATTENTION_CHECKS)
        return self._submit(A.attention_spec(kwargs))

    def precision(self, *args: object,
                  **kwargs: Unpack[A.PrecisionArgs]) -> "Job[PrecisionResult]":
        """Queue the mixed-precision experiments (CS336 mixed_precision):
        `benchctl submit precision`.

        device, experiments (accumulation, autocast; default both),
        autocast_dtypes (bf16, fp16; default both), count (1000) and addend
        (0.01) for the accumulation loops, seed (the ToyModel's weights and
        batch). The result's to_pandas() is the accumulation table,
        autocast_dtypes() the ToyModel's dtypes, as the device's autocast gave
        them. sweep={"count": [10, 1000]} (fields of PrecisionSpec) runs each
        as one cell of one job (a SweepResult: each loop's sum and relative
        error, each autocast dtype's loss)."""
        A.check_positionals("precision", args, A.PRECISION_CHECKS)
        return self._submit(A.precision_spec(kwargs))

    def ddp(self, *args: object, **kwargs: Unpack[A.DdpArgs]) -> "Job[DdpResult]":
        """Queue data-parallel training (CS336 Systems 2.2-2.4): `benchctl
        submit ddp`.

        group, or devices (rank order) with backend (nccl, gloo); the step:
        preset or vocab_size, d_model, d_ff, num_layers, num_heads,
        rope_theta; precision, global_batch (all ranks, split evenly;
        default 8) or batch_size (per rank), context_length, warmup_steps,
        steps, seed, tf32, autograd (every run through the autograd
        engine); the runs: variants (naive, flat, overlap, bucketed, and
        reducer: c10d's Reducer, PyTorch DDP's engine, with autograd only;
        default the first four, and reducer with autograd), bucket_mb
        (bucketed's and reducer's sizes, default 1, 10, 100, 1000),
        optimizers (adamw, sharded_adamw, adamw_overlapped; default adamw)
        or sharded_optimizer=True, gradient_compressions (none, bf16: as
        DDP's bf16_compress_hook; both = every run twice; default none),
        optimizer_impl (faithful, foreach, fused:
        how AdamW or a rank's shard steps); group_timeout. The result's
        to_pandas() has a row per run (compute only first): step time, exposed
        communication, traffic, memory, optimizer state, ranks_agree."""
        A.check_positionals("ddp", args, A.DDP_CHECKS)
        return self._submit(A.ddp_spec(kwargs))

    # ------------------------------------------------------------ jobs

    def job(self, job_id: str | int) -> "Job[Any]":
        """The job with this id (GetJob)."""
        return self._job(self._get_job(A.job_id(job_id)))

    def _get_job(self, job_id: str, timeout: float | None = None) -> pb.Job:
        return self._do(B.get_job(job_id, timeout))

    def jobs_page(self, *, page_size: int = 50, page_token: str = "", state: str | None = None,
                  kind: str | None = None, device: str | None = None) -> "JobList":
        """One ListJobs page, newest first; .next_page_token is '' on the last."""
        resp = self._do(B.list_jobs(page_size, page_token, state, kind, device))
        return JobList([self._job(j) for j in resp.jobs], resp.next_page_token)

    def iter_jobs(self, *, state: str | None = None, kind: str | None = None,
                  device: str | None = None, page_size: int = 200) -> Iterator["Job[Any]"]:
        """Every job matching the filters, newest first, fetched a page at a time."""
        token = ""
        while True:
            page = self.jobs_page(page_size=page_size, page_token=token, state=state, kind=kind,
                                  device=device)
            yield from page
            if not page.next_page_token or page.next_page_token == token:
                return
            token = page.next_page_token

    def jobs(self, *, limit: int = 50, state: str | None = None, kind: str | None = None,
             device: str | None = None) -> "JobList":
        """`benchctl list`: the newest `limit` jobs (state: queued, running,
        succeeded, failed, cancelled, interrupted; kind: benchmark, profile,
        memory, collective, attention, precision, ddp (any JobKind); device:
        e.g. 'cuda:0')."""
        n = B.jobs_limit(limit)
        out: list[Job[Any]] = []
        for j in self.iter_jobs(state=state, kind=kind, device=device, page_size=min(n, 1000)):
            out.append(j)
            if len(out) == n:
                break
        return JobList(out, "")

    def cancel(self, job_id: str | int) -> "Job[Any]":
        """Cancel a queued or running job (CancelJob)."""
        return self._job(self._do(B.cancel_job(job_id)))

    # ------------------------------------------------------------ models, node

    def models(self, *, device: str | None = None) -> Records[pb.ResidentModel]:
        """Models resident in the workers (ListModels)."""
        return self._do(B.list_models(device))

    def evict(self, key: str | None = None, *, device: str | None = None,
              all: bool | None = None) -> int:
        """Free resident models: one key, every model on device=, or all=True.
        Returns how many were evicted."""
        return self._do(B.evict_model(key, device, all))

    def node(self) -> Node:
        """The node: devices, their workers, versions, and how this client is
        seen (.security: TLS, tokens, the caller and its role) (GetNodeInfo)."""
        return self._do(B.node_info())

    def nodes(self) -> Nodes:
        """The cluster's nodes (ListNodes; `benchctl nodes`): name, rank,
        state (READY, WAITING, LOST), address, devices, versions, detail, in
        rank order; any member answers. Outside a cluster, this daemon alone.
        .expected_nodes, .coordinator, .ready (names), .proto
        (the ListNodesResponse), .to_pandas()."""
        return self._do(B.list_nodes())

    def wait_for_nodes(self, n: int, timeout: float = 300.0) -> Nodes:
        """Wait until n nodes are READY, then return them (`benchctl nodes
        --wait N --wait-timeout S`): asks every 0.5 s, and keeps asking while
        the daemon is unreachable (still starting). Raises benchd.WaitTimeout
        naming the nodes not READY and why (or benchd.Unavailable if the
        daemon never answered) once timeout seconds have passed."""
        count, seconds = B.nodes_wait_args(n, timeout)
        deadline = time.monotonic() + seconds
        while True:
            nodes: Nodes | None = None
            error: Unavailable | None = None
            try:
                nodes = self._do(B.list_nodes())
            except Unavailable as e:
                error = e
            step = B.nodes_wait_step(count, seconds, deadline, nodes, error)
            if isinstance(step, Nodes):
                return step
            time.sleep(step)

    def estimate(self, *args: object, **kwargs: Unpack[A.EstimateArgs]) -> MemoryEstimate:
        """Memory by formula (Bench.Estimate; `benchctl estimate`): the bytes
        of parameters, gradients, AdamW state and activations of one step,
        term by term with formulas, per device under a sharding. No job, no
        device time. preset (tiny, ..., 2.7B, xxl) or sizes, mode, precision,
        batch_size, context_length, autograd, and data_parallel, zero_stage
        (0..3), fsdp, tensor_parallel, pipeline_stages."""
        A.check_positionals("estimate", args, A.ESTIMATE_CHECKS)
        return self._do(B.estimate(kwargs))

    # ------------------------------------------------------------ groups

    def create_group(self, *, devices: str | Sequence[str], backend: str | None = None,
                     group_timeout: float | None = None) -> pb.Group:
        """`benchctl groups create`: a resident process group (rank r = devices[r])."""
        return self._do(B.create_group(devices, backend, group_timeout, self.timeout))

    def groups(self) -> Records[pb.Group]:
        """`benchctl groups list`."""
        return self._do(B.list_groups())

    def destroy_group(self, group: str) -> pb.Group:
        """`benchctl groups destroy ID`; returns the group as it was."""
        return self._do(B.destroy_group(group))

    # ------------------------------------------------------------ artifacts

    def artifacts(self, job_id: str | int) -> Records[pb.Artifact]:
        """The files a job wrote (ListArtifacts): name, bytes."""
        return self._do(B.list_artifacts(job_id))

    def _chunks(self, request: pb.FetchArtifactRequest) -> Iterator[bytes]:
        self._ensure_connected("FetchArtifact")
        stream = self._stub.FetchArtifact(request,
                                          **self._call_options(max(self.timeout, 600.0)))
        try:
            for chunk in stream:
                yield chunk.data
        except grpc.RpcError as e:
            raise self._error(e, "FetchArtifact", None) from None

    def fetch_artifact(self, job_id: str | int, name: str) -> bytes:
        """One artifact's bytes."""
        return b"".join(self._chunks(B.fetch_request(job_id, name)))

    def download(self, job_id: str | int, name: str, path: str | os.PathLike[str] | None = None) -> str:
        """`benchctl artifacts get`: to `path` (default: `name` here; a folder:
        name inside it), through path.part so a failed fetch leaves no file.
        Returns the path written."""
        request = B.fetch_request(job_id, name)
        target = B.download_target(request.name, path)
        write_atomically(target, self._chunks(request))
        return target


class JobList(list["Job[Any]"]):
    """Jobs (a list of Job), with to_pandas() (one row per job) and a table in Jupyter."""

    def __init__(self, jobs: Sequence["Job[Any]"], next_page_token: str = "") -> None:
        super().__init__(jobs)
        self.next_page_token = next_page_token

    def to_pandas(self) -> pd.DataFrame:
        return jobs_frame(j.proto for j in self)

    def _repr_html_(self) -> str:
        return jobs_html(j.proto for j in self)


class Job(JobBase[R]):
    """A submitted job: follow it (wait, events), stop it (cancel), read it
    (state, result, artifacts). Its fields are the daemon's last answer;
    state refreshes until the job has ended."""

    def __init__(self, client: Client, proto: pb.Job) -> None:
        super().__init__(proto)
        self._client = client

    def refresh(self) -> "Job[R]":
        """Ask the daemon again (GetJob)."""
        self._proto = self._client._get_job(self.id)
        return self

    @property
    def state(self) -> JobState:
        """Current state (asks the daemon unless the job has ended)."""
        if not JobState.of(self._proto.state).terminal:
            self.refresh()
        return JobState.of(self._proto.state)

    @property
    def done(self) -> bool:
        return self.state.terminal

    @property
    def result(self) -> R:
        """The typed result; raises benchd.JobFailed if the job ended without
        one (failed, cancelled, interrupted), benchd.JobNotDone while it runs."""
        if not JobState.of(self._proto.state).terminal:
            self.refresh()
        return self._result()

    def to_pandas(self) -> pd.DataFrame:
        """self.result.to_pandas()."""
        return self.result.to_pandas()

    def events(self) -> Iterator[Event]:
        """The job's events (Watch): every event from the start, then live
        ones, ending after the terminal event."""
        for e in self._client._watch(self.id, None):
            if e.terminal and e.job is not None:
                self._proto = e.job
            yield e

    def wait(self, timeout: float | None = None, progress: bool | None = None) -> "Job[R]":
        """Block until the job has ended; returns the job (state, result).

        progress: a tqdm bar (None: in a notebook or a terminal). timeout:
        seconds, then benchd.WaitTimeout (the job goes on). If the daemon goes
        away meanwhile (a restart), this reconnects for up to the client's
        reconnect_timeout and reports what the daemon stored (INTERRUPTED, or
        the result); past that it raises benchd.Unavailable, never hangs."""
        t = None if timeout is None else A.as_float("timeout", timeout)
        deadline = None if t is None else time.monotonic() + t
        if JobState.of(self._proto.state).terminal:
            return self
        bar = Progress(self._proto, show_progress(progress))
        try:
            while True:
                try:
                    for e in self._client._watch(self.id, deadline):
                        if self._take(e, bar):
                            try:
                                self.refresh()  # the stored job, as `get` shows it
                            except RpcError:
                                pass
                            return self
                    why = "the event stream ended before the job did"
                except RpcError as err:
                    why = self._why_lost(err, deadline, t, lambda: self.state.value)
                if self._reconnect(deadline, why, t):
                    return self
        finally:
            bar.close()

    def _reconnect(self, deadline: float | None, why: str, timeout: float | None) -> bool:
        """After losing the daemon: GetJob until it answers. True when the job
        has ended (the caller returns), False to watch again."""
        c = self._client
        limit = time.monotonic() + c.reconnect_timeout
        pause = 0.2
        last: BenchdError | None = None
        while True:
            try:
                self._proto = c._get_job(self.id, timeout=min(c.timeout, 10.0))
                return JobState.of(self._proto.state).terminal
            except (Unavailable, DeadlineExceeded) as e:
                last = e
            verdict = self._reconnect_verdict(c, deadline, why, timeout, limit, last)
            if verdict is not None:
                raise verdict
            time.sleep(pause if deadline is None else
                       max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)

    def cancel(self) -> "Job[R]":
        """Cancel it: a queued job at once, a running one at its next step."""
        self._proto = self._client.cancel(self.id).proto
        return self

    def artifacts(self) -> Records[pb.Artifact]:
        return self._client.artifacts(self.id)

    def fetch(self, name: str) -> bytes:
        """One artifact's bytes."""
        return self._client.fetch_artifact(self.id, name)

    def download(self, name: str, path: str | os.PathLike[str] | None = None) -> str:
        """Fetch one artifact to `path` (default: name, here); returns the path."""
        return self._client.download(self.id, name, path)

    def memory_snapshot(self, run: str | int | None = None) -> dict[str, Any]:
        """A memory run's snapshot pickle as a dict (what
        torch.cuda._memory_viz reads: segments, device_traces, ...). run: the
        run's name or index in a sweep, or an artifact name ending in .pickle.
        Plain data only is unpickled; torch is not needed."""
        if not JobState.of(self._proto.state).terminal:
            self.refresh()
        names = [a.name for a in self.artifacts()]
        return load_snapshot(self.fetch(snapshot_name(self._proto, names, run)))

    def __repr__(self) -> str:
        return f"<benchd.Job {self.id} {self.kind} {JobState.of(self._proto.state).value}>"

    def _repr_html_(self) -> str:
        return self._html(JobState.of(self._proto.state))
