"""Process groups and the collective request on CPU workers (Gloo): groups of
2 and 4 run every op with exact results, stay resident across jobs, break
clearly when a member dies or hangs, and can be re-created."""
import json
import os
import signal
import subprocess
import time
import urllib.request

import grpc
import pytest

from conftest import bench_pb2, cpu_daemon, wait_for_state

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
OPS = [bench_pb2.COLLECTIVE_OP_ALL_REDUCE, bench_pb2.COLLECTIVE_OP_ALL_GATHER,
       bench_pb2.COLLECTIVE_OP_REDUCE_SCATTER, bench_pb2.COLLECTIVE_OP_BROADCAST,
       bench_pb2.COLLECTIVE_OP_ALL_TO_ALL]


@pytest.fixture(scope="module")
def cpu4():
    with cpu_daemon(DEVICES, "benchd-coll-") as d:
        yield d


def create(d, devices, timeout_seconds=0.0):
    return d.stub.CreateGroup(bench_pb2.CreateGroupRequest(
        devices=devices, backend=bench_pb2.COLLECTIVE_BACKEND_GLOO, timeout_seconds=timeout_seconds), timeout=120)


def submit(d, **collective):
    spec = bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(**collective))
    return d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)


def run(d, **collective):
    job = submit(d, **collective)
    return wait_for_state(d.stub, job.id, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_CANCELLED],
                          timeout=300)


@pytest.mark.parametrize("world", [2, 4])
def test_gloo_group_runs_every_op_exactly(cpu4, world):
    group = create(cpu4, DEVICES[:world])
    assert group.state == bench_pb2.GROUP_STATE_READY and len(group.ranks) == world
    assert group.setup_seconds > 0 and all(r.worker_pid > 0 for r in group.ranks)
    try:
        for op in OPS:
            for in_place in ([False, True] if op in (bench_pb2.COLLECTIVE_OP_ALL_GATHER,
                                                     bench_pb2.COLLECTIVE_OP_REDUCE_SCATTER) else [False]):
                job = run(cpu4, group=group.id, op=op, sizes_bytes=[4096, 1 << 16], warmup_iters=1,
                          iters=3, in_place=in_place)
                assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (op, job.error_message, cpu4.log())
                r = job.result.collective
                assert len(r.rows) == 2
                for row in r.rows:
                    assert row.world_size == world and row.group == group.id
                    assert row.wrong_elements == 0 and row.checked_elements > 0, (op, row)
                    assert len(row.iteration_seconds) == 3 and len(row.rank_median_seconds) == world
                    assert row.duration.median > 0 and row.busbw_gbps > 0
                    assert row.timer == "host_steady_clock"
                assert r.wrong_elements == 0
                assert r.groups[0].was_resident and r.groups[0].setup_seconds == 0
        listed = {g.id: g for g in cpu4.stub.ListGroups(bench_pb2.ListGroupsRequest()).groups}
        assert listed[group.id].jobs_run == 7 and listed[group.id].state == bench_pb2.GROUP_STATE_READY
    finally:
        cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id))


def test_transient_sweep_over_world_sizes_with_plots(cpu4):
    job = run(cpu4, devices=DEVICES, backend=bench_pb2.COLLECTIVE_BACKEND_GLOO, world_sizes=[2, 4],
              min_bytes=1024, max_bytes=16384, factor=4, warmup_iters=1, iters=2)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    r = job.result.collective
    assert [(row.world_size, row.size_bytes) for row in r.rows] == \
        [(2, 1024), (2, 4096), (2, 16384), (4, 1024), (4, 4096), (4, 16384)]
    assert all(g.transient and not g.was_resident and g.setup_seconds > 0 for g in r.groups)
    assert [p.name for p in r.plots] == ["duration_vs_size", "duration_vs_world_size", "backend_comparison"]
    for p in r.plots:
        assert p.svg.startswith("<svg") and os.path.exists(p.artifact)
    # Transient groups are gone after the job.
    assert all(not g.transient for g in cpu4.stub.ListGroups(bench_pb2.ListGroupsRequest()).groups)


