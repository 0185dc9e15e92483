"""A cluster with trust on (issue 25, "Node-to-node calls authenticate like
clients do"): two real daemons, node0 on 127.0.0.1 and node1 on 127.0.0.2,
each with TLS (--tls-cert/--tls-key, a certificate made at test time that names
both addresses) and tokens (--auth-file). Node-to-node calls (heartbeats to the
coordinator, the coordinator's calls to a member's workers) carry benchctl's
credentials, from the daemon's own environment: BENCHD_TOKEN_FILE and
BENCHD_TLS_CA. The internal services need the admin role.

- admin token and the CA on both: the cluster forms and a cross-node Gloo
  all-reduce, submitted by a user with the submit role, passes its exact check;
- a member with a read token, or none: the coordinator refuses its heartbeats
  (PERMISSION_DENIED / UNAUTHENTICATED), logs the refusal, and the member's
  ListNodes shows the refusal in the coordinator's detail;
- a member with no CA (plaintext) against the TLS coordinator fails clearly;
- with client certificates (mTLS) a rank stays with the certificate that
  joined it: another certificate with the cluster's secret cannot take it
  while its member is down (issue 36).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

import grpc
import pytest

from conftest import BIN, Cluster, Daemon, bench_pb2, bench_pb2_grpc, free_port
from test_auth import TINY, token_hash, write_auth_file
from tls_certs import make_certs

HOSTS = Cluster.HOSTS
# "nodes": the daemons' own principal; ops, alice, grafana: users.
TOKENS = {"nodes": "nodes-" + "n" * 40, "ops": "ops-" + "o" * 40, "alice": "alice-" + "a" * 40,
          "grafana": "grafana-" + "g" * 40}
ROLES = {"nodes": "admin", "ops": "admin", "alice": "submit", "grafana": "read"}


@pytest.fixture(scope="module")
def trust():
    """Certificates naming both nodes' addresses, an auth file, a token file
    per principal (mode 600, as benchctl wants)."""
    d = tempfile.mkdtemp(prefix="benchd-cltrust-")
    certs = make_certs(d, server_ips=HOSTS[1:])
    auth = os.path.join(d, "auth")
    write_auth_file(auth, [f"{ROLES[n]} {n} {token_hash(t)}" for n, t in TOKENS.items()])
    files = {}
    for name, token in TOKENS.items():
        files[name] = os.path.join(d, f"{name}.token")
        with open(files[name], "w") as f:
            f.write(token + "\n")
        os.chmod(files[name], 0o600)
    yield certs, auth, files
    shutil.rmtree(d, ignore_errors=True)


def clean_env(home):
    """This process's environment without any benchd client setting, and a
    client config folder of its own (no ~/.config/benchd/client.json)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BENCHD_TOKEN", "BENCHD_TLS", "BENCHD_CLIENT_CONFIG",
                                "BENCHD_ADDRESS"))}
    env["XDG_CONFIG_HOME"] = home
    return env


