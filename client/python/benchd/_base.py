"""What benchd.Client and benchd.AsyncClient (and their Job handles) share:
the settings and channel parts, each unary call's request and how its answer
is wrapped (Call), and the job handle's read-only half. The two clients only
differ in how they wait: blocking, or on an event loop."""
from __future__ import annotations

import dataclasses
import html
import os
import time
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

import grpc
import pandas as pd

from . import _args as A
from ._channel import ChannelParts, channel_parts, diagnose
from ._common import Event, Progress, error_code, kind_of, result_of, translate, unreachable
from ._credentials import Credentials
from ._errors import (ArgumentError, BenchdError, DeadlineExceeded, RpcError, Unavailable,
                      WaitTimeout)
from ._results import (MemoryEstimate, Node, Nodes, Records, Result, artifacts_records,
                       groups_records, models_records)
from .v1 import bench_pb2 as pb

T = TypeVar("T")
R = TypeVar("R", bound=Result)

# Watch ends like this when the daemon goes away mid-stream (stopped, killed,
# restarted); the job's fate is then asked again once it is back.
LOST_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
              grpc.StatusCode.INTERNAL)


@dataclasses.dataclass(frozen=True)
class Call(Generic[T]):
    """One unary RPC: the stub's method, the checked request, what the
    answer becomes, and its deadline (None: the client's timeout)."""

    method: str
    request: Any
    wrap: Callable[[Any], T]
    timeout: float | None = None


def _same(x: Any) -> Any:
    return x


def get_job(job_id: str, timeout: float | None = None) -> Call[pb.Job]:
    return Call("GetJob", pb.GetJobRequest(job_id=job_id), _same, timeout)


def submit(spec: pb.JobSpec) -> Call[pb.Job]:
    return Call("Submit", pb.SubmitRequest(spec=spec), _same)


def list_jobs(page_size: object, page_token: object, state: object, kind: object,
              device: object) -> Call[pb.ListJobsResponse]:
    request = pb.ListJobsRequest(page_size=A.as_int("page_size", page_size),
                                 page_token=A.as_str("page_token", page_token),
                                 **A.list_filters(state, kind, device))
    return Call("ListJobs", request, _same)


def cancel_job(job_id: object) -> Call[pb.Job]:
    return Call("CancelJob", pb.CancelJobRequest(job_id=A.job_id(job_id)), _same)


def list_models(device: object) -> Call[Records[pb.ResidentModel]]:
    r = pb.ListModelsRequest(device=A.as_str("device", device) if device else "")
    return Call("ListModels", r, lambda resp: models_records(resp.models))


def evict_model(key: object, device: object, all: object) -> Call[int]:
    return Call("EvictModel", A.evict_request(key, device, all), lambda resp: int(resp.evicted))


def node_info() -> Call[Node]:
    return Call("GetNodeInfo", pb.GetNodeInfoRequest(), Node)


def list_nodes() -> Call[Nodes]:
    return Call("ListNodes", pb.ListNodesRequest(), Nodes)


# benchctl nodes --wait N (1..1024) --wait-timeout S (0..86400).
MAX_NODES, MAX_NODES_WAIT = 1024, 86400.0
NODES_POLL = 0.5  # seconds between ListNodes calls, as benchctl


def nodes_wait_args(n: object, timeout: object) -> tuple[int, float]:
    """wait_for_nodes' arguments, checked as benchctl checks --wait and
    --wait-timeout."""
    count, seconds = A.as_int("n", n), A.as_float("timeout", timeout)
    if not 1 <= count <= MAX_NODES:
        raise ArgumentError("n", n, f"1..{MAX_NODES}",
                            f"n: expected 1..{MAX_NODES} nodes, got {n!r}")
    if not 0 <= seconds <= MAX_NODES_WAIT:
        raise ArgumentError("timeout", timeout, f"0..{MAX_NODES_WAIT:g} seconds",
                            f"timeout: expected 0..{MAX_NODES_WAIT:g} seconds, got {timeout!r}")
    return count, seconds


