"""Fixtures for end-to-end tests: a real benchd on port 0 with a real CPU worker,
benchctl run as a subprocess, and Python gRPC stubs generated from proto/."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

BIN = os.environ.get("BENCHD_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
SRC = os.environ.get("BENCHD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))


def _generate_stubs():
    out = tempfile.mkdtemp(prefix="benchd-stubs-")
    from grpc_tools import protoc
    import grpc_tools
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    protos = ["benchd/v1/bench.proto", "benchd/internal/worker.proto"]
    rc = protoc.main(["protoc", f"-I{SRC}/proto", f"-I{include}", f"--python_out={out}",
                      f"--grpc_python_out={out}"] + protos)
    assert rc == 0, "protoc failed"
    sys.path.insert(0, out)
    return out


_generate_stubs()
from benchd.v1 import bench_pb2, bench_pb2_grpc  # noqa: E402


class Daemon:
    """One benchd process. Keeps its data dir across restart() so tests can
    check what survives a restart."""

    def __init__(self, data_dir, extra_args=(), preexec_fn=None, env=None, log_path=None):
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.preexec_fn, self.env = preexec_fn, env
        self.proc = None
        self.address = None
        self.metrics_address = None
        self.log_path = log_path or os.path.join(data_dir, "benchd.log")

    def start(self, timeout=60):
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        endpoints = os.path.join(self.data_dir, "endpoints.json")
        if os.path.exists(endpoints):
            os.remove(endpoints)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "benchd"), "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
             "--data-dir", self.data_dir, "--device", "cpu:0"] + self.extra_args,
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.preexec_fn, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"benchd exited with {self.proc.returncode}: {self.log()}")
            if os.path.exists(endpoints):
                with open(endpoints) as f:
                    e = json.load(f)
                if e["pid"] == self.proc.pid:
                    self.address, self.metrics_address = e["grpc"], e["metrics"]
                    self.channel = grpc.insecure_channel(self.address)
                    self.stub = bench_pb2_grpc.BenchStub(self.channel)
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"benchd did not start in {timeout}s: {self.log()}")

    def wait_worker_up(self, device="cpu:0", timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            info = self.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
            for d in info.devices:
                if d.name == device and d.worker_state == bench_pb2.WORKER_STATE_UP:
                    return d
            time.sleep(0.1)
        raise RuntimeError(f"worker for {device} not up in {timeout}s: {self.log()}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        if getattr(self, "channel", None):
            self.channel.close()
        return self.proc.returncode

    def restart(self):
        self.stop()
        return self.start()

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def benchctl(self, *args, timeout=300, check=None):
        r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", self.address, *args],
                           capture_output=True, text=True, timeout=timeout)
        if check is not None:
            assert r.returncode == check, (
                f"benchctl {' '.join(args)} exited {r.returncode}, wanted {check}\n"
                f"stdout: {r.stdout}\nstderr: {r.stderr}\ndaemon: {self.log()}")
        return r


@contextlib.contextmanager
def cpu_daemon(devices, prefix):
    """A daemon serving these cpu:N devices with every worker up, each worker on
    one thread (they share this machine's cores); stopped after, and no worker
    may outlive it."""
    data = tempfile.mkdtemp(prefix=prefix)
    old = os.environ.get("BENCHD_WORKER_THREADS")
    os.environ["BENCHD_WORKER_THREADS"] = "1"
    try:
        extra = [a for dev in devices if dev != "cpu:0" for a in ("--device", dev)]
        d = Daemon(data, extra).start()
    finally:
        if old is None:
            del os.environ["BENCHD_WORKER_THREADS"]
        else:
            os.environ["BENCHD_WORKER_THREADS"] = old
    try:
        for dev in devices:
            d.wait_worker_up(dev)
        yield d
    finally:
        d.stop()
        time.sleep(0.2)
        leftovers = subprocess.run(["pgrep", "-f", f"benchd-worker.*{data}"],
                                   capture_output=True, text=True).stdout.strip()
        subprocess.run(["rm", "-rf", data])
        assert leftovers == "", f"workers left running: {leftovers}"


@pytest.fixture
def tmp_data_dir():
    d = tempfile.mkdtemp(prefix="benchd-it-")
    yield d
    subprocess.run(["rm", "-rf", d])


@pytest.fixture
def daemon(tmp_data_dir):
    d = Daemon(tmp_data_dir).start()
    yield d
    d.stop()
    # No worker may outlive its daemon.
    time.sleep(0.2)
    leftovers = subprocess.run(["pgrep", "-f", f"benchd-worker.*{tmp_data_dir}"],
                               capture_output=True, text=True).stdout.strip()
    assert leftovers == "", f"workers left running: {leftovers}"


def load_bench_script(name):
    """bench/<name>.py as a module, for tests of its functions. bench/ goes
    first on sys.path, as when the script runs (`python3 bench/<name>.py`), so
    its imports (benchd_cli, compare, reference) resolve the same way."""
    import importlib.util
    bench = os.path.abspath(os.path.join(SRC, "bench"))
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(name, os.path.join(bench, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def wait_for_state(stub, job_id, states, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=10)
        if job.state in states:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} not in {states} after {timeout}s")
