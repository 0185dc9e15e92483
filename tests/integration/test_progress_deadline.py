"""A job whose worker stops making progress (SIGSTOP mid-job) is bounded by
its progress deadline: the worker is killed and restarted, the job FAILED
with DEADLINE_EXCEEDED saying what it was doing, and the next job runs.
Every kind a CPU runs (memory needs CUDA: the GPU check covers it), and a
cancel of a job whose worker is stopped."""
import os
import signal
import time

import pytest

from conftest import bench_pb2, cpu_daemon, wait_for_state

DEVICES = ["cpu:0", "cpu:1"]
DEADLINE_S = 3
FAILED = bench_pb2.JOB_STATE_FAILED


def step(steps):
    return bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny"), batch_size=2,
                                   context_length=16, warmup_steps=0, measure_steps=steps)


def device(d, name):
    info = d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=5)
    return next(x for x in info.devices if x.name == name)


def wait_progress(d, job_id, timeout=120):
    """Until the job has shown progress (a step, or a collective row)."""
    for event in d.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=timeout):
        if event.HasField("step") or event.HasField("warmup_step") or \
                event.HasField("collective_row"):
            return
        assert not event.HasField("failed"), event


def wait_new_worker(d, name, old_pid, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        dev = device(d, name)
        if dev.worker_state == bench_pb2.WORKER_STATE_UP and dev.worker_pid != old_pid:
            return dev
        time.sleep(0.1)
    raise AssertionError(f"no new worker for {name}")


@pytest.fixture(scope="module")
def cpu2():
    with cpu_daemon(DEVICES, "benchd-progress-") as d:
        yield d


@pytest.mark.parametrize("kind", ["benchmark", "profile"])
def test_a_stopped_worker_fails_its_job_at_the_deadline_and_is_restarted(cpu2, kind):
    d = cpu2
    if kind == "benchmark":
        spec = bench_pb2.JobSpec(device="cpu:0", progress_timeout_seconds=DEADLINE_S,
                                 benchmark=step(100000))
    else:
        spec = bench_pb2.JobSpec(device="cpu:0", progress_timeout_seconds=DEADLINE_S,
                                 profile=bench_pb2.ProfileSpec(step=step(100000), profile_steps=2))
    job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10).id
    wait_progress(d, job_id)
    pid = device(d, "cpu:0").worker_pid
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    job = wait_for_state(d.stub, job_id, [FAILED, bench_pb2.JOB_STATE_SUCCEEDED], timeout=60)
    took = time.monotonic() - stopped
    assert job.state == FAILED, job
    assert job.error_code == 4, job  # DEADLINE_EXCEEDED
    assert f"no progress for {DEADLINE_S} s" in job.error_message, job.error_message
    assert " after " in job.error_message and f"pid {pid}" in job.error_message, job.error_message
    assert took < DEADLINE_S + 10, took
    new = wait_new_worker(d, "cpu:0", pid)
    assert "by benchd: no progress" in d.stub.GetNodeInfo(
        bench_pb2.GetNodeInfoRequest()).devices[0].worker_detail or new.worker_restarts >= 1
    # The stored spec says which deadline it ran under; the next job runs.
    assert job.spec.progress_timeout_seconds == DEADLINE_S
    nxt = d.stub.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
        device="cpu:0", benchmark=step(2))), timeout=10).id
    done = wait_for_state(d.stub, nxt, [bench_pb2.JOB_STATE_SUCCEEDED, FAILED], timeout=120)
    assert done.state == bench_pb2.JOB_STATE_SUCCEEDED, done.error_message
    assert done.spec.progress_timeout_seconds == 600  # the daemon's default, written out


def test_a_stopped_collective_member_fails_the_job_and_breaks_the_group(cpu2):
    d = cpu2
    group = d.stub.CreateGroup(bench_pb2.CreateGroupRequest(
        devices=DEVICES, backend=bench_pb2.COLLECTIVE_BACKEND_GLOO), timeout=120)
    sizes = [4 << 20] * 64  # the most one request takes; seconds in all
    spec = bench_pb2.JobSpec(progress_timeout_seconds=DEADLINE_S, collective=bench_pb2.CollectiveSpec(
        group=group.id, sizes_bytes=sizes, warmup_iters=1, iters=20))
    job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10).id
    wait_progress(d, job_id)
    pids = {x.name: x.worker_pid for x in
            d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest()).devices}
    os.kill(pids["cpu:1"], signal.SIGSTOP)
    job = wait_for_state(d.stub, job_id, [FAILED, bench_pb2.JOB_STATE_SUCCEEDED], timeout=60)
    assert job.state == FAILED and job.error_code == 4, job
    assert f"no progress for {DEADLINE_S} s (the job's progress deadline)" in job.error_message
    for name in DEVICES:
        wait_new_worker(d, name, pids[name])
    groups = {g.id: g for g in d.stub.ListGroups(bench_pb2.ListGroupsRequest()).groups}
    assert groups[group.id].state == bench_pb2.GROUP_STATE_BROKEN
    d.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=60)


def test_cancelling_a_job_whose_worker_is_stopped(cpu2):
    d = cpu2
    job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
        device="cpu:1", benchmark=step(100000))), timeout=10).id
    wait_progress(d, job_id)
    pid = device(d, "cpu:1").worker_pid
    os.kill(pid, signal.SIGSTOP)
    start = time.monotonic()
    d.stub.CancelJob(bench_pb2.CancelJobRequest(job_id=job_id), timeout=30)
    job = wait_for_state(d.stub, job_id, [bench_pb2.JOB_STATE_CANCELLED], timeout=30)
    assert time.monotonic() - start < 10
    assert job.state == bench_pb2.JOB_STATE_CANCELLED
    # A worker that cannot even be told is replaced; the next job runs.
    wait_new_worker(d, "cpu:1", pid, timeout=60)
    nxt = d.stub.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
        device="cpu:1", benchmark=step(2))), timeout=10).id
    assert wait_for_state(d.stub, nxt, [bench_pb2.JOB_STATE_SUCCEEDED, FAILED],
                          timeout=120).state == bench_pb2.JOB_STATE_SUCCEEDED