def nodes_wait_step(count: int, seconds: float, deadline: float, nodes: Nodes | None,
                    error: Unavailable | None) -> Nodes | float:
    """One turn of wait_for_nodes, after a ListNodes that answered `nodes` or
    failed with `error` (UNAVAILABLE: a daemon still starting): the nodes
    once count are READY, else how long to sleep before asking again; raises
    once the deadline has passed (the Unavailable error, or WaitTimeout with
    benchctl's summary: "waited 60 s for 3 READY nodes: 2 of 3 nodes READY
    (node2 LOST: ...)")."""
    if nodes is not None and len(nodes.ready) >= count:
        return nodes
    left = deadline - time.monotonic()
    if left > 0:
        return min(NODES_POLL, left)
    if error is not None:
        raise error
    assert nodes is not None
    raise WaitTimeout(f"waited {seconds:g} s for {count} READY nodes: {nodes.summary()}")


def estimate(given: Mapping[str, object]) -> Call[MemoryEstimate]:
    return Call("Estimate", A.estimate_request(given), MemoryEstimate)


def create_group(devices: object, backend: object, group_timeout: object,
                 client_timeout: float) -> Call[pb.Group]:
    r = A.create_group_request(devices, backend, group_timeout)
    # The rendezvous may take the group's whole timeout (default 300 s).
    rendezvous = (r.timeout_seconds or 300.0) + 60.0
    return Call("CreateGroup", r, _same, max(client_timeout, rendezvous))


def list_groups() -> Call[Records[pb.Group]]:
    return Call("ListGroups", pb.ListGroupsRequest(), lambda resp: groups_records(resp.groups))


def destroy_group(group: object) -> Call[pb.Group]:
    return Call("DestroyGroup", pb.DestroyGroupRequest(group=A.as_str("group", group)),
                lambda resp: resp.group)


def list_artifacts(job_id: object) -> Call[Records[pb.Artifact]]:
    return Call("ListArtifacts", pb.ListArtifactsRequest(job_id=A.job_id(job_id)),
                lambda resp: artifacts_records(resp.artifacts))


def fetch_request(job_id: object, name: object) -> pb.FetchArtifactRequest:
    return pb.FetchArtifactRequest(job_id=A.job_id(job_id), name=A.as_str("name", name))


def jobs_limit(limit: object) -> int:
    n = A.as_int("limit", limit)
    if n < 1:
        raise ArgumentError("limit", limit, "1 or more",
                            f"limit: expected a number of jobs, 1 or more; got {limit}")
    return n


def download_target(name: str, path: str | os.PathLike[str] | None) -> str:
    target = os.fspath(path) if path is not None else name
    return os.path.join(target, name) if os.path.isdir(target) else target


class ClientBase:
    """Settings, channel parts and error translation of both clients."""

    def __init__(self, address: str | None, *, timeout: float, connect_timeout: float,
                 reconnect_timeout: float, credentials: Credentials | None,
                 options: Sequence[tuple[str, Any]]) -> None:
        self.timeout = A.as_float("timeout", timeout)
        self.connect_timeout = A.as_float("connect_timeout", connect_timeout)
        self.reconnect_timeout = A.as_float("reconnect_timeout", reconnect_timeout)
        self._parts: ChannelParts = channel_parts(address, credentials, options)
        self.address = self._parts.address

    @property
    def tls(self) -> bool:
        """Whether this client speaks TLS to the daemon."""
        return self._parts.settings.tls

    def _call_options(self, timeout: float | None) -> dict[str, Any]:
        """Every call's keyword arguments: its deadline, fail fast, and the
        token's metadata on a plaintext (loopback) channel."""
        opts: dict[str, Any] = {"timeout": timeout, "wait_for_ready": False}
        if self._parts.metadata is not None:
            opts["metadata"] = self._parts.metadata
        return opts

    def _unreachable(self, why: str, method: str) -> Unavailable:
        if why == "connection failed":
            why = diagnose(self._parts)
        return unreachable(self.address, why, method)

    def _translate(self, err: grpc.RpcError, method: str, timeout: float | None,
                   connected: bool) -> RpcError:
        return translate(err, address=self.address, method=method, connected=connected,
                         timeout=timeout)