class TrustedCluster(Cluster):
    """The harness's two-node cluster with TLS and tokens on both; nodes
    start one at a time (start(rank, token=..., ca=...)), each with the
    node-to-node credentials a test gives it."""

    def __init__(self, trust):
        self.certs, self.auth, self.tokens = trust
        super().__init__(prefix="benchd-cltrust", lost_after="2",
                         extra_args=["--tls-cert", self.certs.server_cert,
                                     "--tls-key", self.certs.server_key, "--auth-file", self.auth])
        self.nodes = [None, None]
        self.channels = []

    def node_env(self, token="nodes", ca=True):
        """What a daemon's node-to-node calls use: a token file (a principal
        of the auth file, or None) and the CA (or none)."""
        env = clean_env(self.dirs[0])
        env["BENCHD_WORKER_THREADS"] = "1"
        if token:
            env["BENCHD_TOKEN_FILE"] = self.tokens[token]
        if ca:
            env["BENCHD_TLS_CA"] = self.certs.ca_cert
        return env

    def start(self, rank, **node_env):
        d = self.make(rank, env=self.node_env(**node_env))
        self.nodes[rank] = d.start()
        return d

    def stub(self, rank):
        """Bench over TLS to node `rank`; calls need metadata=self.admin."""
        creds = grpc.ssl_channel_credentials(open(self.certs.ca_cert, "rb").read())
        ch = grpc.secure_channel(self.addresses[rank], creds)
        self.channels.append(ch)
        return bench_pb2_grpc.BenchStub(ch)

    @property
    def admin(self):
        return [("authorization", f"Bearer {TOKENS['nodes']}")]

    def wait_worker_up(self, rank, timeout=120):
        stub, deadline = self.stub(rank), time.time() + timeout
        while time.time() < deadline:
            info = stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), metadata=self.admin,
                                    timeout=10)
            if all(d.worker_state == bench_pb2.WORKER_STATE_UP for d in info.devices):
                return
            time.sleep(0.1)
        raise AssertionError(f"node{rank}'s worker not up: {self.nodes[rank].log()}")

    def list_nodes(self, rank):
        return self.stub(rank).ListNodes(bench_pb2.ListNodesRequest(), metadata=self.admin,
                                         timeout=10)

    def benchctl(self, rank, *args, token="alice", check=0, timeout=300):
        env = clean_env(self.dirs[0])
        env.update(BENCHD_TLS_CA=self.certs.ca_cert, BENCHD_TOKEN_FILE=self.tokens[token])
        r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", self.addresses[rank],
                            *args], capture_output=True, text=True, timeout=timeout, env=env)
        assert check is None or r.returncode == check, (
            f"benchctl {' '.join(args)} exited {r.returncode}, wanted {check}\n"
            f"stdout: {r.stdout}\nstderr: {r.stderr}\n"
            f"node0: {self.log(0)}\nnode1: {self.log(1)}")
        return r

    def log(self, rank):
        return self.nodes[rank].log() if self.nodes[rank] else ""

    def close(self):
        for ch in self.channels:
            ch.close()
        super().close()


@pytest.fixture
def cluster(trust):
    c = TrustedCluster(trust)
    yield c
    c.close()


def wait_for(what, check, timeout=20):
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout} s: {last}")


