"""Replies stay small whatever a job measured: a long CPU benchmark's GetJob,
Watch and ListJobs go to a client with gRPC's default 4 MB limit, the result
keeps its first 1,000 steps (every step is in the job's steps.csv, and the
statistics are over all of them), ListJobs answers summaries, and the daemon
keeps no finished history. 25,000 steps run in about 25 s here; 100,000 (the
limit) is proven by server/jobs/result_bounds_test.cc on the same code."""
import csv
import io
import statistics

from conftest import bench_pb2, wait_for_state

STEPS = 25000


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fetch(d, job_id, name):
    chunks = d.stub.FetchArtifact(bench_pb2.FetchArtifactRequest(job_id=job_id, name=name),
                                  timeout=60)
    return b"".join(c.data for c in chunks).decode()


def test_a_long_runs_replies_fit_a_default_client(daemon):
    daemon.wait_worker_up()
    before = rss_kb(daemon.proc.pid)
    spec = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1, context_length=1,
        warmup_steps=2, measure_steps=STEPS, mode=bench_pb2.BENCHMARK_MODE_FORWARD))
    job_id = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30).id
    job = wait_for_state(daemon.stub, job_id, [bench_pb2.JOB_STATE_SUCCEEDED,
                                               bench_pb2.JOB_STATE_FAILED], timeout=300)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message

    # GetJob: the first 1,000 steps, how many there were, and where the rest are.
    assert job.ByteSize() < 256 << 10, job.ByteSize()
    res = job.result.benchmark
    assert len(res.steps) == 1000 and res.steps_total == STEPS + 2
    assert res.steps_artifact == "steps.csv"
    rows = list(csv.DictReader(io.StringIO(fetch(daemon, job_id, "steps.csv"))))
    assert len(rows) == STEPS + 2
    measured = [float(r["step_seconds"]) for r in rows if r["warmup"] == "0"]
    # The statistics are the worker's, over every step (not the 1,000 kept).
    assert res.step.count == STEPS
    assert abs(res.step.median - statistics.median(measured)) <= 1e-9 * res.step.median + 1e-12
    assert abs(res.step.max - max(measured)) <= 1e-9 * res.step.max
    assert [float(r["step_seconds"]) for r in rows[:1000]] == \
        [float(f"{s.step_seconds:.9g}") for s in res.steps]

    # Watch of the finished job: its terminal event, as small.
    events = list(daemon.stub.Watch(bench_pb2.WatchRequest(job_id=job_id), timeout=60))
    assert events[-1].HasField("result")
    assert all(e.ByteSize() < 256 << 10 for e in events)
    assert events[-1].result.result.benchmark.steps_total == STEPS + 2

    # ListJobs: summaries, the headline figures kept.
    listed = daemon.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=10)
    assert listed.ByteSize() < 16 << 10, listed.ByteSize()
    summary = listed.jobs[0]
    assert summary.id == job_id and summary.summary
    assert len(summary.result.benchmark.steps) == 0
    assert summary.result.benchmark.step.median == res.step.median
    assert summary.result.benchmark.tokens_per_second == res.tokens_per_second

    # The daemon keeps no finished history of 25,000 events.
    after = rss_kb(daemon.proc.pid)
    assert after - before < 64 << 10, (before, after)
