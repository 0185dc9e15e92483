"""Issue 26's cross-node sweeps (scripts/gpu-cross-node.sh), checked from the
files the script leaves in its $OUT (BENCHD_GPU_OUT): the script drives the
two daemons in their network namespaces (a kill and a restart included), and
these say whether what they did holds:

  cross-node.json          the NCCL (or Gloo) all-reduce across the nodes: exact
  cross-node-vs-torch.json torch.distributed on the same ranks ran beside it
  tcp-1.json, tcp-2.json   raw TCP over the same link moved bytes
  killed.json              node1's daemon killed mid-sweep: the job fails naming node1
  after-restart.json       node1 back: a new group's sweep is exact again
  one-daemon.json          both devices in one daemon: exact

Run by the script (BENCHD_GPU_SCRIPT=gpu-cross-node): a missing file is a
failed step. Otherwise there is nothing to check and they skip."""
import json
import os

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def saved(out_dir):
    if os.environ.get("BENCHD_GPU_SCRIPT") != "gpu-cross-node":
        pytest.skip("checks the files scripts/gpu-cross-node.sh leaves; run that script")

    def load(name, why):
        path = os.path.join(out_dir, name)
        assert os.path.exists(path), f"no {name}: {why}"
        with open(path) as f:
            text = f.read()
        try:
            return json.loads(text)
        except ValueError:
            raise AssertionError(f"{name} is not JSON ({why}): {text[-600:]}")
    return load


def assert_exact(job, name):
    """The sweep succeeded and every row was checked and exact."""
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (name, job.get("state"), job.get("errorMessage"))
    rows = job.get("result", {}).get("collective", {}).get("rows", [])
    assert rows, f"{name}: no rows"
    bad = [r for r in rows if int(r.get("wrongElements", 0)) != 0 or int(r.get("checkedElements", 0)) <= 0]
    assert not bad, f"{name}: rows not exact: {bad}"


def test_the_cross_node_sweep_is_exact(saved):
    assert_exact(saved("cross-node.json", "the cross-node sweep did not run"), "cross-node")


def test_torch_distributed_ran_the_same_sweep_across_the_nodes(saved, out_dir):
    logs = ""
    for r in (0, 1):
        path = os.path.join(out_dir, f"torch-rank{r}.log")
        if os.path.exists(path):
            logs += f"rank {r}: " + open(path, errors="replace").read()[-300:]
    compared = saved("cross-node-vs-torch.json", f"the torch.distributed reference failed: {logs}")
    assert compared.get("rows"), compared


@pytest.mark.parametrize("streams", [1, 2])
def test_raw_tcp_crossed_the_link(saved, streams):
    tcp = saved(f"tcp-{streams}.json", "bench/tcp_throughput.py did not finish")
    assert tcp["streams"] == streams and tcp["bytes"] > 0 and tcp["gbps"] > 0, tcp


def test_killing_node1_mid_sweep_fails_the_job_naming_it(saved):
    job = saved("killed.json", "the killed sweep's job could not be read")
    assert job.get("state") != "JOB_STATE_SUCCEEDED", job.get("state")
    assert "node1" in job.get("errorMessage", ""), job.get("errorMessage")


def test_after_node1_restarts_the_sweep_is_exact_again(saved):
    assert_exact(saved("after-restart.json", "node1 did not come back"), "after-restart")


def test_one_daemon_with_both_devices_is_exact(saved):
    assert_exact(saved("one-daemon.json", "the one-daemon sweep did not run"), "one-daemon")
