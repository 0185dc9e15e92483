"""A cluster of two real daemons on this machine (docs/architecture.md
"Cluster"): node0 on 127.0.0.1, node1 on 127.0.0.2, each with its own CPU
workers. They form a cluster with the cluster flags, a Gloo group spans both,
and an all-reduce across them passes its exact check, as does data-parallel
training with a rank on each node; a member that dies is
LOST within the bound, the collective fails naming it, and once it is back the
cluster and the group form again. (tests/cluster runs the same under Slurm,
each node in its own network namespace.)"""
import concurrent.futures
import json
import os
import signal
import subprocess
import tempfile
import time

import grpc
import pytest

from conftest import BIN, Cluster, Daemon, bench_pb2, free_port, wait_for_state

LOST_AFTER = "2"  # seconds: the test waits for a loss


@pytest.fixture
def cluster():
    c = Cluster(lost_after=LOST_AFTER).start()
    yield c
    c.close()


def nodes_json(daemon, *extra, check=0):
    r = daemon.benchctl("nodes", "--json", *extra, check=check)
    return json.loads(r.stdout) if check == 0 else r


def wait_state(daemon, rank, state, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        nodes = daemon.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes
        if nodes[rank].state == state:
            return nodes[rank]
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} not in state {state} after {timeout}s: {nodes}")


def all_reduce(daemon, group, check=0, extra=()):
    r = daemon.benchctl("submit", "collective", "--group", group, "--op", "all_reduce",
                        "--min", "1KiB", "--max", "256KiB", "--factor", "16", "--iters", "5",
                        "--warmup", "2", "--watch", "--json", *extra, check=check)
    return json.loads(r.stdout) if r.stdout.strip() else None


def test_two_daemons_form_a_cluster_and_any_member_lists_it(cluster):
    node0, node1 = cluster.nodes
    waited = node1.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    assert "2 of 2 nodes READY" in waited.stdout, waited.stdout
    for daemon, me in ((node0, 0), (node1, 1)):
        listed = nodes_json(daemon)
        assert listed["expectedNodes"] == 2 and listed["coordinator"] == cluster.coordinator
        names = [n["name"] for n in listed["nodes"]]
        assert names == ["node0", "node1"], listed
        for rank, node in enumerate(listed["nodes"]):
            assert node["state"] == "NODE_STATE_READY", node
            assert node["address"] == f"{cluster.hosts[rank]}:{cluster.ports[rank]}"
            assert node["devices"][0]["name"] == "cpu:0"
            assert node["versions"]["benchd"], node
            assert node.get("self", False) == (rank == me)


def test_a_gloo_group_across_nodes_passes_its_exact_check(cluster):
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    made = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                     "--backend", "gloo", "--json", check=0).stdout)
    # This node's own device keeps its plain name; the other's says its node.
    assert made["devices"] == ["cpu:0", "node1/cpu:0"], made
    assert made["state"] == "GROUP_STATE_READY", made
    job = all_reduce(node0, made["id"])
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    rows = job["result"]["collective"]["rows"]
    assert len(rows) == 3, rows
    for row in rows:
        assert row["devices"] == ["cpu:0", "node1/cpu:0"]
        assert int(row.get("wrongElements", 0)) == 0 and int(row["checkedElements"]) > 0, row
    # A request naming another member's device that is not there.
    bad = node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:7", check=2)
    assert "node1/cpu:7 is not served" in bad.stderr and "node1/cpu:0" in bad.stderr, bad.stderr
    bad = node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node9/cpu:0", check=2)
    assert "node9/cpu:0 is not served" in bad.stderr, bad.stderr


