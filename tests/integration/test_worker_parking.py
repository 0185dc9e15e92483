"""--worker-idle-exit (issue 38, a fleet mode that holds no GPU): a worker
idle for the bound is stopped and PARKED (its process gone, never restarted,
no restart counted), the node stays ready and healthy meanwhile, the next job
starts it again (its start in the job's log events) and succeeds, and a
worker in a resident group is never parked while the group lives.

Real daemon, real CPU workers; the GPU side follows from the process being
gone (no process, no CUDA context)."""
import os
import subprocess
import time
import urllib.request

from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import BIN, bench_pb2, cpu_daemon

IDLE_EXIT_S = 1
SHORT = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
    model=bench_pb2.ModelConfig(preset="tiny"), batch_size=2, context_length=16,
    warmup_steps=1, measure_steps=2))


def devices(d):
    info = d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=5)
    return {x.name: x for x in info.devices}


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not {what} within {timeout} s")


def parked(d, *names):
    now = devices(d)
    return all(now[n].worker_state == bench_pb2.WORKER_STATE_PARKED for n in names)


def health(d, service):
    stub = health_pb2_grpc.HealthStub(d.channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def metric(d, line_start):
    with urllib.request.urlopen(f"http://{d.metrics_address}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(line_start):
                return float(line.split()[-1])
    return None


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_idle_workers_are_parked_started_by_the_next_job_and_kept_by_a_group():
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-park-",
                    ["--worker-idle-exit", str(IDLE_EXIT_S)]) as d:
        pids = {n: x.worker_pid for n, x in devices(d).items()}
        assert all(pids.values()), pids

        # Idle for the bound: parked, the processes gone.
        wait_until(lambda: parked(d, "cpu:0", "cpu:1"), IDLE_EXIT_S + 4, "both parked")
        # (Shown parked from when it is told to exit: gone moments later.)
        for name, pid in pids.items():
            wait_until(lambda: not alive(pid), 10, f"{name}'s worker (pid {pid}) gone")
        for name, x in devices(d).items():
            assert x.worker_pid == 0 and x.worker_restarts == 0, x
            assert "parked after" in x.worker_detail, x.worker_detail
        # Not restarted: still parked a while later, no worker process at all.
        time.sleep(IDLE_EXIT_S + 0.5)
        assert parked(d, "cpu:0", "cpu:1")
        assert all(x.worker_restarts == 0 for x in devices(d).values())
        left = subprocess.run(["pgrep", "-af", f"benchd-worker.*{d.data_dir}"],
                              capture_output=True, text=True).stdout.strip()
        assert left == "", left
        # Ready and healthy while parked: not a failure.
        for service in ("", "benchd.v1.Bench", "benchd.v1.Bench/cpu:0"):
            assert health(d, service) == health_pb2.HealthCheckResponse.SERVING, service
        assert metric(d, 'benchd_worker_up{device="cpu:0"}') == 0
        assert metric(d, 'benchd_worker_parked{device="cpu:0"}') == 1
        node = subprocess.run([os.path.join(BIN, "benchctl"), "--address", d.address, "node"],
                              capture_output=True, text=True, timeout=30)
        assert node.returncode == 0, node.stderr
        assert "parked" in node.stdout and "cpu:0: worker parked after" in node.stdout, node.stdout

        # The next job starts it again, waits for it and runs.
        job = d.stub.Submit(bench_pb2.SubmitRequest(spec=SHORT), timeout=10)
        logs, final = [], None
        for event in d.stub.Watch(bench_pb2.WatchRequest(job_id=job.id), timeout=60):
            if event.HasField("log"):
                logs.append(event.log)
            for end in ("result", "failed", "cancelled", "interrupted"):
                if event.HasField(end):
                    final = getattr(event, end)
            if final is not None:
                break
        assert final is not None and final.state == bench_pb2.JOB_STATE_SUCCEEDED, final
        assert any(line.startswith("starting the worker for cpu:0 for this job") for line in logs), logs
        started = [line for line in logs if line.startswith("the worker for cpu:0 started in ")]
        assert started, logs
        print(started[0])  # the parked worker's start, as the job saw it
        assert devices(d)["cpu:0"].worker_restarts == 0

        # A resident group starts its parked members and keeps them: never
        # parked while it lives; once destroyed, they are.
        group = d.stub.CreateGroup(bench_pb2.CreateGroupRequest(
            devices=["cpu:0", "cpu:1"], backend=bench_pb2.COLLECTIVE_BACKEND_GLOO), timeout=60)
        assert group.state == bench_pb2.GROUP_STATE_READY, group
        time.sleep(IDLE_EXIT_S + 1.5)
        states = {n: x.worker_state for n, x in devices(d).items()}
        assert states == {"cpu:0": bench_pb2.WORKER_STATE_UP,
                          "cpu:1": bench_pb2.WORKER_STATE_UP}, states
        d.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=30)
        wait_until(lambda: parked(d, "cpu:0", "cpu:1"), IDLE_EXIT_S + 4,
                   "both parked after the group was destroyed")
        assert health(d, "") == health_pb2.HealthCheckResponse.SERVING
        # Readiness never dropped: no device stopped serving through it all.
        assert "is not serving" not in d.log(), d.log()
