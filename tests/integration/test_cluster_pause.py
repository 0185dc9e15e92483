"""A coordinator paused past the lost bound (issue 36): two real daemons
(the harness's Cluster, node0 the coordinator on 127.0.0.1, node1 on
127.0.0.2, --cluster-lost-after 2), a resident Gloo group across both, and
node0 stopped with SIGSTOP until node1 has found it LOST, then continued.

Groups do not re-form by themselves (docs/architecture.md "Cluster",
"Failure paths"): once both nodes are READY again the group is BROKEN, naming
the loss; `benchctl groups list` shows it broken with the command that makes
it again, and a collective submitted on it is refused with the same command.
That command, run as printed, makes a new group; the broken one is destroyed
(its ranks left on both nodes), and an all-reduce on the new one passes its
exact check. (Destroying the broken group is what has node1's worker drop
its rank of it: the coordinator could not reach node1 when it aborted the
group's other ranks.)"""
import json
import os
import re
import shlex
import signal
import time

import grpc
import pytest

from conftest import Cluster, bench_pb2
from test_cluster import cluster_stubs, node_call, secret_of

LOST_AFTER = "2"  # seconds: the smallest bound the daemon takes, so the pause is short


@pytest.fixture
def cluster():
    c = Cluster(prefix="benchd-clpause", lost_after=LOST_AFTER).start()
    yield c
    # node0 may still be stopped when an assertion failed mid-pause.
    if c.nodes[0].proc is not None and c.nodes[0].proc.poll() is None:
        os.kill(c.nodes[0].pid, signal.SIGCONT)
    c.close()


def node_state(daemon, rank):
    return daemon.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes[rank]


def wait_until(what, check, timeout=20):
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} not seen in {timeout}s; last: {last}")


def test_a_group_broken_by_a_coordinator_pause_is_recreated_as_its_error_says(cluster):
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    made = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                     "--backend", "gloo", "--json", check=0).stdout)
    assert made["state"] == "GROUP_STATE_READY", made
    group = made["id"]

    # The coordinator stops answering; node1 finds it LOST after the bound.
    os.kill(node0.pid, signal.SIGSTOP)
    try:
        lost = wait_until("node1 finding node0 LOST", lambda: (
            (n := node_state(node1, 0)).state == bench_pb2.NODE_STATE_LOST and n), timeout=15)
        assert "has not answered" in lost.detail, lost
    finally:
        os.kill(node0.pid, signal.SIGCONT)

    # Both sides READY again, node1 by its next heartbeat.
    wait_until("node1 READY on node0",
               lambda: node_state(node0, 1).state == bench_pb2.NODE_STATE_READY)
    wait_until("node0 READY on node1",
               lambda: node_state(node1, 0).state == bench_pb2.NODE_STATE_READY)
    assert "node1 (rank 1, " in node0.log() and ") is back" in node0.log(), node0.log()

    # The group stays BROKEN: it does not re-form by itself.
    groups = node0.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups
    assert [g.id for g in groups] == [group], groups
    assert groups[0].state == bench_pb2.GROUP_STATE_BROKEN, groups[0]
    assert groups[0].broken_reason.startswith(
        "node node1 of node1/cpu:0 (rank 1) is lost: no heartbeat for"), groups[0].broken_reason
    time.sleep(float(LOST_AFTER))  # still broken a bound later, every member READY
    assert node0.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups[0].state \
        == bench_pb2.GROUP_STATE_BROKEN

    # `groups list` says it is broken, why, and the command that makes it again.
    hint = f"benchctl groups create --device cpu:0,node1/cpu:0 --backend gloo"
    listed = node0.benchctl("groups", "list", check=0).stdout
    assert re.search(rf"{group}\s+gloo\s+cpu:0,node1/cpu:0\s+broken", listed), listed
    assert "is lost: no heartbeat for" in listed and hint in listed, listed
    # A collective on it is refused at Submit, saying the same.
    refused = node0.benchctl("submit", "collective", "--group", group, "--op", "all_reduce",
                             "--sizes", "4KiB", "--iters", "2", check=None)
    assert refused.returncode != 0, refused.stdout
    assert f"group {group} is broken: node node1 of node1/cpu:0 (rank 1) is lost" \
        in refused.stderr, refused.stderr
    assert hint in refused.stderr, refused.stderr

    # The command as printed makes a new group; the broken one goes.
    command = re.search(r"\((benchctl groups create [^)]*)\)", refused.stderr).group(1)
    again = json.loads(node0.benchctl(*shlex.split(command)[1:], "--json", check=0).stdout)
    assert again["state"] == "GROUP_STATE_READY" and again["id"] != group, again
    assert again["devices"] == ["cpu:0", "node1/cpu:0"], again
    # Destroying the broken group has node1, back, drop its rank of it: its
    # worker still held node0's g1 (the coordinator could not reach it when it
    # aborted the group's other ranks).
    node0.benchctl("groups", "destroy", group, check=0)
    cluster_pb2, _, worker_pb2 = cluster_stubs()
    code, answer = node_call(cluster.addresses[1], "LeaveGroup", cluster_pb2.NodeLeaveGroupRequest(
        device="cpu:0", from_node="node0", request=worker_pb2.LeaveGroupRequest(group=group)),
        secret_of(cluster))
    assert code == grpc.StatusCode.OK and not answer.found, (code, answer)
    job = json.loads(node0.benchctl(
        "submit", "collective", "--group", again["id"], "--op", "all_reduce", "--min", "1KiB",
        "--max", "64KiB", "--factor", "8", "--iters", "3", "--warmup", "1", "--watch", "--json",
        timeout=120, check=0).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    rows = job["result"]["collective"]["rows"]
    assert rows and all(int(r.get("wrongElements", 0)) == 0 and int(r["checkedElements"]) > 0
                        for r in rows), rows
    assert [g.id for g in node0.stub.ListGroups(bench_pb2.ListGroupsRequest(),
                                                timeout=10).groups] == [again["id"]]
