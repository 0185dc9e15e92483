"""A daemon killed outright (SIGKILL) or stopped (SIGTERM) mid-job, for every
kind a CPU runs (memory needs CUDA): at the next start every finished job
keeps its result and artifacts, and the one that was running is INTERRUPTED
(test_lifecycle.py covers a benchmark the same way)."""
import os
import signal
import tempfile
import time

import pytest

from conftest import Daemon, bench_pb2, wait_for_state

DONE = [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED]


def step(steps):
    return bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny"), batch_size=2,
                                   context_length=16, warmup_steps=0, measure_steps=steps)


def profile(steps):
    return bench_pb2.JobSpec(device="cpu:0", profile=bench_pb2.ProfileSpec(
        step=step(steps), profile_steps=2))


def collective(sizes):
    return bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
        targets=[bench_pb2.CollectiveTarget(devices=["cpu:0", "cpu:1"],
                                            backend=bench_pb2.COLLECTIVE_BACKEND_GLOO)],
        sizes_bytes=sizes, warmup_iters=1, iters=20))


def artifacts(d, job_id):
    listed = d.stub.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=job_id), timeout=10)
    return {a.name: a.size_bytes for a in listed.artifacts}


def wait_progress(d, job_id, timeout=120):
    for event in d.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=timeout):
        if event.HasField("step") or event.HasField("collective_row"):
            return
        assert not event.HasField("failed"), event


@pytest.fixture
def daemon2():
    data = tempfile.mkdtemp(prefix="benchd-restart-")
    env = dict(os.environ, BENCHD_WORKER_THREADS="1")
    # No grace at SIGTERM: a job running then is interrupted (test_lifecycle: the grace).
    d = Daemon(data, ["--device", "cpu:1", "--stop-grace", "0"], env=env).start()
    d.wait_worker_up("cpu:0")
    d.wait_worker_up("cpu:1")
    yield d
    d.stop()
    os.system(f"rm -rf {data}")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("running_kind", ["profile", "collective"])
def test_finished_jobs_keep_results_and_artifacts_and_running_ones_are_interrupted(
        daemon2, sig, running_kind):
    d = daemon2
    finished = {}
    for name, spec in (("profile", profile(2)), ("collective", collective([1024, 4096]))):
        job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10).id
        job = wait_for_state(d.stub, job_id, DONE, timeout=180)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (name, job.error_message)
        finished[job_id] = (job.result, artifacts(d, job_id))
    assert any("trace.json" in names for _, names in finished.values())

    spec = profile(100000) if running_kind == "profile" else collective([4 << 20] * 64)
    running = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10).id
    wait_progress(d, running)
    pids = [x.worker_pid for x in d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest()).devices]
    d.stop(sig=sig)
    deadline = time.time() + 30
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids), "a worker outlived its daemon"
    d.start()

    for job_id, (result, names) in finished.items():
        job = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=10)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED and job.result == result, job_id
        assert artifacts(d, job_id) == names, job_id
    job = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=running), timeout=10)
    assert job.state == bench_pb2.JOB_STATE_INTERRUPTED, (running_kind, job.state, job.error_message)
    # The restarted daemon runs work again, a collective included.
    d.wait_worker_up("cpu:0")
    d.wait_worker_up("cpu:1")
    again = d.stub.Submit(bench_pb2.SubmitRequest(spec=collective([1024])), timeout=10).id
    assert wait_for_state(d.stub, again, DONE, timeout=180).state == bench_pb2.JOB_STATE_SUCCEEDED
