"""CreateGroup leaves nothing behind: 1,000 refused calls (bad timeout, bad
devices) and a few create + destroy cycles on CPU workers end with the
daemon's threads and memory maps where they started (give or take a few)."""
import math
import os
import time

import grpc
import pytest

from conftest import bench_pb2, cpu_daemon

DEVICES = ["cpu:0", "cpu:1"]
# gRPC and glibc keep a few threads and stack caches of their own.
THREAD_SLACK = 8
MAPS_SLACK = 40


@pytest.fixture(scope="module")
def cpu2():
    with cpu_daemon(DEVICES, "benchd-leaks-") as d:
        yield d


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def create(d, timeout_seconds=0.0, devices=DEVICES):
    return d.stub.CreateGroup(bench_pb2.CreateGroupRequest(
        devices=devices, backend=bench_pb2.COLLECTIVE_BACKEND_GLOO,
        timeout_seconds=timeout_seconds), timeout=120)


def settle(pid, count, start, slack, deadline=10):
    """The count once it is within slack of start, or the last one seen."""
    end = time.time() + deadline
    while True:
        n = count(pid)
        if n <= start + slack or time.time() > end:
            return n
        time.sleep(0.2)


def test_refused_and_finished_create_group_calls_leave_no_threads_or_maps(cpu2):
    pid = cpu2.proc.pid
    # Warm gRPC up (its pollers and the channel's threads) before counting.
    for _ in range(20):
        with pytest.raises(grpc.RpcError):
            create(cpu2, devices=["cpu:0", "cpu:0"])
    t0, m0 = threads(pid), maps(pid)

    def refused(n, **req):
        for _ in range(n):
            with pytest.raises(grpc.RpcError) as e:
                create(cpu2, **req)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()

    def check(after):
        t = settle(pid, threads, t0, THREAD_SLACK)
        m = settle(pid, maps, m0, MAPS_SLACK)
        assert t <= t0 + THREAD_SLACK, f"threads {t0} -> {t} after {after}"
        assert m <= m0 + MAPS_SLACK, f"memory maps {m0} -> {m} after {after}"

    # 1,000 refused calls: bad devices, then timeouts out of range.
    refused(400, devices=["cpu:0", "cpu:0"])  # a repeated device
    refused(100, devices=["cpu:0", "cpu:9"])  # not served here
    check("500 CreateGroup calls refused for their devices")
    for bad in [-1.0, math.nan, math.inf, -math.inf, 0.5, 86401.0]:
        refused(84, timeout_seconds=bad)
    check("1,000 refused CreateGroup calls")

    for _ in range(5):
        group = create(cpu2)
        assert group.state == bench_pb2.GROUP_STATE_READY
        cpu2.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=60)
    check("1,000 refused CreateGroup calls and 5 create + destroy cycles")