class JobBase(Generic[R]):
    """The job handle's fields, the same for Job and AsyncJob."""

    def __init__(self, proto: pb.Job) -> None:
        self._proto = proto

    @property
    def id(self) -> str:
        return self._proto.id

    @property
    def proto(self) -> pb.Job:
        """The Job message as last seen."""
        return self._proto

    @property
    def kind(self) -> str:
        """benchmark, profile, memory, collective, attention, precision or ddp
        (the JobKind's short name)."""
        return kind_of(self._proto)

    @property
    def devices(self) -> list[str]:
        return list(self._proto.devices)

    @property
    def spec(self) -> pb.JobSpec:
        """The request as the daemon resolved it (every default written out)."""
        return self._proto.spec

    @property
    def submitter(self) -> str:
        """Who submitted it, as the daemon knows the caller ('' when it checks no one)."""
        return self._proto.submitter

    @property
    def error(self) -> tuple[grpc.StatusCode | None, str] | None:
        """(code, message) of a job that failed, None otherwise."""
        if self._proto.error_code == 0 and not self._proto.error_message:
            return None
        return error_code(self._proto), self._proto.error_message

    def _result(self) -> R:
        return result_of(self._proto)  # type: ignore[return-value]

    def to_pandas(self) -> pd.DataFrame:
        """self.result.to_pandas()."""
        return self._result().to_pandas()

    def _html(self, state: Any) -> str:
        head = (f"<b>benchd job {html.escape(self.id)}</b> {html.escape(self.kind)} on "
                f"{html.escape(','.join(self.devices))}: {state.value}")
        if state.value == "succeeded":
            try:
                return head + self._result()._repr_html_()
            except BenchdError:
                pass
        if self._proto.error_message:
            head += f"<br><pre>{html.escape(self._proto.error_message)}</pre>"
        return head

    # wait()'s steps, the same for both clients (only the waiting differs).
    def _take(self, e: Event, bar: Progress) -> bool:
        """One Watch event: the bar moves; True (and the job kept) once it has ended."""
        bar.update(e)
        if e.terminal and e.job is not None:
            self._proto = e.job
            return True
        return False

    def _why_lost(self, err: RpcError, deadline: float | None, timeout: float | None,
                  state: Callable[[], str]) -> str:
        """Why the Watch stream broke, when that means the daemon went away
        (then wait() reconnects); raises what wait() raises otherwise: its own
        deadline (WaitTimeout), or any other refusal as it came."""
        if isinstance(err, DeadlineExceeded):
            if deadline is not None and time.monotonic() >= deadline - 0.01:
                raise WaitTimeout(f"job {self.id} still {state()} after {timeout:g} s") from None
            raise err
        if err.code not in LOST_CODES:
            raise err
        return err.message

    def _reconnect_verdict(self, client: ClientBase, deadline: float | None, why: str,
                           timeout: float | None, limit: float,
                           last: BenchdError | None) -> BenchdError | None:
        """The error to raise after a failed reconnect attempt, or None to try again."""
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return WaitTimeout(f"job {self.id}: lost benchd at {client.address} ({why}) and the "
                               f"wait's {timeout:g} s ran out before it answered again")
        if now >= limit:
            return Unavailable(
                f"lost benchd at {client.address} while waiting for job {self.id} ({why}) and "
                f"could not reach it again within {client.reconnect_timeout:g} s "
                f"({last.message if isinstance(last, RpcError) else last}); the job's state "
                "is unknown here: call wait() again once the daemon is back",
                address=client.address, method="Watch", field="")
        return None