def test_resident_group_is_reused_by_devices_request(cpu4):
    group = create(cpu4, ["cpu:2", "cpu:3"])
    try:
        job = run(cpu4, devices=["cpu:2", "cpu:3"], backend=bench_pb2.COLLECTIVE_BACKEND_GLOO, sizes_bytes=[4096],
                  iters=2)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        use = job.result.collective.groups[0]
        assert use.group == group.id and use.was_resident and use.setup_seconds == 0
    finally:
        cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id))


def test_benchctl_collective_table_json_and_plots(cpu4, tmp_path):
    r = cpu4.benchctl("submit", "collective", "--watch", "--devices", "cpu:0,cpu:1", "--backend", "gloo", "--min", "4KiB",
                      "--max", "16KiB", "--warmup", "1", "--iters", "3", "--svg-dir", str(tmp_path), check=0)
    assert "busbw GB/s" in r.stdout and "wrong elements: 0" in r.stdout, r.stdout
    for size in ["4 KiB", "8 KiB", "16 KiB"]:
        assert size in r.stdout
    assert len(list(tmp_path.glob("*-duration_vs_size.svg"))) == 1
    r = cpu4.benchctl("submit", "collective", "--watch", "--devices", "cpu:0,cpu:1", "--sizes", "4KiB", "--iters", "2", "--json",
                      check=0)
    # --watch --json: the finished Job, as `benchctl get --json` prints it.
    job = json.loads(r.stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED" and job["devices"] == ["cpu:0", "cpu:1"]
    rows = job["result"]["collective"]["rows"]
    assert len(rows) == 1 and rows[0]["worldSize"] == 2 and rows[0].get("wrongElements", "0") in ("0", 0)
    assert job["result"]["collective"]["spec"]["iters"] == "2"
    job_id = job["id"]
    r = cpu4.benchctl("get", job_id, check=0)
    assert "busbw GB/s" in r.stdout


def test_groups_cli(cpu4):
    r = cpu4.benchctl("groups", "create", "--devices", "cpu:1,cpu:2", "--json", check=0)
    gid = json.loads(r.stdout)["id"]
    r = cpu4.benchctl("groups", "list", check=0)
    assert gid in r.stdout and "ready" in r.stdout and "cpu:1,cpu:2" in r.stdout
    cpu4.benchctl("groups", "destroy", gid, check=0)
    r = cpu4.benchctl("groups", "destroy", gid, check=4)
    assert "no group" in r.stderr
    r = cpu4.benchctl("groups", "create", "--devices", "cpu:1,cpu:1", check=2)
    assert "appears twice" in r.stderr
    r = cpu4.benchctl("groups", "create", "--devices", "cpu:0,cpu:1", "--backend", "nccl", check=2)
    assert "nccl needs CUDA devices" in r.stderr


@pytest.mark.parametrize("collective,code,text", [
    (dict(group="g999"), grpc.StatusCode.NOT_FOUND, "no group 'g999'"),
    (dict(devices=["cpu:0", "cpu:1"], min_bytes=4096, max_bytes=1024), grpc.StatusCode.INVALID_ARGUMENT,
     "is more than max_bytes"),
    (dict(devices=["cpu:0", "cpu:1"], factor=1), grpc.StatusCode.INVALID_ARGUMENT, "collective.factor"),
    (dict(devices=["cpu:0", "cpu:1"], backend=bench_pb2.COLLECTIVE_BACKEND_NCCL), grpc.StatusCode.INVALID_ARGUMENT,
     "nccl needs CUDA devices"),
    (dict(devices=["cpu:0", "cpu:9"]), grpc.StatusCode.INVALID_ARGUMENT, "cpu:9 is not served"),
    (dict(devices=["cpu:0"]), grpc.StatusCode.INVALID_ARGUMENT, "world size 1"),
    (dict(devices=["cpu:0", "cpu:1"], world_sizes=[8]), grpc.StatusCode.INVALID_ARGUMENT, "8 ranks need 8"),
])
def test_bad_collective_requests(cpu4, collective, code, text):
    with pytest.raises(grpc.RpcError) as e:
        submit(cpu4, **collective)
    assert e.value.code() == code and text in e.value.details(), e.value.details()


def test_benchctl_bad_sizes(cpu4):
    r = cpu4.benchctl("submit", "collective", "--devices", "cpu:0,cpu:1", "--min", "lots", check=2)
    assert "--min" in r.stderr
    r = cpu4.benchctl("submit", "collective", "--group", "g999", check=4)
    assert "no group 'g999'" in r.stderr


def test_bus_bandwidth_goes_to_metrics(cpu4):
    job = run(cpu4, devices=["cpu:0", "cpu:1"], sizes_bytes=[8192], iters=2)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    with urllib.request.urlopen(f"http://{cpu4.metrics_address}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    want = ('benchd_collective_bus_bandwidth_bytes_per_second{backend="gloo",op="all_reduce",'
            'size_bytes="8192",world_size="2"}')
    lines = [l for l in text.splitlines() if l.startswith(want)]
    assert lines and float(lines[0].split()[-1]) > 0, text
    expected = job.result.collective.rows[0].busbw_gbps * 1e9
    assert abs(float(lines[0].split()[-1]) - expected) <= 1e-6 * expected
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def long_job(d, group_id):
    # Enough iterations to be caught running: ~10 s or more on a CPU.
    return submit(d, group=group_id, sizes_bytes=[1 << 16], warmup_iters=0, iters=100000)


def wait_running(d, job_id):
    job = wait_for_state(d.stub, job_id, [bench_pb2.JOB_STATE_RUNNING, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_SUCCEEDED], timeout=60)
    assert job.state == bench_pb2.JOB_STATE_RUNNING, job
    time.sleep(1.0)  # inside the iterations


def test_killed_member_breaks_group_and_it_can_be_recreated(cpu4):
    group = create(cpu4, ["cpu:0", "cpu:1"], timeout_seconds=30)
    job = long_job(cpu4, group.id)
    wait_running(cpu4, job.id)
    victim = group.ranks[1].worker_pid
    os.kill(victim, signal.SIGKILL)

    job = wait_for_state(cpu4.stub, job.id, [bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_SUCCEEDED], timeout=90)
    assert job.state == bench_pb2.JOB_STATE_FAILED
    assert job.error_code == grpc.StatusCode.FAILED_PRECONDITION.value[0], job
    assert group.id in job.error_message and "killed by signal 9" in job.error_message, job.error_message
    assert f"pid {victim}" in job.error_message

    listed = {g.id: g for g in cpu4.stub.ListGroups(bench_pb2.ListGroupsRequest()).groups}
    assert listed[group.id].state == bench_pb2.GROUP_STATE_BROKEN
    assert "cpu:1" in listed[group.id].broken_reason and "killed by signal 9" in listed[group.id].broken_reason

    # Later jobs on it are refused, naming the group and why.
    with pytest.raises(grpc.RpcError) as e:
        submit(cpu4, group=group.id, sizes_bytes=[4096])
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "broken" in e.value.details() and "killed by signal 9" in e.value.details()

    # Re-create over the same devices once the worker is back; it works.
    cpu4.wait_worker_up("cpu:1")
    again = create(cpu4, ["cpu:0", "cpu:1"])
    assert again.state == bench_pb2.GROUP_STATE_READY and again.id != group.id
    ok = run(cpu4, group=again.id, sizes_bytes=[4096], iters=2)
    assert ok.state == bench_pb2.JOB_STATE_SUCCEEDED, ok.error_message
    assert ok.result.collective.rows[0].wrong_elements == 0
    cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id))
    cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=again.id))


def test_hung_member_times_out_and_breaks_group(cpu4):
    group = create(cpu4, ["cpu:2", "cpu:3"], timeout_seconds=4)
    job = long_job(cpu4, group.id)
    wait_running(cpu4, job.id)
    hung = group.ranks[1].worker_pid
    os.kill(hung, signal.SIGSTOP)
    try:
        job = wait_for_state(cpu4.stub, job.id, [bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_SUCCEEDED], timeout=60)
    finally:
        os.kill(hung, signal.SIGCONT)
    assert job.state == bench_pb2.JOB_STATE_FAILED
    assert job.error_code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0], job
    assert group.id in job.error_message, job.error_message
    listed = {g.id: g for g in cpu4.stub.ListGroups(bench_pb2.ListGroupsRequest()).groups}
    assert listed[group.id].state == bench_pb2.GROUP_STATE_BROKEN
    cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id))
