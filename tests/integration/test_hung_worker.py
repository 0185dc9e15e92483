"""A worker that stops (SIGSTOP) mid-job, or cannot start at all, must not
stall the daemon: calls that need no worker answer at once whatever the
workers do, calls that need one fail fast naming it, and the worker's state
shows in GetNodeInfo, the health service (per device and overall) and
/metrics within the heartbeat bound. Reflection serves the public API only."""
import concurrent.futures
import os
import signal
import stat
import tempfile
import time
import urllib.request

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import \
    ProtoReflectionDescriptorDatabase

from conftest import Daemon, bench_pb2, wait_for_state

HEARTBEAT_TIMEOUT_S = 2
# Detection: the timeout, one heartbeat interval (1 s), one health update.
DETECTION_BOUND_S = HEARTBEAT_TIMEOUT_S + 2
# Calls that need no worker answer "at once": far below the seconds a
# blocked server thread used to cost each (4 calls took 4 s, 32 took 32 s).
PROMPT_S = 1.5

LONG = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
    model=bench_pb2.ModelConfig(preset="tiny"), batch_size=2, context_length=16,
    mode=bench_pb2.BENCHMARK_MODE_TRAIN_STEP, warmup_steps=0, measure_steps=100000))
SHORT = bench_pb2.JobSpec(device="cpu:1", benchmark=bench_pb2.BenchmarkSpec(
    model=bench_pb2.ModelConfig(preset="tiny"), batch_size=2, context_length=16,
    warmup_steps=1, measure_steps=2))


def start_daemon(data, devices, extra=()):
    env = dict(os.environ, BENCHD_WORKER_THREADS="1")
    args = [a for dev in devices if dev != "cpu:0" for a in ("--device", dev)]
    return Daemon(data, args + ["--worker-heartbeat-timeout", str(HEARTBEAT_TIMEOUT_S),
                                *extra], env=env).start()


