"""The load's client processes (each started with multiprocessing's spawn, so
each has its own grpcio): unary clients that loop over a fixed mix of GetJob,
ListJobs pages and GetNodeInfo, and one process that holds the Watch streams.

A unary client uses grpc.aio (`concurrency` coroutines, each with one call in
flight) or the sync stub (`concurrency` threads). It records the latency of
every call that completes inside the measured window [start_at, end_at]
(time.monotonic, one clock for every process of this machine)."""
import asyncio
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

import grpc

from daemon import import_stubs

KINDS = ("GetJob", "ListJobs", "GetNodeInfo")
CALL_TIMEOUT_S = 30.0


@dataclass
class ClientPlan:
    index: int
    address: str
    stub_dir: str
    api: str  # "aio" or "sync"
    concurrency: int
    job_ids: List[str]
    page_tokens: List[str]
    page_size: int
    mix: List[Tuple[str, int]]  # (kind, weight)


@dataclass
class ClientResult:
    index: int
    latencies_ms: Dict[str, array] = field(default_factory=dict)
    failures: List[str] = field(default_factory=list)


@dataclass
class Window:
    start_at: float
    end_at: float


def kind_cycle(mix: List[Tuple[str, int]]) -> List[str]:
    """The kinds in the mix's proportions, interleaved (6:3:1 -> 10 slots)."""
    slots: List[Tuple[float, str]] = []
    for kind, weight in mix:
        slots += [((i + 0.5) / weight, kind) for i in range(weight)]
    return [kind for _, kind in sorted(slots)]


def requests(plan: ClientPlan, pb: Any) -> Dict[str, List[Any]]:
    """Every request a client sends, built once (not per call)."""
    return {
        "GetJob": [pb.GetJobRequest(job_id=j) for j in plan.job_ids],
        "ListJobs": [pb.ListJobsRequest(page_size=plan.page_size, page_token=t)
                     for t in plan.page_tokens],
        "GetNodeInfo": [pb.GetNodeInfoRequest()],
    }


class Recorder:
    """Latencies of calls that end inside the window, and every failure."""

    def __init__(self, index: int, window: Window) -> None:
        self.window = window
        self.result = ClientResult(index, {k: array("d") for k in KINDS})
        self.lock = threading.Lock()  # the sync client's threads share it

    def ok(self, kind: str, started: float, ended: float) -> None:
        if self.window.start_at <= ended <= self.window.end_at:
            with self.lock:
                self.result.latencies_ms[kind].append((ended - started) * 1e3)

    def failed(self, kind: str, err: grpc.RpcError) -> None:
        with self.lock:
            self.result.failures.append(f"{kind}: {err.code().name}: {err.details()}")


def wait_for_window(ready: Any, go: Any, times: Any) -> Window:
    """Tell the parent this client is set up; wait for it to open the window."""
    ready.put(1)
    go.wait()
    return Window(times[0], times[1])


