"""Nothing lost when the data disk fills: a job that ends while the disk is
full is not reported done until its result is stored (it shows RUNNING with
result_pending, Watch sends no terminal event), and is SUCCEEDED with its
result once space returns; a stop meanwhile stores it through the disk reserve;
Submit on the full disk is RESOURCE_EXHAUSTED naming the data dir and its free
space; reads keep working. The data dir is a small tmpfs (root only)."""
import os
import subprocess
import tempfile
import threading
import time

import grpc
import pytest

from conftest import Daemon, bench_pb2

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


def spec(steps):
    return bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1, context_length=4,
        warmup_steps=0, measure_steps=steps, mode=bench_pb2.BENCHMARK_MODE_FORWARD))


def fill(path):
    """Writes `path` until the disk is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def first_step(d, job_id):
    for e in d.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=60):
        if e.HasField("step"):
            return


def get(d, job_id):
    return d.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=10)


def wait(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def tmpfs():
    mnt = tempfile.mkdtemp(prefix="benchd-tmpfs-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)


def test_a_result_that_meets_a_full_disk_is_kept_and_stored_when_space_returns(tmpfs):
    data = os.path.join(tmpfs, "data")
    filler = os.path.join(tmpfs, "filler")
    d = Daemon(data, log_path=os.path.join(tempfile.mkdtemp(prefix="benchd-log-"), "benchd.log"))
    d.start()
    try:
        d.wait_worker_up()
        job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(3000)), timeout=30).id
        first_step(d, job_id)
        # A watcher from before the disk fills; it must see the end only once stored.
        events, errors = [], []

        def watch():
            try:
                for e in d.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=400):
                    events.append((time.time(), e))
            except grpc.RpcError as err:
                errors.append(err)
        watcher = threading.Thread(target=watch)
        watcher.start()
        fill(filler)

        pending = wait(lambda: get(d, job_id).result_pending, 240, "the job to end unstored")
        assert "ended succeeded" in pending and data in pending, pending
        job = get(d, job_id)
        assert job.state == bench_pb2.JOB_STATE_RUNNING and not job.HasField("result")
        assert not any(e.HasField("result") for _, e in events)
        # Submit is refused naming the data dir and its free space; reads go on.
        with pytest.raises(grpc.RpcError) as e:
            d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(2)), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        assert f"the data dir '{data}' (" in e.value.details() and " free of " in e.value.details()
        assert job_id in [j.id for j in d.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=10).jobs]
        time.sleep(1)
        assert not any(e.HasField("result") for _, e in events)

        os.remove(filler)  # space again
        freed = time.time()
        job = wait(lambda: (lambda j: j if j.state != bench_pb2.JOB_STATE_RUNNING else None)(
            get(d, job_id)), 30, "the job to be stored")
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        assert job.result_pending == ""
        assert job.result.benchmark.step.count == 3000 and len(job.result.benchmark.steps) == 1000
        watcher.join(timeout=30)
        assert not errors, errors
        results = [(t, e) for t, e in events if e.HasField("result")]
        assert len(results) == 1 and results[0][0] >= freed
        assert results[0][1].result.result.benchmark.step.count == 3000

        # A stop while a result waits: stored at stop (through the disk reserve).
        d.wait_worker_up()
        second = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(3000)), timeout=30).id
        first_step(d, second)
        fill(filler)
        wait(lambda: get(d, second).result_pending, 240, "the second job to end unstored")
        d.stop()
        os.remove(filler)
        d.start()
        job = get(d, second)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        assert job.result.benchmark.step.count == 3000
    finally:
        d.stop()
        if os.path.exists(filler):
            os.remove(filler)


def test_a_daemon_restarted_on_a_full_disk_serves_reads_and_refuses_submit(tmpfs):
    """SQLite needs room for its WAL and shared-memory files to open the store:
    the reserve kept beside the store is that room, so a restart on a full disk
    starts, answers reads, refuses Submit as a running daemon does, and takes
    jobs (and keeps a reserve again) once there is space."""
    data = os.path.join(tmpfs, "data")
    filler = os.path.join(tmpfs, "filler")
    reserve = os.path.join(data, "benchd.sqlite3.reserve")
    d = Daemon(data, log_path=os.path.join(tempfile.mkdtemp(prefix="benchd-log-"), "benchd.log"))
    d.start()
    try:
        d.wait_worker_up()
        done = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(2)), timeout=30).id
        wait(lambda: get(d, done).state == bench_pb2.JOB_STATE_SUCCEEDED, 60, "the first job")
        assert os.path.getsize(reserve) == 8 << 20
        d.stop()
        fill(filler)

        d.start()
        assert "released the 8 MiB disk reserve" in open(d.log_path).read()
        assert get(d, done).state == bench_pb2.JOB_STATE_SUCCEEDED
        assert done in [j.id for j in d.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=10).jobs]
        with pytest.raises(grpc.RpcError) as e:
            d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(2)), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        assert f"the data dir '{data}' (" in e.value.details(), e.value.details()

        os.remove(filler)  # space again: jobs are taken and the reserve is back
        d.wait_worker_up()
        later = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec(2)), timeout=30).id
        job = wait(lambda: (lambda j: j if j.state != bench_pb2.JOB_STATE_QUEUED and
                            j.state != bench_pb2.JOB_STATE_RUNNING else None)(get(d, later)),
                   60, "the job after space returned")
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        assert os.path.getsize(reserve) == 8 << 20
    finally:
        d.stop()
        if os.path.exists(filler):
            os.remove(filler)
