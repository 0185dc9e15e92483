"""Client.nodes() and Client.wait_for_nodes() (ListNodes; `benchctl nodes
[--wait N --wait-timeout S]`) against real daemons: the session's daemon
alone (a cluster of one), and a cluster of two on 127.0.0.1 and 127.0.0.2
(the daemon's cluster flags), formed while a client waits."""
from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from typing import Iterator

import pytest

import benchd
from benchd.v1 import bench_pb2 as pb
from conftest import Daemon

HOSTS = ("127.0.0.1", "127.0.0.2")


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_a_daemon_outside_a_cluster_lists_itself(client: benchd.Client,
                                                 daemon: Daemon) -> None:
    nodes = client.nodes()
    assert isinstance(nodes, benchd.Nodes) and isinstance(nodes.proto, pb.ListNodesResponse)
    assert nodes.expected_nodes == 1 and nodes.coordinator == "", nodes.proto
    assert len(nodes) == 1 and nodes.ready == ["node0"], nodes.proto
    me = nodes[0]
    assert me.self and me.rank == 0 and me.state == pb.NODE_STATE_READY, me
    assert [d.name for d in me.devices] == ["cpu:0", "cpu:1"], me
    assert nodes.summary() == "1 of 1 nodes READY" and "1 of 1 nodes READY" in repr(nodes)
    df = nodes.to_pandas()
    assert list(df.columns) == ["name", "rank", "state", "address", "hostname", "devices",
                                "benchd", "detail", "self"]
    assert df.iloc[0]["state"] == "ready" and df.iloc[0]["devices"] == "cpu:0,cpu:1"
    assert "1 of 1 nodes READY" in nodes._repr_html_()
    assert client.wait_for_nodes(1, timeout=5).ready == ["node0"]


def test_wait_for_nodes_gives_up_naming_what_is_missing(client: benchd.Client) -> None:
    started = time.monotonic()
    with pytest.raises(benchd.WaitTimeout) as e:
        client.wait_for_nodes(2, timeout=1)
    assert 0.9 < time.monotonic() - started < 10
    assert str(e.value) == "waited 1 s for 2 READY nodes: 1 of 1 nodes READY", e.value
    assert isinstance(e.value, TimeoutError)


@pytest.mark.parametrize("n,timeout,error,says", [
    (0, 1, benchd.ArgumentError, "n: expected 1..1024 nodes, got 0"),
    (1025, 1, benchd.ArgumentError, "n: expected 1..1024"),
    ("2", 1, benchd.ArgumentTypeError, "n"),
    (True, 1, benchd.ArgumentTypeError, "n"),
    (2, -1, benchd.ArgumentError, "timeout: expected 0..86400 seconds, got -1"),
    (2, float("nan"), benchd.ArgumentError, "timeout"),
])
def test_wait_for_nodes_checks_its_arguments(client: benchd.Client, n: object, timeout: object,
                                             error: type, says: str) -> None:
    with pytest.raises(error) as e:
        client.wait_for_nodes(n, timeout)  # type: ignore[arg-type]
    assert says in str(e.value), e.value


def test_wait_for_nodes_keeps_asking_while_the_daemon_is_unreachable() -> None:
    """As benchctl nodes --wait in a launch script: the daemon is not up yet
    (UNAVAILABLE), then it is."""
    address = f"127.0.0.1:{free_port('127.0.0.1')}"
    with benchd.Client(address, connect_timeout=1) as c:
        with pytest.raises(benchd.Unavailable):
            c.wait_for_nodes(1, timeout=1)
    late = Daemon(["cpu:0"], prefix="benchd-py-nodes-late-")
    starter = threading.Timer(1.0, lambda: late.start(listen=address))
    try:
        starter.start()
        with benchd.Client(address, connect_timeout=1) as c:
            nodes = c.wait_for_nodes(1, timeout=60)
        assert nodes.ready == ["node0"] and nodes[0].self, nodes.proto
    finally:
        starter.join()
        late.cleanup()


