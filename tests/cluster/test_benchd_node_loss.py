"""A node's daemon killed mid-collective on a real Slurm cluster (issue 25):
the failure names the node, the node goes LOST, and the cluster recovers once
the daemon is restarted (node_loss.sbatch does the cluster's side; this test
plays the crash: SIGKILL of benchd inside node1's network namespace).

Skipped while this build's `benchd --help` does not offer --cluster-from."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import missing
from slurm_cluster import SlurmCluster
from test_benchd_sbatch import bin_dir

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "node_loss.sbatch"


def test_shellcheck():
    import shutil
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        missing("shellcheck is not installed (Debian: shellcheck)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def real_bins():
    bins = bin_dir()
    if bins is None:
        missing("no benchd build: set BENCHD_BIN_DIR or build into build/")
    help_text = subprocess.run([str(bins / "benchd"), "--help"], capture_output=True,
                               text=True).stdout
    if "--cluster-from" not in help_text:
        pytest.skip("needs benchd --cluster-from")
    return bins


def benchd_pids(cluster, node):
    """The benchd daemons (not their workers) running on `node`."""
    return [pid for pid, comm in cluster.node_processes()[node] if comm == "benchd"]


def test_a_node_killed_mid_collective_is_named_lost_and_recovers(need_slurm):
    bins = real_bins()
    started = time.monotonic()
    with SlurmCluster(2) as cluster:
        results = cluster.tmp / "results"
        job_id = cluster.submit(SCRIPT, nodes=2, name="node-loss", env={
            "BENCHD_BIN_DIR": str(bins), "BENCHD_RESULTS_DIR": str(results),
            "BENCHD_DATA_ROOT": str(cluster.tmp / "benchd-data"),
            "BENCHD_PYTHON": sys.executable})
        try:
            # The script asks once its sweep runs; kill node1's daemon there.
            ask = results / "kill-node1"
            deadline = time.monotonic() + 60
            while not ask.exists():
                state = cluster.job_info(job_id).get("JobState")
                assert state in ("PENDING", "RUNNING"), (
                    f"the job ended ({state}) before asking for the kill\n"
                    f"{cluster.wait_job(job_id, name='node-loss')}")
                assert time.monotonic() < deadline, "the sweep did not start within 60 s"
                time.sleep(0.1)
            victims = benchd_pids(cluster, "node1")
            assert len(victims) == 1, cluster.node_processes()
            os.kill(victims[0], signal.SIGKILL)
            (results / "killed").touch()
            job = cluster.wait_job(job_id, timeout=90, name="node-loss")
        except BaseException:
            subprocess.run(["scancel", str(job_id)], env={**os.environ, **cluster.env},
                           capture_output=True)
            raise
        assert job.ok, f"{job}\n{cluster.logs(lines=8)}"
        read = lambda name: json.loads((results / name).read_text())  # noqa: E731

        # The sweep failed, naming the member that went away and its node.
        failed = read("failed.json")
        assert failed["state"] == "JOB_STATE_FAILED", failed
        message = failed.get("errorMessage", "")
        assert "node1/cpu:0 (rank 1)" in message and "node node1" in message, message
        assert (results / "watch.rc").read_text().strip() == "1", job.output
        # The coordinator's log (the daemons' step writes into the job's
        # stderr, srun --label: "0: ") says so, and that node1 came back.
        assert "0: benchd: cluster: node1 (rank 1, node1:17531) is LOST" in job.error, job
        assert "0: benchd: cluster: node1 (rank 1, node1:17531) is back" in job.error, job
        # node1 LOST within --cluster-lost-after, the group broken, node1's
        # devices refused while it is gone.
        lost = read("nodes-lost.json")["nodes"]
        assert lost[1]["name"] == "node1" and lost[1]["state"] == "NODE_STATE_LOST", lost
        assert "no heartbeat for" in lost[1].get("detail", ""), lost
        assert lost[0]["state"] == "NODE_STATE_READY", lost
        groups = read("groups-broken.json")["groups"]
        assert [g["state"] for g in groups] == ["GROUP_STATE_BROKEN"], groups
        assert (results / "refused.rc").read_text().strip() == "2", job.output
        assert "node1/cpu:0 is not served" in (results / "refused.err").read_text()

        # Back: both READY, node1 at the same address, a new group passes its
        # exact check across the two nodes.
        again = read("nodes-again.json")["nodes"]
        assert [(n["name"], n["state"]) for n in again] == [
            ("node0", "NODE_STATE_READY"), ("node1", "NODE_STATE_READY")], again
        assert again[1]["address"] == lost[1]["address"], (again, lost)
        swept = read("again.json")
        assert swept["state"] == "JOB_STATE_SUCCEEDED", (swept, job.output)
        rows = swept["result"]["collective"]["rows"]
        assert [int(r["sizeBytes"]) for r in rows] == [1024, 4096, 16384, 65536], rows
        for row in rows:
            assert int(row["wrongElements"]) == 0 and int(row["checkedElements"]) > 0, row
            devices = [d if "/" in d else f"node0/{d}" for d in row["devices"]]
            assert devices == ["node0/cpu:0", "node1/cpu:0"], row
        # Every daemon and worker stopped with the job.
        left = {node: [p for p in procs if p[1].startswith("benchd")]
                for node, procs in cluster.node_processes().items()}
        assert left == {node: [] for node in cluster.nodes}, left
    assert time.monotonic() - started < 90, f"took {time.monotonic() - started:.0f} s"


def test_a_daemon_restarted_in_a_one_node_step_finds_its_rank(tmp_path):
    """srun -N1 -n1 -w node1 inside a 2-node job gives its task SLURM_NODEID=0,
    SLURM_NNODES=1, SLURM_STEP_NODELIST=node1 (seen on this cluster), with the
    job's SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES and SLURMD_NODENAME=node1.
    The daemon should still be node1, rank 1 of 2."""
    bins = real_bins()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update(SLURM_NODEID="0", SLURM_NNODES="1", SLURM_STEP_NODELIST="node1",
               SLURM_JOB_NODELIST="node[0-1]", SLURM_JOB_NUM_NODES="2",
               SLURMD_NODENAME="node1",
               # As node_loss.sbatch hands it to every daemon of the job.
               BENCHD_CLUSTER_SECRET="a-secret-of-this-job-0123")
    # A free port of its own: 127.0.0.1:1 is where other tests expect nobody
    # (the Python client's "no daemon" tests run beside this one).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        r = subprocess.run([str(bins / "benchd"), "--cluster-from", "slurm", "--listen",
                            f"127.0.0.1:{port}", "--metrics", "off", "--device", "cpu:0",
                            "--insecure", "--data-dir", str(tmp_path)],
                           capture_output=True, text=True, env=env, timeout=5)
        err = r.stderr
    except subprocess.TimeoutExpired as e:   # it started (and was killed): read what it said
        err = (e.stderr or b"").decode(errors="replace")
    assert "cluster: node1, rank 1 of 2" in err, err