def test_a_member_that_dies_is_lost_named_and_rejoins(cluster):
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    group = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                      "--backend", "gloo", "--json", check=0).stdout)["id"]
    # A long sweep, and node1's daemon killed while it runs (its workers go
    # with it: they watch their parent).
    submitted = json.loads(node0.benchctl(
        "submit", "collective", "--group", group, "--op", "all_reduce", "--min", "1MiB",
        "--max", "64MiB", "--iters", "200", "--json", check=0).stdout)
    job_id = submitted["id"]
    deadline = time.time() + 60
    while time.time() < deadline:
        job = node0.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=10)
        if job.state == bench_pb2.JOB_STATE_RUNNING:
            break
        time.sleep(0.05)
    time.sleep(1)  # into the sweep (it runs for tens of seconds)
    # node0's channel to node1 was open (a forwarded call) when node1 went.
    node0.benchctl("list", "--device", "node1/cpu:0", check=0)
    node1.stop(sig=signal.SIGKILL)
    # A call in the window before node1 is found lost fails to connect, which
    # puts node0's channel to it into its connect backoff.
    node0.benchctl("list", "--device", "node1/cpu:0", check=None)
    failed = None
    deadline = time.time() + 60
    while time.time() < deadline:
        failed = node0.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=10)
        if failed.state in (bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_SUCCEEDED):
            break
        time.sleep(0.1)
    assert failed.state == bench_pb2.JOB_STATE_FAILED, failed
    assert "node1/cpu:0 (rank 1)" in failed.error_message, failed.error_message
    assert "node node1" in failed.error_message, failed.error_message
    lost = wait_state(node0, 1, bench_pb2.NODE_STATE_LOST, timeout=15)
    assert "no heartbeat for" in lost.detail, lost
    groups = node0.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups
    assert groups[0].state == bench_pb2.GROUP_STATE_BROKEN, groups
    # While it is lost, its devices are refused naming why.
    refused = node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0", check=2)
    assert "node1/cpu:0 is not served" in refused.stderr, refused.stderr

    # Gone long enough for node0's reconnect backoff to grow past the time
    # node1 takes to come back (1 s, 1.6 s, 2.6 s, 4.1 s, ...).
    time.sleep(8)
    # Back: the same rank and address joins again; a new group works.
    cluster.nodes[1] = node1 = cluster.make(1)
    node1.start()
    node1.wait_worker_up()
    wait_state(node0, 1, bench_pb2.NODE_STATE_READY, timeout=30)
    # READY means forwarded calls reach it at once, not after the channel's
    # backoff (they failed "failed to connect" for 3-6 s before).
    forwarded = node0.benchctl("list", "--device", "node1/cpu:0", check=None)
    assert forwarded.returncode == 0, forwarded.stderr
    again = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                      "--backend", "gloo", "--json", check=0).stdout)["id"]
    job = all_reduce(node0, again)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert "is back" in node0.log(), node0.log()


def test_the_member_sees_a_lost_coordinator(cluster):
    node0, node1 = cluster.nodes
    node1.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    node0.stop(sig=signal.SIGKILL)
    lost = wait_state(node1, 0, bench_pb2.NODE_STATE_LOST, timeout=15)
    assert f"the coordinator at {cluster.coordinator} has not answered" in lost.detail, lost
    r = node1.benchctl("nodes", "--wait", "2", "--wait-timeout", "1", check=4)
    assert "1 of 2 nodes READY" in r.stderr and "node0 LOST" in r.stderr, r.stderr


def test_cluster_flags_are_checked_at_start(tmp_path):
    def start(*args):
        return subprocess.run([os.path.join(BIN, "benchd"), "--data-dir", str(tmp_path),
                               "--metrics", "off", "--device", "cpu:0", *args],
                              capture_output=True, text=True, timeout=60)
    r = start("--cluster-coordinator", "127.0.0.1:7999", "--nodes", "2")
    assert r.returncode == 1 and "--node-rank N and --nodes M together" in r.stderr, r.stderr
    r = start("--cluster-coordinator", "127.0.0.1:7999", "--node-rank", "2", "--nodes", "2")
    assert r.returncode == 1 and "--node-rank" in r.stderr and "0..1" in r.stderr, r.stderr
    r = start("--cluster-from", "slurm")
    assert r.returncode == 1 and "SLURM_JOB_NODELIST is not set" in r.stderr, r.stderr
    r = start("--listen", "127.0.0.1:0", "--cluster-coordinator", "127.0.0.1:7999",
              "--node-rank", "0", "--nodes", "1")
    assert r.returncode == 1 and "fixed port" in r.stderr, r.stderr


