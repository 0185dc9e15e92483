"""Issue 25's single-GPU proof (scripts/gpu-cluster.sh, docs/results/cluster-gpu.md):
two daemons form a cluster, node0 owning the GPU and a CPU worker, node1 CPU
workers only. A bf16 benchmark and a profile submitted to node1 for node0's
GPU are forwarded, run there, and read (result, artifacts) the same from both
nodes; a Gloo group across the nodes' CPU workers passes the all-reduce
sweep's exact check.

The script starts the nodes (each in a network namespace, or both on the
loopback) and runs this in node1's: BENCHD_GPU_TEST_NODES="NODE0 NODE1" (their
addresses), BENCHD_GPU_CLUSTER_DEVICE node0's GPU (default cuda:0; cpu:1 for
a dry run on a CPU machine)."""
import filecmp
import json
import os
import time

import pytest

from conftest import Ctl
import benchd_harness

pytestmark = pytest.mark.gpu

GPU = os.environ.get("BENCHD_GPU_CLUSTER_DEVICE", "cuda:0")


@pytest.fixture(scope="module")
def nodes(out_dir):
    """node0 and node1 (benchctl against each) once node1 sees both READY and
    every worker of both is UP (the GPU worker loads CUDA first)."""
    addresses = os.environ.get("BENCHD_GPU_TEST_NODES", "").split()
    if len(addresses) != 2:
        pytest.skip("BENCHD_GPU_TEST_NODES is not two addresses (scripts/gpu-cluster.sh sets it)")
    node0, node1 = (Ctl(benchd_harness.BIN, a, None) for a in addresses)
    t0 = time.time()
    formed = node1.run("nodes", "--wait", "2", "--wait-timeout", "120", timeout=180)
    with open(os.path.join(out_dir, "nodes.txt"), "w") as f:
        f.write(formed.stdout + formed.stderr)
    assert formed.returncode == 0, f"the cluster did not form: {formed.stdout}{formed.stderr}"
    print(f"cluster formed in {time.time() - t0:.1f} s (from node1's view):\n{formed.stdout}")
    deadline = time.time() + 180
    while True:
        listed = node1.json("nodes")["nodes"]
        states = [d.get("workerState") for n in listed for d in n["devices"]]
        if all(s == "WORKER_STATE_UP" for s in states):
            return node0, node1
        assert time.time() < deadline, f"workers not up in 180 s: {listed}"
        time.sleep(1)


def ended(ctl, out_dir, name, *args):
    """`submit ... --watch --json` through ctl: the ended Job, saved as NAME.json."""
    r = ctl.run(*args, "--watch", "--json", rpc_timeout=600)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        f.write(r.stdout)
    with open(os.path.join(out_dir, f"{name}-progress.txt"), "w") as f:
        f.write(r.stderr)
    assert r.returncode == 0, f"{name}: exit {r.returncode}: {r.stdout[-600:]} {r.stderr[-600:]}"
    return json.loads(r.stdout)


def test_a_benchmark_submitted_to_node1_runs_on_node0s_gpu_and_both_show_it(nodes, out_dir):
    node0, node1 = nodes
    job = ended(node1, out_dir, "benchmark", "submit", "benchmark", "--device", f"node0/{GPU}",
                "--preset", "small", "--mode", "train_step", "--precision", "bf16",
                "--batch-size", "4", "--context-length", "256", "--warmup-steps", "3",
                "--steps", "10")
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert job["id"].startswith("node0/"), job["id"]
    print(f"forwarded benchmark {job['id']} on node0/{GPU} via node1: median step "
          f"{job['result']['benchmark']['step']['median']} s")
    local_id = job["id"][len("node0/"):]
    shown = {}
    for name, ctl, job_id in (("node0", node0, local_id), ("node1", node1, job["id"])):
        r = ctl.run("get", job_id)
        assert r.returncode == 0, r.stderr
        with open(os.path.join(out_dir, f"benchmark-{name}.txt"), "w") as f:
            f.write(r.stdout)
        # The same report but for the job's name ("Job" line, "node0/" prefixes).
        shown[name] = [line.replace("node0/", "") for line in r.stdout.splitlines()
                       if not line.startswith("Job ")]
    assert shown["node0"] == shown["node1"], "node0 and node1 show the job differently " \
                                              "(benchmark-node0.txt, benchmark-node1.txt)"


def test_a_forwarded_profiles_trace_is_the_same_through_both_nodes(nodes, out_dir, tmp_path):
    node0, node1 = nodes
    job = ended(node1, out_dir, "profile", "submit", "profile", "--device", f"node0/{GPU}",
                "--preset", "small", "--precision", "bf16", "--batch-size", "4",
                "--context-length", "256")
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    via1, on0 = tmp_path / "trace-via-node1.json", tmp_path / "trace-on-node0.json"
    assert node1.run("artifacts", "get", job["id"], "trace.json", "-o", via1).returncode == 0
    assert node0.run("artifacts", "get", job["id"][len("node0/"):], "trace.json",
                     "-o", on0).returncode == 0
    assert filecmp.cmp(via1, on0, shallow=False), f"profile {job['id']}: the traces differ"
    print(f"profile {job['id']}: trace.json ({on0.stat().st_size} bytes) the same through both")


def test_a_gloo_group_across_the_nodes_passes_the_exact_check(nodes, out_dir):
    node0, _ = nodes
    made = node0.json("groups", "create", "--devices", "node0/cpu:0,node1/cpu:0",
                      "--backend", "gloo")
    assert made.get("state") == "GROUP_STATE_READY", made
    r = node0.run("submit", "collective", "--group", made["id"], "--op", "all_reduce",
                  "--min", "1KiB", "--max", "64MiB", "--factor", "4", "--watch", rpc_timeout=600)
    with open(os.path.join(out_dir, "allreduce.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-600:]
    assert "wrong elements: 0 (all results exact)" in r.stdout + r.stderr, r.stdout[-600:]
    print(r.stdout)