def health(d, service):
    stub = health_pb2_grpc.HealthStub(d.channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def wait_until(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not {what} within {timeout} s")


def device(d, name):
    info = d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=5)
    return next(x for x in info.devices if x.name == name)


def metric(d, line_start):
    with urllib.request.urlopen(f"http://{d.metrics_address}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(line_start):
                return float(line.split()[-1])
    return None


def timed(call):
    start = time.monotonic()
    try:
        call()
        return time.monotonic() - start, None
    except grpc.RpcError as e:
        return time.monotonic() - start, e.code()


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="benchd-hung-")
    yield d
    os.system(f"rm -rf {d}")


def test_a_stopped_worker_stalls_nothing_and_shows_within_the_bound(data_dir):
    d = start_daemon(data_dir, ["cpu:0", "cpu:1"])
    stopped_pid = None
    try:
        d.wait_worker_up("cpu:0")
        d.wait_worker_up("cpu:1")
        wait_until(lambda: health(d, "") == health_pb2.HealthCheckResponse.SERVING, 10,
                   "serving once both workers are up")
        other = d.stub.Submit(bench_pb2.SubmitRequest(spec=SHORT), timeout=10).id
        wait_for_state(d.stub, other, [bench_pb2.JOB_STATE_SUCCEEDED], timeout=120)
        running = d.stub.Submit(bench_pb2.SubmitRequest(spec=LONG), timeout=10).id
        for event in d.stub.Watch(bench_pb2.WatchRequest(job_id=running), timeout=120):
            if event.HasField("step"):
                break
        stopped_pid = device(d, "cpu:0").worker_pid
        os.kill(stopped_pid, signal.SIGSTOP)
        stopped_at = time.monotonic()

        # 32 GetNodeInfo and 24 EvictModel at once against the stopped
        # worker; meanwhile health, GetJob of another job and ListJobs.
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)
        node_info = [pool.submit(timed, lambda: d.stub.GetNodeInfo(
            bench_pb2.GetNodeInfoRequest(), timeout=60)) for _ in range(32)]
        evicts = [pool.submit(timed, lambda: d.stub.EvictModel(
            bench_pb2.EvictModelRequest(device="cpu:0"), timeout=60)) for _ in range(24)]
        time.sleep(0.2)
        for _ in range(5):
            took, code = timed(lambda: health(d, "benchd.v1.Bench/cpu:1"))
            assert code is None and took < PROMPT_S, f"health took {took:.2f} s ({code})"
            took, code = timed(lambda: d.stub.GetJob(
                bench_pb2.GetJobRequest(job_id=other), timeout=60))
            assert code is None and took < PROMPT_S, f"GetJob took {took:.2f} s ({code})"
            took, code = timed(lambda: d.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=60))
            assert code is None and took < PROMPT_S, f"ListJobs took {took:.2f} s ({code})"
        node_info = [f.result() for f in node_info]
        assert all(code is None for _, code in node_info), node_info
        slowest = max(took for took, _ in node_info)
        assert slowest < PROMPT_S, f"GetNodeInfo took up to {slowest:.2f} s"
        # At most 16 calls wait on one worker; the rest are refused at once.
        refused = [f.result() for f in evicts if f.done()]
        assert len([1 for took, code in refused
                    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and took < PROMPT_S]) >= 8, refused

        # Within the bound: UNRESPONSIVE in GetNodeInfo, NOT_SERVING in
        # health (that device's name and the node's), 0 in /metrics.
        wait_until(lambda: device(d, "cpu:0").worker_state == bench_pb2.WORKER_STATE_UNRESPONSIVE,
                   DETECTION_BOUND_S + 1, "UNRESPONSIVE")
        assert time.monotonic() - stopped_at <= DETECTION_BOUND_S + 1
        dev = device(d, "cpu:0")
        assert "has not answered its heartbeat" in dev.worker_detail, dev.worker_detail
        assert dev.HasField("last_heartbeat")
        wait_until(lambda: health(d, "benchd.v1.Bench/cpu:0") ==
                   health_pb2.HealthCheckResponse.NOT_SERVING, 2, "cpu:0 NOT_SERVING")
        for name in ("", "benchd.v1.Bench"):
            assert health(d, name) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert health(d, "benchd.v1.Bench/cpu:1") == health_pb2.HealthCheckResponse.SERVING
        assert metric(d, 'benchd_worker_up{device="cpu:0"}') == 0
        assert metric(d, 'benchd_worker_up{device="cpu:1"}') == 1

        # Calls that need it fail at once, naming it; Submit too.
        took, code = timed(lambda: d.stub.ListModels(
            bench_pb2.ListModelsRequest(device="cpu:0"), timeout=60))
        assert code == grpc.StatusCode.UNAVAILABLE and took < PROMPT_S, (took, code)
        with pytest.raises(grpc.RpcError) as e:
            d.stub.Submit(bench_pb2.SubmitRequest(spec=LONG), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "the worker for cpu:0" in e.value.details(), e.value.details()
        # cpu:1 still takes work.
        assert d.stub.Submit(bench_pb2.SubmitRequest(spec=SHORT), timeout=10).id

        # Continued, it serves again and its job goes on; cancelling works.
        os.kill(stopped_pid, signal.SIGCONT)
        stopped_pid = None
        # The calls that were waiting on it end (answered, or at their deadline).
        for f in evicts:
            took, code = f.result(timeout=60)
            assert code in (None, grpc.StatusCode.RESOURCE_EXHAUSTED,
                            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE), code
        pool.shutdown()
        wait_until(lambda: device(d, "cpu:0").worker_state == bench_pb2.WORKER_STATE_UP,
                   DETECTION_BOUND_S, "UP again")
        wait_until(lambda: health(d, "") == health_pb2.HealthCheckResponse.SERVING, 3,
                   "the node SERVING again")
        assert d.stub.GetJob(bench_pb2.GetJobRequest(job_id=running)).state == \
            bench_pb2.JOB_STATE_RUNNING
        d.stub.CancelJob(bench_pb2.CancelJobRequest(job_id=running), timeout=30)
        wait_for_state(d.stub, running, [bench_pb2.JOB_STATE_CANCELLED], timeout=30)
    finally:
        if stopped_pid:
            os.kill(stopped_pid, signal.SIGCONT)
        d.stop()


def test_a_worker_that_cannot_start_is_not_serving_and_refuses_jobs(data_dir):
    # A "worker" that dies at once, as one with a broken install would.
    worker = os.path.join(data_dir, "broken-worker")
    with open(worker, "w") as f:
        f.write("#!/bin/sh\necho 'libtorch_cuda.so: cannot open shared object file' >&2\nexit 1\n")
    os.chmod(worker, stat.S_IRWXU)
    d = start_daemon(data_dir, ["cpu:0"], ["--worker", worker])
    try:
        wait_until(lambda: device(d, "cpu:0").worker_detail.startswith("exited with code 1"),
                   10, "the failed start shown")
        for name in ("", "benchd.v1.Bench", "benchd.v1.Bench/cpu:0"):
            assert health(d, name) == health_pb2.HealthCheckResponse.NOT_SERVING, name
        with pytest.raises(grpc.RpcError) as e:
            health(d, "benchd.v1.Bench/cpu:7")
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as e:
            d.stub.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
                device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
                    model=bench_pb2.ModelConfig(preset="tiny")))), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "cpu:0 cannot start (exited with code 1)" in e.value.details(), e.value.details()
        assert "worker-cpu-0.log" in e.value.details()
        assert len(d.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs) == 0

        # Reflection: the public API, never the internal worker service.
        db = ProtoReflectionDescriptorDatabase(d.channel)
        assert set(db.get_services()) == {"benchd.v1.Bench", "grpc.health.v1.Health",
                                          "grpc.reflection.v1alpha.ServerReflection"}
        pool = descriptor_pool.DescriptorPool(db)
        assert pool.FindServiceByName("benchd.v1.Bench").FindMethodByName("Submit")
        with pytest.raises(KeyError):
            pool.FindServiceByName("benchd.internal.Worker")
        with pytest.raises(KeyError):
            db.FindFileByName("benchd/internal/worker.proto")
    finally:
        d.stop()
