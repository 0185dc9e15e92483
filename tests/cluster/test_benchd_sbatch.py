"""deploy/slurm/benchd.sbatch submitted to a real Slurm cluster
(slurm_cluster.py): one benchd per node in its own network namespace, the
cluster formed from Slurm's environment, a Gloo group over every node's cpu:0,
an all-reduce sweep whose exact check passes. Also the script's own logic with
stand-ins for benchd and benchctl, and shellcheck.

The test with the real daemon is skipped while this build's `benchd --help`
does not offer --cluster-from (the daemon's cluster mode)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import missing
from slurm_cluster import SlurmCluster

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "slurm" / "benchd.sbatch"


def bin_dir():
    for candidate in (os.environ.get("BENCHD_BIN_DIR"), ROOT / "build" / "bin"):
        if candidate and (pathlib.Path(candidate) / "benchd").exists():
            return pathlib.Path(candidate)
    return None


def test_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        missing("shellcheck is not installed (Debian: shellcheck)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_refuses_outside_slurm_and_without_security(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "BENCHD_"))}
    outside = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env)
    assert outside.returncode == 1 and "not in a Slurm job" in outside.stderr, outside
    # No security settings: refused before anything starts.
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("benchd", "benchctl", "scontrol"):
        (fake / name).write_text("#!/bin/sh\necho node0\n")
        (fake / name).chmod(0o755)
    env.update(SLURM_JOB_ID="7", SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="node[0-1]",
               BENCHD_BIN_DIR=str(fake), BENCHD_RESULTS_DIR=str(tmp_path / "results"),
               PATH=f"{fake}:{env['PATH']}")
    open_ = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env)
    assert open_.returncode == 1 and "BENCHD_INSECURE=1" in open_.stderr, open_


FAKE_BENCHD = """\
# Stands in for benchd: says how it was started, runs until SIGTERM.
import os, signal, sys, time
log = os.path.join(os.environ["FAKE_LOG"], os.environ["SLURMD_NODENAME"])
with open(log + ".args", "w") as f:
    f.write(" ".join([os.environ["SLURM_NODEID"], os.environ["SLURM_NNODES"], *sys.argv[1:]]))
with open(log + ".secret", "w") as f:
    f.write(os.environ.get("BENCHD_CLUSTER_SECRET", ""))
