"""The store survives one damaged row (listed with an error, counted, skipped,
the daemon starts), and job ids are never reused against artifacts they do
not own: a deleted store beside old artifacts starts above them; a store with
jobs beside another store's artifacts is refused at start, saying which."""
import os
import shutil
import sqlite3
import subprocess
import time
import urllib.request

import grpc
import pytest

from conftest import BIN, Daemon, bench_pb2, wait_for_state

FINAL = [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_CANCELLED,
         bench_pb2.JOB_STATE_INTERRUPTED]


def tiny(steps=2, warmup=0):
    return bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1, context_length=4,
        warmup_steps=warmup, measure_steps=steps, mode=bench_pb2.BENCHMARK_MODE_FORWARD))


def run(d, spec):
    job_id = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30).id
    job = wait_for_state(d.stub, job_id, FINAL, timeout=120)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    return job_id


def metric(d, name):
    with urllib.request.urlopen(f"http://{d.metrics_address}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def delete_store(data):
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(data, "benchd.sqlite3" + suffix)
        if os.path.exists(path):
            os.remove(path)


def test_a_damaged_row_is_listed_with_an_error_and_the_daemon_starts(tmp_data_dir):
    d = Daemon(tmp_data_dir).start()
    try:
        ids = [run(d, tiny()) for _ in range(3)]
        d.stop()
        db = sqlite3.connect(os.path.join(tmp_data_dir, "benchd.sqlite3"))
        # Job 2's record no longer parses; job 3 is also left QUEUED with a bad
        # record (before the fix, the first failed ListJobs, the second start-up).
        db.execute("UPDATE jobs SET job = x'ffffffff0a' WHERE id = ?", (int(ids[1]),))
        db.execute("UPDATE jobs SET job = x'ffffffff0a', state = 1 WHERE id = ?", (int(ids[2]),))
        db.commit()
        db.close()

        d.start()
        jobs = d.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=10).jobs
        assert [j.id for j in jobs] == list(reversed(ids))
        by_id = {j.id: j for j in jobs}
        assert by_id[ids[0]].state == bench_pb2.JOB_STATE_SUCCEEDED
        assert by_id[ids[0]].result.benchmark.step.median > 0
        for bad in ids[1:]:
            assert by_id[bad].error_code == grpc.StatusCode.DATA_LOSS.value[0]
            assert f"the stored record of job {bad} is damaged" in by_id[bad].error_message
            assert list(by_id[bad].devices) == ["cpu:0"]
        assert by_id[ids[1]].state == bench_pb2.JOB_STATE_SUCCEEDED  # as its columns say
        assert by_id[ids[2]].state == bench_pb2.JOB_STATE_FAILED  # never taken up again
        # Every other job stays readable one by one; the damaged one answers too.
        assert d.stub.GetJob(bench_pb2.GetJobRequest(job_id=ids[0])).result.benchmark.step.count == 2
        assert "damaged" in d.stub.GetJob(bench_pb2.GetJobRequest(job_id=ids[1])).error_message
        assert metric(d, "benchd_store_bad_rows_total") == 2
        assert f"the stored record of job {ids[1]} is damaged" in d.log()
        # And new work goes on.
        d.wait_worker_up()
        run(d, tiny())
    finally:
        d.stop()


def artifact_names(d, job_id):
    resp = d.stub.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=job_id), timeout=10)
    return [a.name for a in resp.artifacts]


def test_a_deleted_store_never_serves_old_artifacts_and_a_foreign_one_is_refused(tmp_data_dir):
    d = Daemon(tmp_data_dir).start()
    try:
        old = run(d, tiny())
        # What a profile job leaves (artifacts/<id>/trace.json), written here
        # directly so that the test needs no profiler.
        folder = os.path.join(tmp_data_dir, "artifacts", old)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(os.path.join(folder, "trace.json"), "w") as f:
            f.write("{}")
        assert artifact_names(d, old) == ["trace.json"]
        d.stop()
        saved = os.path.join(tmp_data_dir, "old.sqlite3")
        shutil.copy(os.path.join(tmp_data_dir, "benchd.sqlite3"), saved)
        delete_store(tmp_data_dir)

        d.start()  # a new, empty store beside job 1's artifacts: adopted
        with pytest.raises(grpc.RpcError) as e:
            d.stub.GetJob(bench_pb2.GetJobRequest(job_id=old), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        d.wait_worker_up()
        new = run(d, tiny())
        assert int(new) > int(old), f"job id {new} reused"
        assert artifact_names(d, new) == []  # before the fix: the old job 1's trace.json
        assert "adopts the folder" in d.log()
        d.stop()

        # The old store put back: it has jobs, and the artifacts are now the new
        # store's. Refused at start, naming the folder and both stores.
        delete_store(tmp_data_dir)
        shutil.move(saved, os.path.join(tmp_data_dir, "benchd.sqlite3"))
        r = subprocess.run([os.path.join(BIN, "benchd"),
                            "--listen", "127.0.0.1:0", "--metrics", "off", "--data-dir",
                            tmp_data_dir, "--device", "cpu:0"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert os.path.join(tmp_data_dir, "artifacts") in r.stderr
        assert "belong to store" in r.stderr and "but the store beside them is" in r.stderr
    finally:
        d.stop()