async def aio_loop(stubs: Dict[str, Callable[..., Any]], reqs: Dict[str, List[Any]],
                   kinds: List[str], slot: int, stride: int, rec: Recorder) -> None:
    i = slot
    while time.monotonic() < rec.window.end_at:
        kind = kinds[i % len(kinds)]
        choices = reqs[kind]
        request = choices[(i // len(kinds)) % len(choices)]
        started = time.monotonic()
        try:
            await stubs[kind](request, timeout=CALL_TIMEOUT_S)
            rec.ok(kind, started, time.monotonic())
        except grpc.RpcError as err:
            rec.failed(kind, err)
        i += stride


async def aio_client(plan: ClientPlan, ready: Any, go: Any, times: Any) -> ClientResult:
    pb, pb_grpc = import_stubs(plan.stub_dir)
    async with grpc.aio.insecure_channel(plan.address) as channel:
        stub = pb_grpc.BenchStub(channel)
        await stub.GetNodeInfo(pb.GetNodeInfoRequest(), timeout=CALL_TIMEOUT_S)
        stubs = {k: getattr(stub, k) for k in KINDS}
        reqs, kinds = requests(plan, pb), kind_cycle(plan.mix)
        loop = asyncio.get_running_loop()
        window = await loop.run_in_executor(None, wait_for_window, ready, go, times)
        rec = Recorder(plan.index, window)
        # Slots are spread over the whole job list, so clients touch different jobs.
        offset = plan.index * 7919
        await asyncio.gather(*(aio_loop(stubs, reqs, kinds, offset + s, plan.concurrency, rec)
                               for s in range(plan.concurrency)))
        return rec.result


def sync_loop(stubs: Dict[str, Callable[..., Any]], reqs: Dict[str, List[Any]],
              kinds: List[str], slot: int, stride: int, rec: Recorder) -> None:
    i = slot
    while time.monotonic() < rec.window.end_at:
        kind = kinds[i % len(kinds)]
        choices = reqs[kind]
        request = choices[(i // len(kinds)) % len(choices)]
        started = time.monotonic()
        try:
            stubs[kind](request, timeout=CALL_TIMEOUT_S)
            rec.ok(kind, started, time.monotonic())
        except grpc.RpcError as err:
            rec.failed(kind, err)
        i += stride


def sync_client(plan: ClientPlan, ready: Any, go: Any, times: Any) -> ClientResult:
    pb, pb_grpc = import_stubs(plan.stub_dir)
    with grpc.insecure_channel(plan.address) as channel:
        stub = pb_grpc.BenchStub(channel)
        stub.GetNodeInfo(pb.GetNodeInfoRequest(), timeout=CALL_TIMEOUT_S)
        stubs = {k: getattr(stub, k) for k in KINDS}
        reqs, kinds = requests(plan, pb), kind_cycle(plan.mix)
        rec = Recorder(plan.index, wait_for_window(ready, go, times))
        offset = plan.index * 7919
        threads = [threading.Thread(target=sync_loop,
                                    args=(stubs, reqs, kinds, offset + s, plan.concurrency, rec))
                   for s in range(plan.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return rec.result


def client_main(plan: ClientPlan, ready: Any, go: Any, times: Any, out: Any) -> None:
    """A client process's entry: run the plan, put its ClientResult on `out`."""
    if plan.api == "aio":
        result = asyncio.run(aio_client(plan, ready, go, times))
    else:
        result = sync_client(plan, ready, go, times)
    out.put(result)


@dataclass
class WatchResult:
    opened: int = 0  # streams that delivered the job's history (its queued event)
    open_at_end: int = 0  # still open when the load ended
    events: int = 0
    failures: List[str] = field(default_factory=list)
    # ms from each stream's start to its first event, of the streams that had one
    first_event_ms: array = field(default_factory=lambda: array("d"))
    start_all_s: float = float("nan")  # from the first stream's start to the last one's
    first_all_s: float = float("nan")  # from the first stream's start to the last first event


async def hold_one(call: Any, job_id: str, started: float, result: WatchResult,
                   opened: Callable[[], None]) -> None:
    """Read one Watch stream until it ends; any end before we cancel it is a failure."""
    first = True
    try:
        async for _ in call:
            result.events += 1
            if first:
                first = False
                result.first_event_ms.append((time.monotonic() - started) * 1e3)
                opened()
        result.failures.append(f"Watch {job_id}: ended (OK) while the job was queued")
    except asyncio.CancelledError:
        raise
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.CANCELLED or not call.cancelled():
            result.failures.append(f"Watch {job_id}: {err.code().name}: {err.details()}")


async def hold_watches(address: str, stub_dir: str, job_ids: List[str], channels: int,
                       ready: Any, stop: Any) -> WatchResult:
    pb, pb_grpc = import_stubs(stub_dir)
    # A local subchannel pool per channel: each is its own TCP connection.
    chans = [grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
             for _ in range(channels)]
    stubs = [pb_grpc.BenchStub(c) for c in chans]
    result = WatchResult()

    def opened() -> None:
        result.opened += 1
        if result.opened == len(job_ids):
            result.first_all_s = time.monotonic() - started[0]
            ready.put(result.opened)

    calls, started = [], []
    for i, j in enumerate(job_ids):
        started.append(time.monotonic())
        calls.append(stubs[i % channels].Watch(pb.WatchRequest(job_id=j)))
    if started:
        result.start_all_s = started[-1] - started[0]
    tasks = [asyncio.ensure_future(hold_one(c, j, t, result, opened))
             for c, j, t in zip(calls, job_ids, started)]
    if not job_ids:
        ready.put(0)
    await asyncio.get_running_loop().run_in_executor(None, stop.wait)
    result.open_at_end = sum(1 for c in calls if not c.done())
    for c in calls:
        c.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in chans:
        await c.close()
    return result


def watcher_main(address: str, stub_dir: str, job_ids: List[str], channels: int,
                 ready: Any, stop: Any, out: Any) -> None:
    """The watcher process's entry: hold one Watch per job until `stop`."""
    out.put(asyncio.run(hold_watches(address, stub_dir, job_ids, channels, ready, stop)))