class TwoNodes:
    """node0 (the coordinator) on 127.0.0.1 and node1 on 127.0.0.2, fixed
    ports, a LOST bound of 2 s."""

    def __init__(self) -> None:
        self.addresses = [f"{h}:{free_port(h)}" for h in HOSTS]
        # The cluster's secret, in a file only we may read (as a launcher
        # hands every member one).
        self.secret_dir = tempfile.mkdtemp(prefix="benchd-py-secret-")
        secret = os.path.join(self.secret_dir, "secret")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        self.daemons = [
            Daemon(["cpu:0"], prefix=f"benchd-py-node{rank}-", extra_args=[
                "--cluster-coordinator", self.addresses[0], "--node-rank", str(rank),
                "--nodes", "2", "--cluster-lost-after", "2", "--cluster-secret-file", secret])
            for rank in range(2)]

    def start(self, rank: int) -> Daemon:
        return self.daemons[rank].start(listen=self.addresses[rank])

    def cleanup(self) -> None:
        for d in self.daemons:
            d.cleanup()
        shutil.rmtree(self.secret_dir, ignore_errors=True)


@pytest.fixture
def two_nodes() -> Iterator[TwoNodes]:
    c = TwoNodes()
    try:
        yield c
    finally:
        c.cleanup()


def test_a_cluster_forms_while_a_client_waits(two_nodes: TwoNodes) -> None:
    two_nodes.start(0)
    with benchd.Client(two_nodes.addresses[0]) as c:
        waiting = c.nodes()
        assert waiting.expected_nodes == 2 and waiting.coordinator == two_nodes.addresses[0]
        assert waiting.ready == ["node0"], waiting.proto
        assert waiting[1].state == pb.NODE_STATE_WAITING, waiting.proto
        with pytest.raises(benchd.WaitTimeout) as e:
            c.wait_for_nodes(2, timeout=0.5)
        assert "1 of 2 nodes READY (rank 1 WAITING: not heard from yet)" in str(e.value)
        # node1 comes up while the client waits.
        starter = threading.Timer(0.5, lambda: two_nodes.start(1))
        starter.start()
        try:
            nodes = c.wait_for_nodes(2, timeout=60)
        finally:
            starter.join()
        assert [n.name for n in nodes] == ["node0", "node1"] and nodes.ready == ["node0", "node1"]
        assert [n.address for n in nodes] == two_nodes.addresses, nodes.proto
        assert nodes.summary() == "2 of 2 nodes READY"
        assert list(nodes.to_pandas()["self"]) == [True, False]
        # The README's example: a Gloo group over every node's cpu:0.
        g = c.create_group(devices=[f"{n.name}/cpu:0" for n in nodes], backend="gloo")
        df = c.collective(group=g.id, op="all_reduce", sizes=["1KiB", "64KiB"],
                          iters=3).wait(timeout=120, progress=False).result.to_pandas()
        assert len(df) == 2 and (df["wrong_elements"] == 0).all(), df.to_dict("records")

    # Any member answers; node1 lost is named with why.
    async def from_node1() -> benchd.Nodes:
        async with benchd.AsyncClient(two_nodes.addresses[1]) as ac:
            listed = await ac.nodes()
            assert [n.self for n in listed] == [False, True], listed.proto
            return await ac.wait_for_nodes(2, timeout=10)
    assert asyncio.run(from_node1()).ready == ["node0", "node1"]
    two_nodes.daemons[1].stop()
    with benchd.Client(two_nodes.addresses[0]) as c:
        deadline = time.monotonic() + 20
        while c.nodes()[1].state != pb.NODE_STATE_LOST:
            assert time.monotonic() < deadline, c.nodes().proto
            time.sleep(0.1)
        with pytest.raises(benchd.WaitTimeout) as e:
            c.wait_for_nodes(2, timeout=0)
        assert "1 of 2 nodes READY (node1 LOST: no heartbeat for" in str(e.value), e.value
