"""The throwaway Slurm cluster itself (slurm_cluster.py), proven with real
parts: `sbatch -N 2` and `-N 3` of a script whose srun runs one task per node
(node_probe.py); each task reports its Slurm ids, node name and address and
reaches every other node by name over TCP. And nothing is left behind: not
after a job, not after a start that fails half way, not from a run that died
before its teardown."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import slurm_cluster
from slurm_cluster import SlurmCluster

HERE = pathlib.Path(__file__).resolve().parent

PROBE_JOB = """\
#!/bin/bash
set -euo pipefail
echo "batch on $(hostname) ($SLURMD_NODENAME): $SLURM_JOB_NUM_NODES nodes $SLURM_JOB_NODELIST"
PROBE_NODES=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd,)
export PROBE_NODES
srun --ntasks-per-node=1 "$PROBE_PYTHON" "$PROBE_SCRIPT"
"""


def leftovers(cluster):
    """Whatever of cluster's is still on this machine."""
    found = []
    namespaces = set(slurm_cluster._netns_names())
    links = set(slurm_cluster._link_names())
    found += [ns for ns in cluster.namespaces if ns in namespaces]
    found += [f"/etc/netns/{ns}" for ns in cluster.namespaces
              if (slurm_cluster.NETNS_ETC / ns).exists()]
    found += [link for link in [cluster.bridge, *cluster.veths] if link in links]
    found += [f"{name} pid {proc.pid}" for name, proc in cluster.procs.items()
              if proc.poll() is None]
    if cluster.tmp and cluster.tmp.exists():
        found.append(str(cluster.tmp))
    return found


def probe(cluster, nodes):
    job = cluster.sbatch(PROBE_JOB, nodes=nodes, name=f"probe{nodes}", timeout=60,
                         env={"PROBE_PYTHON": sys.executable,
                              "PROBE_SCRIPT": str(HERE / "node_probe.py")})
    assert job.ok, f"{job}\n{cluster.logs()}"
    reports = [json.loads(line.split(" ", 1)[1]) for line in job.output.splitlines()
               if line.startswith("PROBE ")]
    assert len(reports) == nodes, job.output
    # One task per node: node ids and task ids 0..N-1, each on its own node
    # (the cluster's first N: Slurm allocates in order), under its own name
    # and address, and reaching every other node by name, whose listener
    # saw the connection come from that node's own address.
    assert sorted(r["nodeid"] for r in reports) == list(range(nodes))
    assert sorted(r["procid"] for r in reports) == list(range(nodes))
    job_nodes = cluster.nodes[:nodes]
    for r in reports:
        name = r["nodename"]
        assert name == job_nodes[r["nodeid"]], r
        assert r["nnodes"] == nodes, r
        assert r["hostname"] == name, r
        assert r["ip"] == r["source_ip"] == cluster.addresses[name], r
        others = {n: cluster.addresses[n] for n in job_nodes if n != name}
        assert r["reached"] == others, r
        assert r["heard"] == others, r
    first = job.output.splitlines()[0]
    assert first.startswith(f"batch on node0 (node0): {nodes} nodes node[0-{nodes - 1}]"), first
    return job


@pytest.mark.parametrize("nodes", [2, 3])
def test_sbatch_srun_across_nodes(need_slurm, nodes):
    cluster = SlurmCluster(nodes)
    with cluster:
        assert cluster.node_states() == {n: "IDLE" for n in cluster.nodes}
        probe(cluster, nodes)
        if nodes == 3:
            probe(cluster, 2)    # a job on part of the cluster
    assert leftovers(cluster) == []


def test_failed_job_is_reported(need_slurm):
    with SlurmCluster(2) as cluster:
        job = cluster.sbatch("#!/bin/sh\necho to-stderr >&2\nsrun false\n", nodes=2)
        assert job.state == "FAILED" and job.exit_code == "1:0", job
        assert "to-stderr" in job.error and not job.ok
    assert leftovers(cluster) == []


class Halt(Exception):
    pass


@pytest.mark.parametrize("where", ["second slurmd", "waiting for nodes"])
def test_failed_start_leaves_nothing(need_slurm, monkeypatch, where):
    """A start that fails half way (the second slurmd's start) or with
    everything running (waiting for the nodes) tears down all it made."""
    if where == "second slurmd":
        real = SlurmCluster._start_slurmd

        def start_slurmd(self, k):
            if k == 1:
                raise Halt(where)
            real(self, k)
        monkeypatch.setattr(SlurmCluster, "_start_slurmd", start_slurmd)
    else:
        def wait_for_nodes(self):
            assert all(p.poll() is None for p in self.procs.values())
            assert len(self.procs) == 1 + 1 + self.n   # munged, slurmctld, slurmds
            raise Halt(where)
        monkeypatch.setattr(SlurmCluster, "_wait_for_nodes", wait_for_nodes)
    cluster = SlurmCluster(3)
    with pytest.raises(slurm_cluster.ClusterError, match=where):
        cluster.start()
    assert cluster.procs, "the failure came before any daemon started"
    assert leftovers(cluster) == []
    assert cluster.stop() == []   # a second teardown finds nothing to do


def test_stale_leftovers_removed(need_slurm, tmp_path):
    """What a run killed before its teardown left (its pid gone) goes at the
    next start: a daemon of its (known by its temporary folder), namespaces,
    their /etc/netns entries, links, the temporary folder."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = f"{slurm_cluster.NS_PREFIX}-{dead.pid}-0-node0"
    link = f"{slurm_cluster.LINK_PREFIX}{dead.pid}x0b"
    tmp = pathlib.Path(slurm_cluster.tempfile.mkdtemp(
        prefix=f"{slurm_cluster.NS_PREFIX}-{dead.pid}-0-"))
    daemon = subprocess.Popen(["sleep", "300"], start_new_session=True,
                              env={**os.environ, "SLURM_CONF": f"{tmp}/slurm.conf"})
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True)
        (slurm_cluster.NETNS_ETC / ns).mkdir(parents=True)
        subprocess.run(["ip", "link", "add", link, "type", "bridge"], check=True)
        removed = slurm_cluster.remove_stale()
        assert {ns, link, str(tmp), f"pid {daemon.pid}"} <= set(removed), removed
        assert daemon.wait(timeout=5) == -9
        assert ns not in slurm_cluster._netns_names()
        assert link not in slurm_cluster._link_names()
        assert not (slurm_cluster.NETNS_ETC / ns).exists()
        assert not tmp.exists()
    finally:
        daemon.kill()
        daemon.wait()
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["ip", "link", "delete", link], capture_output=True)
        subprocess.run(["rm", "-rf", str(slurm_cluster.NETNS_ETC / ns)])