def test_a_second_daemon_claiming_a_live_rank_is_refused(cluster):
    node0, _ = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    port = free_port("127.0.0.3")
    d = tempfile.mkdtemp(prefix="benchd-cl-twin-")
    twin = Daemon(d, ["--listen", f"127.0.0.3:{port}", "--metrics", "off",
                      "--cluster-coordinator", cluster.coordinator, "--node-rank", "1",
                      "--nodes", "2", "--cluster-secret-file", cluster.secret_file]).start()
    try:
        deadline = time.time() + 20
        while time.time() < deadline and "is held by node1" not in twin.log():
            time.sleep(0.2)
        assert f"rank 1 is held by node1 at 127.0.0.2:{cluster.ports[1]}" in twin.log(), twin.log()
        listed = twin.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10)
        assert "refused this member" in listed.nodes[0].detail, listed
        # The real node1 stays in the table.
        assert node0.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes[1].address \
            == f"127.0.0.2:{cluster.ports[1]}"
    finally:
        twin.stop()
        subprocess.run(["rm", "-rf", d])


def test_any_node_takes_a_job_for_another_nodes_device(cluster):
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    # Submitted to node0 for node1's device: it runs on node1, named node1/ID here.
    job = json.loads(node0.benchctl(
        "submit", "profile", "--device", "node1/cpu:0", "--preset", "tiny",
        "--context-length", "32", "--watch", "--json", check=0).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert job["id"].startswith("node1/") and job["devices"] == ["node1/cpu:0"], job
    local_id = job["id"].split("/", 1)[1]
    # node1 has it under its own id, and both nodes answer for it.
    there = json.loads(node1.benchctl("get", local_id, "--json", check=0).stdout)
    assert there["devices"] == ["cpu:0"] and there["state"] == "JOB_STATE_SUCCEEDED", there
    here = json.loads(node0.benchctl("get", job["id"], "--json", check=0).stdout)
    assert here["id"] == job["id"] and here["spec"]["device"] == "node1/cpu:0", here
    # node0 has no job of its own; listing node1's device through node0 shows node1's.
    assert "no jobs" in node0.benchctl("list", check=0).stdout
    listed = json.loads(node0.benchctl("list", "--device", "node1/cpu:0", "--json",
                                       check=0).stdout)["jobs"]
    assert [j["id"] for j in listed] == [job["id"]], listed
    assert listed[0]["devices"] == ["node1/cpu:0"], listed
    r = node0.benchctl("list", "--device", "node7/cpu:0", check=4)
    assert "no node node7" in r.stderr, r.stderr
    # Its artifacts, fetched through node0, are node1's bytes.
    listed = node0.benchctl("artifacts", "list", job["id"], check=0).stdout
    assert "trace.json" in listed, listed
    out = os.path.join(cluster.dirs[0], "fetched-trace.json")
    node0.benchctl("artifacts", "get", job["id"], "trace.json", "-o", out, check=0)
    with open(out, "rb") as a, open(os.path.join(cluster.dirs[1], "artifacts", local_id,
                                                 "trace.json"), "rb") as b:
        assert a.read() == b.read()
    # Watch through node0 replays node1's events under node0's name for the job.
    watched = node0.benchctl("watch", job["id"], "--json", check=0).stdout.splitlines()
    events = [json.loads(line) for line in watched if line.strip()]
    assert events and all(e["jobId"] == job["id"] for e in events), events[:2]
    # Cancel goes there too; unknown jobs and nodes are named.
    r = node0.benchctl("cancel", job["id"], check=4)
    assert "has already ended" in r.stderr, r.stderr
    r = node0.benchctl("get", "node1/999", check=4)
    assert "999" in r.stderr and "NOT_FOUND" in r.stderr, r.stderr
    r = node0.benchctl("get", "node7/1", check=4)
    assert "no node node7" in r.stderr, r.stderr
    # A device of this node may carry its own name.
    own = json.loads(node0.benchctl(
        "submit", "benchmark", "--device", "node0/cpu:0", "--preset", "tiny", "--steps", "1",
        "--warmup-steps", "1", "--context-length", "32", "--watch", "--json", check=0).stdout)
    assert own["state"] == "JOB_STATE_SUCCEEDED" and own["devices"] == ["cpu:0"], own
    mine = json.loads(node0.benchctl("list", "--device", "node0/cpu:0", "--json",
                                     check=0).stdout)["jobs"]
    assert [j["id"] for j in mine] == [own["id"]], mine



def test_a_worker_on_its_way_out_leaves_its_successors_socket(tmp_path):
    # A daemon killed and restarted at once starts a new worker on the same
    # socket path while the old one is still stopping (seen when a cluster
    # member came back within a second, its old worker stuck in a collective):
    # the old one must not remove the new one's socket at exit.
    sock = str(tmp_path / "worker-cpu-0.sock")
    env = dict(os.environ, BENCHD_WORKER_THREADS="1")

    def start():
        p = subprocess.Popen([os.path.join(BIN, "benchd-worker"), "--socket", sock,
                              "--device", "cpu:0"], env=env, stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "serving cpu:0" in line:
                return p
        raise AssertionError(f"worker exited {p.wait()}")

    old = start()
    new = start()  # takes the path over while the old one still runs
    try:
        old.send_signal(signal.SIGTERM)
        assert old.wait(timeout=30) == 0
        assert os.path.exists(sock), "the old worker removed its successor's socket"
    finally:
        new.send_signal(signal.SIGTERM)
        assert new.wait(timeout=30) == 0
    assert not os.path.exists(sock), "a worker leaves its own socket behind"


def test_a_collective_on_devices_of_both_nodes_makes_its_own_group(cluster):
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    job = json.loads(node0.benchctl(
        "submit", "collective", "--devices", "node0/cpu:0,node1/cpu:0", "--backend", "gloo",
        "--min", "4KiB", "--max", "64KiB", "--factor", "16", "--iters", "5", "--warmup", "1",
        "--watch", "--json", check=0).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert job["devices"] == ["cpu:0", "node1/cpu:0"], job
    rows = job["result"]["collective"]["rows"]
    assert rows and all(int(r.get("wrongElements", 0)) == 0 for r in rows), rows
    # The transient group was made for the job and dropped after it.
    assert node0.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups == []
    # Submitted to node1, it runs there (the group lives where it is made).
    there = json.loads(node1.benchctl(
        "submit", "collective", "--devices", "node0/cpu:0,node1/cpu:0", "--backend", "gloo",
        "--sizes", "4KiB", "--iters", "3", "--warmup", "1", "--watch", "--json", check=0).stdout)
    assert there["state"] == "JOB_STATE_SUCCEEDED", there
    assert there["devices"] == ["cpu:0", "node0/cpu:0"], there


def test_data_parallel_training_with_ranks_on_both_nodes(cluster):
    """Issue 33's correctness across daemons: a ddp job whose two ranks are on
    two nodes trains every variant (and the sharded optimizer) to the same
    parameters on both ranks and the same loss in every run."""
    node0, _ = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    job = json.loads(node0.benchctl(
        "submit", "ddp", "--devices", "node0/cpu:0,node1/cpu:0", "--vocab-size", "97",
        "--d-model", "32", "--d-ff", "64", "--num-layers", "2", "--num-heads", "4",
        "--context-length", "16", "--global-batch", "4", "--warmup-steps", "1", "--steps", "2",
        "--bucket-mb", "0.004", "--optimizers", "adamw,sharded_adamw", "--no-traces",
        "--watch", "--json", check=0).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert job["devices"] == ["cpu:0", "node1/cpu:0"], job
    r = job["result"]["ddp"]
    assert r["worldSize"] == 2 and r["group"]["transient"], r["group"]
    rows = r["rows"]
    assert len(rows) == 8, [row.get("variant") for row in rows]  # 4 variants x 2 optimizers
    loss = rows[0]["loss"]
    for row in rows:
        assert row["ranksAgree"], row
        assert [k.get("device") for k in row["ranks"]] == ["cpu:0", "node1/cpu:0"], row["ranks"]
        assert abs(row["loss"] - loss) <= 1e-4 * abs(loss), (row["loss"], loss)
    assert node0.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups == []


def cluster_stubs():
    from benchd.internal import cluster_pb2, cluster_pb2_grpc, worker_pb2
    return cluster_pb2, cluster_pb2_grpc, worker_pb2


def secret_of(cluster):
    with open(cluster.secret_file) as f:
        return f.read().strip()


def forged_heartbeat(cluster, secret=None, **node):
    """A Cluster.Heartbeat to the coordinator as an outsider sends it: node1's
    name, rank and address unless `node` says otherwise, a new incarnation."""
    cluster_pb2, cluster_pb2_grpc, _ = cluster_stubs()
    fields = dict(name="node1", rank=1, address=cluster.addresses[1], hostname="attacker")
    fields.update(node)
    devices = fields.pop("devices", ["cpu:0"])
    request = cluster_pb2.HeartbeatRequest(
        nodes=2, incarnation="forged", node=bench_pb2.ClusterNode(
            devices=[bench_pb2.Device(name=d) for d in devices], **fields))
    metadata = [("benchd-cluster-secret", secret)] if secret else []
    with grpc.insecure_channel(cluster.coordinator) as channel:
        try:
            cluster_pb2_grpc.ClusterStub(channel).Heartbeat(request, metadata=metadata, timeout=10)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            return e.code(), e.details()


def test_a_forged_heartbeat_cannot_take_a_member(cluster):
    """Issue 36: any caller that reached the coordinator could claim rank 1
    at node1's own address, rename it, announce 2,000 devices, or take the
    coordinator's name. Membership needs the cluster's secret, a live rank
    stays its daemon's, names are unique, device lists bounded."""
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    before = node0.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes[1]
    # No secret, or another one: not a member, whatever it claims.
    for _ in range(20):
        code, details = forged_heartbeat(cluster)
        assert code == grpc.StatusCode.UNAUTHENTICATED and "came without it" in details, details
    code, details = forged_heartbeat(cluster, secret="x" * 32)
    assert code == grpc.StatusCode.UNAUTHENTICATED and "not this cluster's" in details, details
    # Even with the secret (a misconfigured member, say): node1 is live.
    secret = secret_of(cluster)
    code, details = forged_heartbeat(cluster, secret=secret)
    assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, details)
    assert f"rank 1 is held by node1 at {cluster.addresses[1]}, which is live" in details, details
    code, details = forged_heartbeat(cluster, secret=secret, name="node0", rank=1)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "is the coordinator's" in details
    code, details = forged_heartbeat(cluster, secret=secret,
                                     devices=[f"cpu:{i}" for i in range(2000)])
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "announces 2000 devices" in details
    # node1 is as it was, for every member.
    for daemon in (node0, node1):
        after = daemon.stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes[1]
        assert (after.hostname, after.address, [d.name for d in after.devices]) == (
            before.hostname, before.address, [d.name for d in before.devices]), after
        assert after.state == bench_pb2.NODE_STATE_READY, after
    # Each cause of refusal is logged once, not once per call.
    log = node0.log()
    lines = [l for l in log.splitlines() if "refused Cluster.Heartbeat" in l]
    assert len([l for l in lines if "came without it" in l]) == 1, lines
    assert len(lines) == 5, lines
    assert all("(logged once per cause)" in l for l in lines), lines


def node_call(address, method, request, secret=None, timeout=10):
    cluster_pb2, cluster_pb2_grpc, _ = cluster_stubs()
    metadata = [("benchd-cluster-secret", secret)] if secret else []
    with grpc.insecure_channel(address) as channel:
        call = getattr(cluster_pb2_grpc.NodeStub(channel), method)
        try:
            answer = call(request, metadata=metadata, timeout=timeout)
            if method == "Run":
                answer = list(answer)
            return grpc.StatusCode.OK, answer
        except grpc.RpcError as e:
            return e.code(), e.details()


def test_the_node_service_takes_only_what_the_cluster_sends(cluster):
    """Issue 36: Node.Run with job id 1 wrote into the member's artifacts/1,
    PrepareGroup(listen_host=0.0.0.0) opened a store on every interface, and
    LeaveGroup from anyone broke the coordinator's groups."""
    cluster_pb2, _, worker_pb2 = cluster_stubs()
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    secret = secret_of(cluster)
    group = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                      "--backend", "gloo", "--json", check=0).stdout)["id"]
    spec = bench_pb2.JobSpec(device="cpu:0")
    run = cluster_pb2.NodeRunRequest(device="cpu:0", from_node="node0",
                                     run=worker_pb2.RunRequest(job_id="1", spec=spec))
    code, details = node_call(cluster.addresses[1], "Run", run)
    assert code == grpc.StatusCode.UNAUTHENTICATED, (code, details)
    # A member's Run is one rank of its own group, nothing else.
    code, details = node_call(cluster.addresses[1], "Run", run, secret)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "has neither" in details, details
    assert not os.path.exists(os.path.join(cluster.dirs[1], "artifacts", "1"))
    # Not a member's name, or the receiving node's own.
    for name in ("node7", "node1"):
        run.from_node = name
        code, details = node_call(cluster.addresses[1], "Run", run, secret)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (name, code, details)
    prepare = cluster_pb2.NodePrepareGroupRequest(
        device="cpu:0", from_node="node0", request=worker_pb2.PrepareGroupRequest(
            group="g9", world_size=2, listen_host="0.0.0.0"))
    code, details = node_call(cluster.addresses[1], "PrepareGroup", prepare, secret)
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert "a group's store listens on 127.0.0.2" in details, details
    # LeaveGroup of the coordinator's group: refused without the secret; from
    # another member it names that member's group of the id, not node0's.
    leave = cluster_pb2.NodeLeaveGroupRequest(
        device="cpu:0", from_node="node1", request=worker_pb2.LeaveGroupRequest(group=group))
    code, _ = node_call(cluster.addresses[0], "LeaveGroup", leave)
    assert code == grpc.StatusCode.UNAUTHENTICATED
    code, answer = node_call(cluster.addresses[0], "LeaveGroup", leave, secret)
    assert code == grpc.StatusCode.OK and not answer.found, answer
    job = all_reduce(node0, group)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job


def test_a_members_node_calls_are_bounded(cluster):
    """Issue 36: 300 Node.Run against a stopped worker took the member from
    18 to 618 threads. A member has at most 16 calls in flight; the rest are
    refused at once."""
    cluster_pb2, _, worker_pb2 = cluster_stubs()
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    secret = secret_of(cluster)

    def threads():
        with open(f"/proc/{node1.pid}/status") as f:
            return int(next(l.split()[1] for l in f if l.startswith("Threads:")))

    worker = [d for d in node1.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(),
                                                 timeout=10).devices][0].worker_pid
    before = threads()
    os.kill(worker, signal.SIGSTOP)
    try:
        run = cluster_pb2.NodeRunRequest(
            device="cpu:0", from_node="node0", run=worker_pb2.RunRequest(
                job_id="5", collective=worker_pb2.CollectiveRun(group="g1")))
        with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
            futures = [pool.submit(node_call, cluster.addresses[1], "Run", run, secret, 8)
                       for _ in range(100)]
            time.sleep(4)
            during = threads()
            codes = [f.result()[0] for f in futures]
    finally:
        os.kill(worker, signal.SIGCONT)
    exhausted = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert exhausted >= 100 - 16, codes
    assert during - before <= 2 * 16 + 8, (before, during)
    log = node1.log()
    assert len([l for l in log.splitlines() if "calls in flight" in l]) == 1, log