def stop(signum, frame):
    open(log + ".term", "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(0.1)
"""

FAKE_BENCHCTL = """\
# Stands in for benchctl: records each call; the cluster is "formed" once
# every stand-in daemon has started (before: exit 3, unreachable, as benchctl).
import glob, json, os, sys
log = os.environ["FAKE_LOG"]
args = sys.argv[1:]
with open(os.path.join(log, "benchctl.calls"), "a") as f:
    f.write(os.environ["BENCHD_ADDRESS"] + " " + " ".join(args) + "\\n")
if args[:2] == ["nodes", "--wait"]:
    if len(glob.glob(os.path.join(log, "*.args"))) < int(args[2]):
        sys.exit(3)
    print(f"{args[2]} of {args[2]} nodes READY")
elif args[:2] == ["nodes", "--json"]:
    print(json.dumps({"nodes": []}))
elif args[:2] == ["groups", "create"]:
    print(json.dumps({"id": "g7"}))
elif args[:2] == ["submit", "collective"]:
    rows = [{"sizeBytes": str(size), "duration": {"median": 1e-4}, "busbwGbps": 1.5,
             "checkedElements": "256", "wrongElements": wrong}
            for size, wrong in ((1024, "0"), (2048, os.environ["FAKE_WRONG"]))]
    print(json.dumps({"id": "3", "state": "JOB_STATE_SUCCEEDED",
                      "result": {"collective": {"rows": rows}}}))
else:
    sys.exit(f"fake benchctl: unexpected {args}")
"""


@pytest.mark.parametrize("wrong", [0, 5])
def test_sbatch_flow_with_stand_ins(need_slurm, wrong):
    """The script's own logic on a real cluster of 3, benchd and benchctl
    replaced by stand-ins: a daemon per node with the cluster flags, the wait
    retried while the coordinator is unreachable, a group over every node,
    the sweep, the exact check (passing, and failing on wrong elements), and
    every daemon stopped by SIGTERM either way."""
    nodes = 3
    with SlurmCluster(nodes) as cluster:
        bins, log = cluster.tmp / "fake-bin", cluster.tmp / "fake-log"
        bins.mkdir()
        log.mkdir()
        for name, text in (("benchd", FAKE_BENCHD), ("benchctl", FAKE_BENCHCTL)):
            (bins / name).write_text(f"#!{sys.executable}\n{text}")
            (bins / name).chmod(0o755)
        data = cluster.tmp / "benchd-data"
        job = cluster.sbatch(SCRIPT, nodes=nodes, name="stand-ins", timeout=60, env={
            "BENCHD_BIN_DIR": str(bins), "BENCHD_INSECURE": "1", "FAKE_LOG": str(log),
            "FAKE_WRONG": str(wrong), "BENCHD_RESULTS_DIR": str(cluster.tmp / "results"),
            "BENCHD_DATA_ROOT": str(data), "BENCHD_PYTHON": sys.executable})
        if wrong:
            assert job.state == "FAILED", job
            assert "exact check FAILED" in job.error and "1 with wrong" in job.error, job
        else:
            assert job.ok, job
            assert "exact check passed: 2 sizes, 0 wrong elements" in job.output, job
        for k in range(nodes):
            rank, n, flags = (log / f"node{k}.args").read_text().split(" ", 2)
            assert (int(rank), int(n)) == (k, nodes)
            assert flags.split() == [
                "--data-dir", f"{data}/node{k}", "--cluster-from", "slurm",
                "--listen", "0.0.0.0:17531", "--metrics", "127.0.0.1:0",
                "--device", "cpu:0", "--insecure"], flags
            assert (log / f"node{k}.term").exists(), f"node{k}'s daemon got no SIGTERM\n{job}"
        # One cluster secret for every daemon of the job, made by the script
        # (64 hex digits), handed over in the environment, never a flag.
        secrets = {(log / f"node{k}.secret").read_text() for k in range(nodes)}
        assert len(secrets) == 1, secrets
        secret = secrets.pop()
        assert len(secret) == 64 and all(ch in "0123456789abcdef" for ch in secret), secret
        assert secret not in (log / "node0.args").read_text()
        calls = (log / "benchctl.calls").read_text().splitlines()
        assert all(c.startswith("node0:17531 ") for c in calls), calls
        calls = [c.split(" ", 1)[1] for c in calls]
        assert "groups create --devices node0/cpu:0,node1/cpu:0,node2/cpu:0 --backend gloo --json" in calls
        assert calls[-1] == ("submit collective --group g7 --op all_reduce --min 1KiB "
                             "--max 1MiB --watch --json"), calls
        assert "stopping the daemons" in job.output
        # Each node removed its own data dir, after its daemon stopped.
        assert "removed the data dirs" in job.output, job
        assert not any((data / f"node{k}").exists() for k in range(nodes)), list(data.glob("*"))
        left = {node: [p for p in procs if p[1] not in ("slurmd",)]
                for node, procs in cluster.node_processes().items()}
        assert left == {node: [] for node in cluster.nodes}, left


@pytest.mark.parametrize("nodes", [2, 3])
def test_sbatch_cross_node_all_reduce(need_slurm, nodes):
    bins = bin_dir()
    if bins is None:
        missing("no benchd build: set BENCHD_BIN_DIR or build into build/")
    help_text = subprocess.run([str(bins / "benchd"), "--help"], capture_output=True,
                               text=True).stdout
    if "--cluster-from" not in help_text:
        pytest.skip("needs benchd --cluster-from; the lead enables it")
    with SlurmCluster(nodes) as cluster:
        results = cluster.tmp / "results"
        job = cluster.sbatch(SCRIPT, nodes=nodes, name="benchd", timeout=150, env={
            "BENCHD_BIN_DIR": str(bins),
            "BENCHD_INSECURE": "1",     # the namespaces' private bridge
            "BENCHD_RESULTS_DIR": str(results),
            "BENCHD_DATA_ROOT": str(cluster.tmp / "benchd-data"),
            "BENCHD_PYTHON": sys.executable,
            "BENCHD_MIN": "1KiB", "BENCHD_MAX": "64KiB",
            "BENCHD_WAIT_TIMEOUT": "60", "BENCHD_KEEP_DATA": "1"})
        assert job.ok, f"{job}\n{cluster.logs()}"
        # Kept when asked: each node's store holds the job.
        assert "keeping the data dirs" in job.output, job.output
        for k in range(nodes):
            store = cluster.tmp / "benchd-data" / f"node{k}" / "benchd.sqlite3"
            assert store.exists(), store
        assert "exact check passed" in job.output, job.output
        finished = json.loads((results / "collective.json").read_text())
        assert finished["state"] == "JOB_STATE_SUCCEEDED", finished
        rows = finished["result"]["collective"]["rows"]
        assert [int(r["sizeBytes"]) for r in rows] == [1024 << i for i in range(7)]
        expected = [f"node{k}/cpu:0" for k in range(nodes)]
        for row in rows:
            assert int(row["wrongElements"]) == 0 and int(row["checkedElements"]) > 0, row
            # Rank k on node k. The node that answered (node0, the script's
            # address) may name its own devices without the node prefix.
            devices = [d if "/" in d else f"node0/{d}" for d in row["devices"]]
            assert devices == expected and row["worldSize"] == nodes, row
        listed = json.loads((results / "nodes.json").read_text())
        assert len(listed["nodes"]) == nodes, listed
        # Every daemon and worker stopped with the job (the cluster's
        # teardown would kill them anyway, so look before it).
        left = {node: [p for p in procs if p[1].startswith("benchd")]
                for node, procs in cluster.node_processes().items()}
        assert left == {node: [] for node in cluster.nodes}, left
