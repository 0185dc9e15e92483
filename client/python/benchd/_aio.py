"""benchd.AsyncClient: the same calls on grpc.aio, for notebooks that already
run an event loop (every method is a coroutine; Job handles are AsyncJob)."""
from __future__ import annotations

import asyncio
import os
import time
from typing import Any, AsyncIterator, Sequence, TypeVar, cast

import grpc
import grpc.aio
from typing_extensions import Unpack

from . import _args as A
from . import _base as B
from . import _enums as E
from ._base import Call, ClientBase, JobBase
from ._client import JobList
from ._common import (Event, JobState, Progress, load_snapshot, show_progress, snapshot_name,
                      write_atomically)
from ._credentials import Credentials
from ._errors import BenchdError, DeadlineExceeded, RpcError, Unavailable
from ._results import (AttentionResult, BenchmarkResult, CollectiveResult, DdpResult,
                       MemoryEstimate, MemoryResult, Node, Nodes, PrecisionResult, ProfileResult,
                       Records,
                       Result)
from .v1 import bench_pb2 as pb
from .v1 import bench_pb2_grpc as pb_grpc

R = TypeVar("R", bound=Result)
T = TypeVar("T")


class AsyncClient(ClientBase):
    """benchd.Client's calls as coroutines (grpc.aio):

        c = benchd.AsyncClient("gpu-node:7531")
        job = await c.benchmark(preset="small")
        await job.wait()
        job.result.to_pandas()

    Same arguments (credentials included) and behaviour as benchd.Client."""

    def __init__(self, address: str | None = None, *, timeout: float = 30.0,
                 connect_timeout: float = 5.0, reconnect_timeout: float = 60.0,
                 credentials: Credentials | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> None:
        super().__init__(address, timeout=timeout, connect_timeout=connect_timeout,
                         reconnect_timeout=reconnect_timeout, credentials=credentials,
                         options=options)
        p = self._parts
        self._channel = (grpc.aio.secure_channel(self.address, p.credentials, options=p.options)
                         if p.credentials is not None
                         else grpc.aio.insecure_channel(self.address, options=p.options))
        self._stub = pb_grpc.BenchStub(self._channel)

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<benchd.AsyncClient {self.address}{' (TLS)' if self.tls else ''}>"

    def _ready(self) -> bool:
        return self._channel.get_state(try_to_connect=False) == grpc.ChannelConnectivity.READY

    async def _unreachable_async(self, why: str, method: str) -> Unavailable:
        # diagnose() blocks (a TCP connection and a TLS handshake): off the loop.
        return await asyncio.get_running_loop().run_in_executor(
            None, self._unreachable, why, method)

    async def _ensure_connected(self, method: str) -> None:
        deadline = time.monotonic() + self.connect_timeout
        state = self._channel.get_state(try_to_connect=True)
        changed = False
        while state != grpc.ChannelConnectivity.READY:
            if state == grpc.ChannelConnectivity.SHUTDOWN:
                raise self._unreachable("the client is closed", method)
            if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE and changed:
                raise await self._unreachable_async("connection failed", method)
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._unreachable(f"no connection within {self.connect_timeout:g} s",
                                        method)
            try:
                await asyncio.wait_for(self._channel.wait_for_state_change(state),
                                       min(left, 0.25))
                changed = True
            except asyncio.TimeoutError:
                pass
            state = self._channel.get_state(try_to_connect=True)

    def _error(self, err: grpc.RpcError, method: str, timeout: float | None) -> RpcError:
        return self._translate(err, method, timeout, self._ready())

    async def _do(self, call: Call[T]) -> T:
        t = self.timeout if call.timeout is None else call.timeout
        await self._ensure_connected(call.method)
        try:
            resp = await getattr(self._stub, call.method)(call.request, **self._call_options(t))
        except grpc.RpcError as e:
            raise self._error(e, call.method, t) from None
        return call.wrap(resp)

    def _aio_stream(self, method: str) -> Any:
        """The stub's streaming call, typed by the caller: the .pyi a wheel is
        built with (mypy-protobuf 3.6, pinned beside grpcio-tools 1.60) types
        the stub's streams as synchronous iterators; newer ones type them for
        grpc.aio. Through Any, the package type-checks with either."""
        return getattr(self._stub, method)

    async def _watch(self, job_id: str, deadline: float | None) -> AsyncIterator[Event]:
        await self._ensure_connected("Watch")
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        stream = cast("grpc.aio.UnaryStreamCall[pb.WatchRequest, pb.JobEvent]",
                      self._aio_stream("Watch")(pb.WatchRequest(job_id=job_id),
                                                **self._call_options(timeout)))
        try:
            async for ev in stream:
                e = Event(ev)
                yield e
                if e.terminal:
                    return
        except grpc.RpcError as err:
            raise self._error(err, "Watch", None) from None
        finally:
            stream.cancel()

    def _job(self, proto: pb.Job) -> "AsyncJob[Any]":
        return AsyncJob(self, proto)

    async def _submit(self, spec: pb.JobSpec) -> "AsyncJob[Any]":
        return self._job(await self._do(B.submit(spec)))

    # ------------------------------------------------------------ request kinds

    async def benchmark(self, *args: object,
                        **kwargs: Unpack[A.BenchmarkArgs]) -> "AsyncJob[BenchmarkResult]":
        A.check_positionals("benchmark", args, A.BENCHMARK_CHECKS)
        return await self._submit(A.benchmark_spec(kwargs))

    async def profile(self, *args: object,
                      **kwargs: Unpack[A.ProfileArgs]) -> "AsyncJob[ProfileResult]":
        A.check_positionals("profile", args, A.PROFILE_CHECKS)
        return await self._submit(A.profile_spec(kwargs))

    async def memory(self, *args: object,
                     **kwargs: Unpack[A.MemoryArgs]) -> "AsyncJob[MemoryResult]":
        A.check_positionals("memory", args, A.MEMORY_CHECKS)
        return await self._submit(A.memory_spec(kwargs))

    async def collective(self, *args: object,
                         **kwargs: Unpack[A.CollectiveArgs]) -> "AsyncJob[CollectiveResult]":
        A.check_positionals("collective", args, A.COLLECTIVE_CHECKS)
        return await self._submit(A.collective_spec(kwargs))

    async def attention(self, *args: object,
                        **kwargs: Unpack[A.AttentionArgs]) -> "AsyncJob[AttentionResult]":
        A.check_positionals("attention", args, A.ATTENTION_CHECKS)
        return await self._submit(A.attention_spec(kwargs))

    async def precision(self, *args: object,
                        **kwargs: Unpack[A.PrecisionArgs]) -> "AsyncJob[PrecisionResult]":
        A.check_positionals("precision", args, A.PRECISION_CHECKS)
        return await self._submit(A.precision_spec(kwargs))

    async def ddp(self, *args: object, **kwargs: Unpack[A.DdpArgs]) -> "AsyncJob[DdpResult]":
        A.check_positionals("ddp", args, A.DDP_CHECKS)
        return await self._submit(A.ddp_spec(kwargs))

    # ------------------------------------------------------------ jobs

    async def _get_job(self, job_id: str, timeout: float | None = None) -> pb.Job:
        return await self._do(B.get_job(job_id, timeout))

    async def job(self, job_id: str | int) -> "AsyncJob[Any]":
        return self._job(await self._get_job(A.job_id(job_id)))

    async def jobs_page(self, *, page_size: int = 50, page_token: str = "",
                        state: str | None = None, kind: str | None = None,
                        device: str | None = None) -> JobList:
        resp = await self._do(B.list_jobs(page_size, page_token, state, kind, device))
        return JobList([cast(Any, self._job(j)) for j in resp.jobs], resp.next_page_token)

    async def iter_jobs(self, *, state: str | None = None, kind: str | None = None,
                        device: str | None = None,
                        page_size: int = 200) -> AsyncIterator["AsyncJob[Any]"]:
        token = ""
        while True:
            page = await self.jobs_page(page_size=page_size, page_token=token, state=state,
                                        kind=kind, device=device)
            for j in page:
                yield cast(AsyncJob[Any], j)
            if not page.next_page_token or page.next_page_token == token:
                return
            token = page.next_page_token

    async def jobs(self, *, limit: int = 50, state: str | None = None, kind: str | None = None,
                   device: str | None = None) -> JobList:
        n = B.jobs_limit(limit)
        out: list[Any] = []
        async for j in self.iter_jobs(state=state, kind=kind, device=device,
                                      page_size=min(n, 1000)):
            out.append(j)
            if len(out) == n:
                break
        return JobList(out, "")

    async def cancel(self, job_id: str | int) -> "AsyncJob[Any]":
        return self._job(await self._do(B.cancel_job(job_id)))

    # ------------------------------------------------------------ models, node, groups

    async def models(self, *, device: str | None = None) -> Records[pb.ResidentModel]:
        return await self._do(B.list_models(device))

    async def evict(self, key: str | None = None, *, device: str | None = None,
                    all: bool | None = None) -> int:
        return await self._do(B.evict_model(key, device, all))

    async def node(self) -> Node:
        return await self._do(B.node_info())

    async def nodes(self) -> Nodes:
        """benchd.Client.nodes()."""
        return await self._do(B.list_nodes())

    async def wait_for_nodes(self, n: int, timeout: float = 300.0) -> Nodes:
        """benchd.Client.wait_for_nodes(), without blocking the event loop."""
        count, seconds = B.nodes_wait_args(n, timeout)
        deadline = time.monotonic() + seconds
        while True:
            nodes: Nodes | None = None
            error: Unavailable | None = None
            try:
                nodes = await self._do(B.list_nodes())
            except Unavailable as e:
                error = e
            step = B.nodes_wait_step(count, seconds, deadline, nodes, error)
            if isinstance(step, Nodes):
                return step
            await asyncio.sleep(step)

    async def estimate(self, *args: object, **kwargs: Unpack[A.EstimateArgs]) -> MemoryEstimate:
        A.check_positionals("estimate", args, A.ESTIMATE_CHECKS)
        return await self._do(B.estimate(kwargs))

    async def create_group(self, *, devices: str | Sequence[str], backend: str | None = None,
                           group_timeout: float | None = None) -> pb.Group:
        return await self._do(B.create_group(devices, backend, group_timeout, self.timeout))

    async def groups(self) -> Records[pb.Group]:
        return await self._do(B.list_groups())

    async def destroy_group(self, group: str) -> pb.Group:
        return await self._do(B.destroy_group(group))

    # ------------------------------------------------------------ artifacts

    async def artifacts(self, job_id: str | int) -> Records[pb.Artifact]:
        return await self._do(B.list_artifacts(job_id))

    async def _fetch(self, request: pb.FetchArtifactRequest) -> bytes:
        await self._ensure_connected("FetchArtifact")
        stream = cast("grpc.aio.UnaryStreamCall[pb.FetchArtifactRequest, pb.ArtifactChunk]",
                      self._aio_stream("FetchArtifact")(
                          request, **self._call_options(max(self.timeout, 600.0))))
        parts: list[bytes] = []
        try:
            async for chunk in stream:
                parts.append(chunk.data)
        except grpc.RpcError as e:
            raise self._error(e, "FetchArtifact", None) from None
        return b"".join(parts)

    async def fetch_artifact(self, job_id: str | int, name: str) -> bytes:
        return await self._fetch(B.fetch_request(job_id, name))

    async def download(self, job_id: str | int, name: str,
                       path: str | os.PathLike[str] | None = None) -> str:
        request = B.fetch_request(job_id, name)
        data = await self._fetch(request)
        target = B.download_target(request.name, path)
        write_atomically(target, [data])
        return target


# The blocking client's docstrings serve both.
def _share_docs() -> None:
    from ._client import Client
    # One method per request kind (the JobKind enum's names), then the rest.
    for name in (*E.JOB_KIND.accepted, "job",
                 "jobs_page", "iter_jobs",
                 "jobs", "cancel", "models", "evict", "node", "estimate", "create_group", "groups",
                 "destroy_group", "artifacts", "fetch_artifact", "download"):
        getattr(AsyncClient, name).__doc__ = getattr(Client, name).__doc__


_share_docs()


class AsyncJob(JobBase[R]):
    """benchd.Job for the AsyncClient: wait(), events(), cancel(), refresh(),
    artifacts(), download(), memory_snapshot() are coroutines (events() an
    async iterator); state is the last seen (await refresh() to ask again)."""

    def __init__(self, client: AsyncClient, proto: pb.Job) -> None:
        super().__init__(proto)
        self._client = client

    @property
    def state(self) -> JobState:
        return JobState.of(self._proto.state)

    @property
    def result(self) -> R:
        """As Job.result, from the last seen state (await wait() or refresh() first)."""
        return self._result()

    async def refresh(self) -> "AsyncJob[R]":
        self._proto = await self._client._get_job(self.id)
        return self

    async def events(self) -> AsyncIterator[Event]:
        async for e in self._client._watch(self.id, None):
            if e.terminal and e.job is not None:
                self._proto = e.job
            yield e

    async def wait(self, timeout: float | None = None,
                   progress: bool | None = None) -> "AsyncJob[R]":
        """As Job.wait."""
        t = None if timeout is None else A.as_float("timeout", timeout)
        deadline = None if t is None else time.monotonic() + t
        if self.state.terminal:
            return self
        bar = Progress(self._proto, show_progress(progress))
        try:
            while True:
                try:
                    async for e in self._client._watch(self.id, deadline):
                        if self._take(e, bar):
                            try:
                                await self.refresh()  # the stored job, as `get` shows it
                            except RpcError:
                                pass
                            return self
                    why = "the event stream ended before the job did"
                except RpcError as err:
                    why = self._why_lost(err, deadline, t, lambda: self.state.value)
                if await self._reconnect(deadline, why, t):
                    return self
        finally:
            bar.close()

    async def _reconnect(self, deadline: float | None, why: str, timeout: float | None) -> bool:
        c = self._client
        limit = time.monotonic() + c.reconnect_timeout
        pause = 0.2
        last: BenchdError | None = None
        while True:
            try:
                self._proto = await c._get_job(self.id, timeout=min(c.timeout, 10.0))
                return self.state.terminal
            except (Unavailable, DeadlineExceeded) as e:
                last = e
            verdict = self._reconnect_verdict(c, deadline, why, timeout, limit, last)
            if verdict is not None:
                raise verdict
            await asyncio.sleep(pause if deadline is None else
                                max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 1.0)

    async def cancel(self) -> "AsyncJob[R]":
        self._proto = (await self._client.cancel(self.id)).proto
        return self

    async def artifacts(self) -> Records[pb.Artifact]:
        return await self._client.artifacts(self.id)

    async def fetch(self, name: str) -> bytes:
        return await self._client.fetch_artifact(self.id, name)

    async def download(self, name: str, path: str | os.PathLike[str] | None = None) -> str:
        return await self._client.download(self.id, name, path)

    async def memory_snapshot(self, run: str | int | None = None) -> dict[str, Any]:
        if not self.state.terminal:
            await self.refresh()
        names = [a.name for a in await self.artifacts()]
        return load_snapshot(await self.fetch(snapshot_name(self._proto, names, run)))

    def __repr__(self) -> str:
        return f"<benchd.AsyncJob {self.id} {self.kind} {self.state.value}>"

    def _repr_html_(self) -> str:
        return self._html(self.state)