def worker_of(daemon, name="cpu:0"):
    info = daemon.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
    return next(d for d in info.devices if d.name == name)


def test_a_hung_members_worker_is_killed_and_restarted_like_a_local_one(cluster):
    """Issue 36: a member's worker hung in a cross-node collective was never
    killed (the job said "pids N, 0") and its node refused jobs for 40 s or
    more. Now the job's progress deadline kills it through its daemon, the
    message names the pid and the node, and that node runs the next job."""
    node0, node1 = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    group = json.loads(node0.benchctl("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                                      "--backend", "gloo", "--json", check=0).stdout)["id"]
    spec = bench_pb2.JobSpec(progress_timeout_seconds=3, collective=bench_pb2.CollectiveSpec(
        group=group, sizes_bytes=[4 << 20] * 64, warmup_iters=1, iters=20))
    job_id = node0.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10).id
    for event in node0.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=120):
        if event.HasField("collective_row"):
            break
        assert not event.HasField("failed"), event
    hung = worker_of(node1).worker_pid
    os.kill(hung, signal.SIGSTOP)
    job = wait_for_state(node0.stub, job_id, [bench_pb2.JOB_STATE_FAILED,
                                              bench_pb2.JOB_STATE_SUCCEEDED], timeout=60)
    assert job.state == bench_pb2.JOB_STATE_FAILED and job.error_code == 4, job
    assert f"node1/cpu:0 (pid {hung} on node1)" in job.error_message, job.error_message
    # node1's daemon killed it (for node0's job) and restarted it at once.
    deadline = time.time() + 20
    while time.time() < deadline:
        dev = worker_of(node1)
        if dev.worker_state == bench_pb2.WORKER_STATE_UP and dev.worker_pid != hung:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"node1's worker not restarted: {node1.log()}")
    assert "killed the worker for cpu:0" in node1.log() and "for node0" in node1.log(), \
        node1.log()
    nxt = json.loads(node1.benchctl(
        "submit", "benchmark", "--device", "cpu:0", "--preset", "tiny", "--steps", "1",
        "--warmup-steps", "1", "--context-length", "32", "--watch", "--json", timeout=60,
        check=0).stdout)
    assert nxt["state"] == "JOB_STATE_SUCCEEDED", nxt


def test_a_members_rank_writes_under_that_members_folder(cluster):
    """Issue 36: a rank that another member runs here writes its artifacts to
    artifacts/<that member>/<its job id>, never into this node's job folder
    of the same id (before, Node.Run with job id 1 wrote into artifacts/1)."""
    node0, _ = cluster.nodes
    node0.benchctl("nodes", "--wait", "2", "--wait-timeout", "60", check=0)
    job = json.loads(node0.benchctl(
        "submit", "ddp", "--devices", "node0/cpu:0,node1/cpu:0", "--vocab-size", "97",
        "--d-model", "32", "--d-ff", "64", "--num-layers", "2", "--num-heads", "4",
        "--context-length", "16", "--global-batch", "4", "--warmup-steps", "1", "--steps", "2",
        "--bucket-mb", "0.004", "--optimizers", "adamw", "--watch", "--json", check=0).stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    there = os.path.join(cluster.dirs[1], "artifacts")
    assert os.listdir(os.path.join(there, "node0", job["id"])), os.listdir(there)
    assert not os.path.exists(os.path.join(there, job["id"])), os.listdir(there)