def test_a_trusted_cluster_forms_and_runs_a_cross_node_all_reduce(cluster):
    cluster.start(0)
    cluster.start(1)
    for rank in (0, 1):
        assert "node-to-node calls: TLS (its CA), a bearer token" in cluster.log(rank), \
            cluster.log(rank)
        cluster.wait_worker_up(rank)
    waited = cluster.benchctl(1, "nodes", "--wait", "2", "--wait-timeout", "60", token="grafana")
    assert "2 of 2 nodes READY" in waited.stdout, waited.stdout
    listed = json.loads(cluster.benchctl(0, "nodes", "--json", token="grafana").stdout)
    assert [(n["name"], n["state"], n["address"]) for n in listed["nodes"]] == [
        ("node0", "NODE_STATE_READY", cluster.addresses[0]),
        ("node1", "NODE_STATE_READY", cluster.addresses[1])], listed
    # An admin makes the group (CreateGroup needs admin), a user with the
    # submit role runs the sweep; the coordinator reaches node1's worker with
    # its own token, whoever asked.
    made = json.loads(cluster.benchctl(0, "groups", "create", "--devices",
                                       "node0/cpu:0,node1/cpu:0", "--backend", "gloo",
                                       "--json", token="ops").stdout)
    assert made["state"] == "GROUP_STATE_READY", made
    job = json.loads(cluster.benchctl(
        0, "submit", "collective", "--group", made["id"], "--op", "all_reduce", "--min", "1KiB",
        "--max", "256KiB", "--factor", "16", "--iters", "5", "--warmup", "2", "--watch",
        "--json").stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    rows = job["result"]["collective"]["rows"]
    assert len(rows) == 3, rows
    for row in rows:
        assert row["devices"] == ["cpu:0", "node1/cpu:0"], row
        assert int(row.get("wrongElements", 0)) == 0 and int(row["checkedElements"]) > 0, row
    # No node-to-node call was refused.
    logs = cluster.log(0) + cluster.log(1)
    assert "refused Cluster." not in logs and "refused Node." not in logs, logs


REFUSALS = {  # the member's token -> what the coordinator answers its heartbeats
    "grafana": ("PERMISSION_DENIED", "Cluster.Heartbeat needs the admin role; 'grafana' has read"),
    None: ("UNAUTHENTICATED", "this daemon checks callers: send a token"),
}


def refused_cluster(cluster, token):
    """node0 with the admin token, node1 with `token`: node1 is refused."""
    cluster.start(0)
    cluster.start(1, token=token)
    code, message = REFUSALS[token]
    # The coordinator logs each refusal: the method, the caller's address,
    # the code and why.
    logged = wait_for("the refusal in the coordinator's log", lambda: (
        "refused Cluster.Heartbeat from" in cluster.log(0), cluster.log(0)))
    line = next(l for l in logged.splitlines() if "refused Cluster.Heartbeat from" in l)
    assert f": {code}: " in line and message in line, line
    return code, message


@pytest.mark.parametrize("token", ["grafana", None], ids=["read-token", "no-token"])
def test_a_member_without_the_admin_role_is_refused_by_the_coordinator(cluster, token):
    code, message = refused_cluster(cluster, token)
    # The member says why where a user looks: its log and its ListNodes
    # (the coordinator's detail), also once --cluster-lost-after has passed.
    # Its log line follows the coordinator's by the answer's trip: wait for it.
    expected = f"heartbeat to the coordinator at {cluster.coordinator} failed: {message}"
    wait_for("the refusal in node1's log", lambda: (expected in cluster.log(1), cluster.log(1)))
    node0 = wait_for("the refusal in node1's ListNodes", lambda: (
        message in (n := cluster.list_nodes(1).nodes[0]).detail, n))
    assert node0.state != bench_pb2.NODE_STATE_READY, node0
    time.sleep(2.5)
    node0 = cluster.list_nodes(1).nodes[0]
    assert message in node0.detail and node0.state != bench_pb2.NODE_STATE_READY, node0
    # The coordinator never let it in; benchctl's barrier names it.
    node1 = cluster.list_nodes(0).nodes[1]
    assert node1.state == bench_pb2.NODE_STATE_WAITING, node1
    r = cluster.benchctl(0, "nodes", "--wait", "2", "--wait-timeout", "1", token="grafana",
                         check=4)
    assert "1 of 2 nodes READY" in r.stderr, r.stderr


def test_a_refused_member_does_not_say_the_coordinator_is_silent(cluster):
    code, message = refused_cluster(cluster, "grafana")
    time.sleep(3)   # past --cluster-lost-after 2
    node0 = cluster.list_nodes(1).nodes[0]
    assert "has not answered" not in node0.detail and "refused" in node0.detail, node0


def test_a_member_without_the_ca_says_tls_is_missing(cluster):
    """node1 serves TLS but has no CA for its own calls to the others: it
    refuses to start, saying what to set (its plaintext calls would only be
    dropped by the coordinator's TLS port)."""
    cluster.start(0)
    with pytest.raises(RuntimeError) as refused:
        cluster.start(1, ca=False)
    assert "would be plaintext: set BENCHD_TLS_CA" in str(refused.value), refused.value


def test_with_client_certificates_a_rank_stays_with_its_certificate(trust):
    """Issue 36: with mTLS a member's identity is its certificate. node1
    joins rank 1 with alice's certificate; once node1 is down, a daemon with
    the cluster's secret but another certificate (ops) still cannot take rank
    1 (PERMISSION_DENIED), and node1 itself rejoins."""
    certs = trust[0]
    c = Cluster(prefix="benchd-clmtls", lost_after="2", extra_args=[
        "--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
        "--tls-client-ca", certs.ca_cert])

    def env(name):
        e = clean_env(c.dirs[0])
        cert, key = certs.clients[name]
        e.update(BENCHD_WORKER_THREADS="1", BENCHD_TLS_CA=certs.ca_cert, BENCHD_TLS_CERT=cert,
                 BENCHD_TLS_KEY=key)
        return e

    ops_cert, ops_key = certs.clients["ops"]
    creds = grpc.ssl_channel_credentials(open(certs.ca_cert, "rb").read(),
                                         open(ops_key, "rb").read(), open(ops_cert, "rb").read())
    channel = grpc.secure_channel(c.addresses[0], creds)
    stub = bench_pb2_grpc.BenchStub(channel)
    intruder = None
    try:
        c.nodes = [c.make(0, env=env("ops")).start(), c.make(1, env=env("alice")).start()]
        rank1 = lambda: stub.ListNodes(bench_pb2.ListNodesRequest(), timeout=10).nodes[1]  # noqa
        wait_for("node1 READY", lambda: (rank1().state == bench_pb2.NODE_STATE_READY, rank1()))
        c.nodes[1].stop(sig=9)
        wait_for("node1 LOST", lambda: (rank1().state == bench_pb2.NODE_STATE_LOST, rank1()))
        d = tempfile.mkdtemp(prefix="benchd-clmtls-intruder-")
        port = free_port("127.0.0.3")
        intruder = Daemon(d, ["--listen", f"127.0.0.3:{port}", "--metrics", "off",
                              "--cluster-coordinator", c.coordinator, "--node-rank", "1",
                              "--nodes", "2", "--cluster-secret-file", c.secret_file,
                              "--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
                              "--tls-client-ca", certs.ca_cert], env=env("ops")).start()
        wait_for("the intruder refused", lambda: (
            "belongs to the certificate subject 'CN=alice" in intruder.log(), intruder.log()))
        refused = [line for line in c.nodes[0].log().splitlines()
                   if "refused Cluster.Heartbeat" in line]
        assert len(refused) == 1 and ": PERMISSION_DENIED: rank 1 belongs to" in refused[0], \
            c.nodes[0].log()
        after = rank1()
        assert after.state == bench_pb2.NODE_STATE_LOST, after
        assert after.address == c.addresses[1], after
        intruder.stop()
        shutil.rmtree(d, ignore_errors=True)
        intruder = None
        c.nodes[1] = c.make(1, env=env("alice")).start()
        wait_for("node1 back", lambda: (rank1().state == bench_pb2.NODE_STATE_READY, rank1()))
    finally:
        if intruder is not None:
            intruder.stop()
        channel.close()
        c.close()


def test_only_a_member_may_say_on_whose_behalf_a_call_comes(cluster):
    """Issue 36: a forwarded call names the caller the forwarding member
    checked (benchd-on-behalf-of / -role), and that was honoured from any
    admin caller, so any admin token could act as anyone (submit as alice,
    cancel as her). Now only a caller that proves membership (the cluster's
    secret) is believed; anyone else setting it is refused, PERMISSION_DENIED
    naming the key, and logged. The forwarded path still records the real
    submitter."""
    cluster.start(0)
    cluster.start(1)
    for rank in (0, 1):
        cluster.wait_worker_up(rank)
    cluster.benchctl(0, "nodes", "--wait", "2", "--wait-timeout", "60", token="grafana")
    # Forwarded by node0 to node1 for alice: node1 records alice.
    job = json.loads(cluster.benchctl(
        0, "submit", "benchmark", "--device", "node1/cpu:0", "--preset", "tiny", "--steps", "1",
        "--warmup-steps", "1", "--context-length", "32", "--json").stdout)
    assert job["id"].startswith("node1/"), job
    there = cluster.stub(1).GetJob(bench_pb2.GetJobRequest(job_id=job["id"].split("/", 1)[1]),
                                   metadata=cluster.admin, timeout=10)
    assert there.submitter == "alice", there

    spec = bench_pb2.JobSpec(device="cpu:0")
    spec.MergeFrom(TINY)
    node1 = cluster.stub(1)

    def submit(token, *extra):
        metadata = [("authorization", f"Bearer {TOKENS[token]}"),
                    ("benchd-on-behalf-of", "alice"), ("benchd-on-behalf-role", "submit"),
                    *extra]
        try:
            made = node1.Submit(bench_pb2.SubmitRequest(spec=spec), metadata=metadata, timeout=10)
            return grpc.StatusCode.OK, made
        except grpc.RpcError as e:
            return e.code(), e.details()

    # An admin token without the secret (an operator, not a member): refused,
    # never a job of alice's (before: accepted, submitter 'alice').
    code, details = submit("ops")
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert details.startswith("benchd-on-behalf-of: a call may say on whose behalf it comes "
                              "only when another member of this daemon's cluster forwards it"), \
        details
    assert "this caller proved no membership" in details and "came without it" in details
    # Another cluster's secret, or a user below admin, is no member either.
    code, details = submit("ops", ("benchd-cluster-secret", "x" * 32))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "not this cluster's" in details, details
    code, details = submit("alice")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "benchd-on-behalf-of" in details, details
    listed = node1.ListJobs(bench_pb2.ListJobsRequest(), metadata=cluster.admin, timeout=10).jobs
    assert [j.id for j in listed] == [there.id], listed
    refused = [l for l in cluster.log(1).splitlines() if "auth: refused Submit from" in l]
    assert len(refused) == 3 and all("PERMISSION_DENIED" in l and "benchd-on-behalf-of" in l
                                     for l in refused), refused
    assert "'ops': benchd-on-behalf-of:" in refused[0], refused
