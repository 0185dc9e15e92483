"""benchd.AsyncClient: the same calls on grpc.aio, for notebooks that already
run an event loop (every method is a coroutine; Job handles are AsyncJob)."""
from __future__ import annotations

import asyncio
import html
import os
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Sequence, TypeVar, cast

import grpc
import grpc.aio
import pandas as pd
from typing_extensions import Unpack

from . import _args as A
from ._client import LOST_CODES, JobList
from ._common import (CHANNEL_OPTIONS, Event, JobState, Progress, error_code, jobs_frame,
                      jobs_html, kind_of, load_snapshot, resolve_address, result_of,
                      show_progress, snapshot_name, translate, unreachable, write_atomically)
from ._errors import ArgumentError, BenchdError, DeadlineExceeded, RpcError, Unavailable, WaitTimeout
from ._results import (BenchmarkResult, CollectiveResult, MemoryResult, Node, ProfileResult,
                       Records, Result, artifacts_records, groups_records, models_records)
from .v1 import bench_pb2 as pb
from .v1 import bench_pb2_grpc as pb_grpc

R = TypeVar("R", bound=Result)
Resp = TypeVar("Resp")


class AsyncClient:
    """benchd.Client's calls as coroutines (grpc.aio):

        c = benchd.AsyncClient("gpu-node:7531")
        job = await c.benchmark(preset="small")
        await job.wait()
        job.result.to_pandas()

    Same arguments and behaviour as benchd.Client."""

    def __init__(self, address: str | None = None, *, timeout: float = 30.0,
                 connect_timeout: float = 5.0, reconnect_timeout: float = 60.0,
                 credentials: grpc.ChannelCredentials | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> None:
        self.address = resolve_address(address)
        self.timeout = A.as_float("timeout", timeout)
        self.connect_timeout = A.as_float("connect_timeout", connect_timeout)
        self.reconnect_timeout = A.as_float("reconnect_timeout", reconnect_timeout)
        if credentials is not None and not isinstance(credentials, grpc.ChannelCredentials):
            raise A.ArgumentTypeError("credentials", credentials, "a grpc.ChannelCredentials",
                                      "credentials: expected a grpc.ChannelCredentials, got "
                                      f"{type(credentials).__name__}")
        opts = [*CHANNEL_OPTIONS, *options]
        self._channel = (grpc.aio.secure_channel(self.address, credentials, options=opts)
                         if credentials is not None
                         else grpc.aio.insecure_channel(self.address, options=opts))
        self._stub = pb_grpc.BenchStub(self._channel)

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<benchd.AsyncClient {self.address}>"

    def _ready(self) -> bool:
        return self._channel.get_state(try_to_connect=False) == grpc.ChannelConnectivity.READY

    async def _ensure_connected(self, method: str) -> None:
        deadline = time.monotonic() + self.connect_timeout
        state = self._channel.get_state(try_to_connect=True)
        changed = False
        while state != grpc.ChannelConnectivity.READY:
            if state == grpc.ChannelConnectivity.SHUTDOWN:
                raise unreachable(self.address, "the client is closed", method)
            if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE and changed:
                raise unreachable(self.address, "connection failed", method)
            left = deadline - time.monotonic()
            if left <= 0:
                raise unreachable(self.address, f"no connection within {self.connect_timeout:g} s",
                                  method)
            try:
                await asyncio.wait_for(self._channel.wait_for_state_change(state),
                                       min(left, 0.25))
                changed = True
            except asyncio.TimeoutError:
                pass
            state = self._channel.get_state(try_to_connect=True)

    def _error(self, err: grpc.RpcError, method: str, timeout: float | None) -> RpcError:
        return translate(err, address=self.address, method=method, connected=self._ready(),
                         timeout=timeout)

    async def _unary(self, method: str, call: Callable[..., Awaitable[Resp]], request: Any,
                     timeout: float | None = None) -> Resp:
        t = self.timeout if timeout is None else timeout
        await self._ensure_connected(method)
        try:
            return await call(request, timeout=t, wait_for_ready=False)
        except grpc.RpcError as e:
            raise self._error(e, method, t) from None

    async def _watch(self, job_id: str, deadline: float | None) -> AsyncIterator[Event]:
        await self._ensure_connected("Watch")
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        stream = self._stub.Watch(pb.WatchRequest(job_id=job_id), timeout=timeout,
                                  wait_for_ready=False)
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
        return self._job(await self._unary("Submit", self._stub.Submit,
                                           pb.SubmitRequest(spec=spec)))

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

    # ------------------------------------------------------------ jobs

    async def _get_job(self, job_id: str, timeout: float | None = None) -> pb.Job:
        return await self._unary("GetJob", self._stub.GetJob, pb.GetJobRequest(job_id=job_id),
                                 timeout)

    async def job(self, job_id: str | int) -> "AsyncJob[Any]":
        return self._job(await self._get_job(A.job_id(job_id)))

    async def jobs_page(self, *, page_size: int = 50, page_token: str = "",
                        state: str | None = None, kind: str | None = None,
                        device: str | None = None) -> JobList:
        request = pb.ListJobsRequest(page_size=A.as_int("page_size", page_size),
                                     page_token=A.as_str("page_token", page_token),
                                     **A.list_filters(state, kind, device))
        resp = await self._unary("ListJobs", self._stub.ListJobs, request)
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
        n = A.as_int("limit", limit)
        if n < 1:
            raise ArgumentError("limit", limit, "1 or more",
                                f"limit: expected a number of jobs, 1 or more; got {limit}")
        out: list[Any] = []
        async for j in self.iter_jobs(state=state, kind=kind, device=device,
                                      page_size=min(n, 1000)):
            out.append(j)
            if len(out) == n:
                break
        return JobList(out, "")

    async def cancel(self, job_id: str | int) -> "AsyncJob[Any]":
        return self._job(await self._unary("CancelJob", self._stub.CancelJob,
                                           pb.CancelJobRequest(job_id=A.job_id(job_id))))

    # ------------------------------------------------------------ models, node, groups

    async def models(self, *, device: str | None = None) -> Records[pb.ResidentModel]:
        r = pb.ListModelsRequest(device=A.as_str("device", device) if device else "")
        return models_records((await self._unary("ListModels", self._stub.ListModels, r)).models)

    async def evict(self, key: str | None = None, *, device: str | None = None,
                    all: bool | None = None) -> int:
        r = A.evict_request(key, device, all)
        return (await self._unary("EvictModel", self._stub.EvictModel, r)).evicted

    async def node(self) -> Node:
        return Node(await self._unary("GetNodeInfo", self._stub.GetNodeInfo,
                                      pb.GetNodeInfoRequest()))

    async def create_group(self, *, devices: str | Sequence[str], backend: str | None = None,
                           group_timeout: float | None = None) -> pb.Group:
        r = A.create_group_request(devices, backend, group_timeout)
        rendezvous = (r.timeout_seconds or 300.0) + 60.0
        return await self._unary("CreateGroup", self._stub.CreateGroup, r,
                                 max(self.timeout, rendezvous))

    async def groups(self) -> Records[pb.Group]:
        return groups_records((await self._unary("ListGroups", self._stub.ListGroups,
                                                 pb.ListGroupsRequest())).groups)

    async def destroy_group(self, group: str) -> pb.Group:
        r = pb.DestroyGroupRequest(group=A.as_str("group", group))
        return (await self._unary("DestroyGroup", self._stub.DestroyGroup, r)).group

    # ------------------------------------------------------------ artifacts

    async def artifacts(self, job_id: str | int) -> Records[pb.Artifact]:
        r = pb.ListArtifactsRequest(job_id=A.job_id(job_id))
        return artifacts_records((await self._unary("ListArtifacts", self._stub.ListArtifacts,
                                                    r)).artifacts)

    async def fetch_artifact(self, job_id: str | int, name: str) -> bytes:
        await self._ensure_connected("FetchArtifact")
        request = pb.FetchArtifactRequest(job_id=A.job_id(job_id), name=A.as_str("name", name))
        stream = self._stub.FetchArtifact(request, timeout=max(self.timeout, 600.0),
                                          wait_for_ready=False)
        parts: list[bytes] = []
        try:
            async for chunk in stream:
                parts.append(chunk.data)
        except grpc.RpcError as e:
            raise self._error(e, "FetchArtifact", None) from None
        return b"".join(parts)

    async def download(self, job_id: str | int, name: str,
                       path: str | os.PathLike[str] | None = None) -> str:
        name = A.as_str("name", name)
        data = await self.fetch_artifact(job_id, name)
        target = os.fspath(path) if path is not None else name
        if os.path.isdir(target):
            target = os.path.join(target, name)
        write_atomically(target, [data])
        return target


# The blocking client's docstrings serve both.
def _share_docs() -> None:
    from ._client import Client
    for name in ("benchmark", "profile", "memory", "collective", "job", "jobs_page", "iter_jobs",
                 "jobs", "cancel", "models", "evict", "node", "create_group", "groups",
                 "destroy_group", "artifacts", "fetch_artifact", "download"):
        getattr(AsyncClient, name).__doc__ = getattr(Client, name).__doc__


_share_docs()


class AsyncJob(Generic[R]):
    """benchd.Job for the AsyncClient: wait(), events(), cancel(), refresh(),
    artifacts(), download(), memory_snapshot() are coroutines (events() an
    async iterator); state is the last seen (await refresh() to ask again)."""

    def __init__(self, client: AsyncClient, proto: pb.Job) -> None:
        self._client = client
        self._proto = proto

    @property
    def id(self) -> str:
        return self._proto.id

    @property
    def proto(self) -> pb.Job:
        return self._proto

    @property
    def kind(self) -> str:
        return kind_of(self._proto)

    @property
    def devices(self) -> list[str]:
        return list(self._proto.devices)

    @property
    def spec(self) -> pb.JobSpec:
        return self._proto.spec

    @property
    def state(self) -> JobState:
        return JobState.of(self._proto.state)

    @property
    def error(self) -> tuple[grpc.StatusCode | None, str] | None:
        if self._proto.error_code == 0 and not self._proto.error_message:
            return None
        return error_code(self._proto), self._proto.error_message

    @property
    def result(self) -> R:
        """As Job.result, from the last seen state (await wait() or refresh() first)."""
        return cast(R, result_of(self._proto))

    def to_pandas(self) -> pd.DataFrame:
        return self.result.to_pandas()

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
                        bar.update(e)
                        if e.terminal and e.job is not None:
                            self._proto = e.job
                            try:
                                await self.refresh()
                            except RpcError:
                                pass
                            return self
                    why = "the event stream ended before the job did"
                except DeadlineExceeded:
                    if deadline is not None and time.monotonic() >= deadline - 0.01:
                        raise WaitTimeout(f"job {self.id} still {self.state.value} after "
                                          f"{t:g} s") from None
                    raise
                except RpcError as err:
                    if err.code not in LOST_CODES:
                        raise
                    why = err.message
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
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise WaitTimeout(f"job {self.id}: lost benchd at {c.address} ({why}) and the "
                                  f"wait's {timeout:g} s ran out before it answered again")
            if now >= limit:
                raise Unavailable(
                    f"lost benchd at {c.address} while waiting for job {self.id} ({why}) and "
                    f"could not reach it again within {c.reconnect_timeout:g} s "
                    f"({last.message if isinstance(last, RpcError) else last}); the job's state "
                    "is unknown here: call wait() again once the daemon is back",
                    address=c.address, method="Watch", field="")
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
        head = (f"<b>benchd job {html.escape(self.id)}</b> {html.escape(self.kind)} on "
                f"{html.escape(','.join(self.devices))}: {self.state.value}")
        if self.state == JobState.SUCCEEDED:
            try:
                return head + self.result._repr_html_()
            except BenchdError:
                pass
        return head
