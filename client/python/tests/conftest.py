"""Fixtures: a real benchd (CPU workers cpu:0 and cpu:1, one thread each) in a
temporary data dir, listening on 127.0.0.1:0, its address read from
<data>/endpoints.json; the binaries come from $BENCHD_BIN_DIR (default
../../../build/bin, i.e. the checkout's build/bin). Ideas from
tests/integration/conftest.py; nothing is shared with it."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator

import pytest

import benchd

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("BENCHD_BIN_DIR", os.path.join(HERE, "..", "..", "..", "build", "bin"))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "memory")
# Small enough for 2 CPU cores: a step of the tiny preset at batch 2 x 32 tokens takes ~2 ms.
TINY = dict(preset="tiny", batch_size=2, context_length=32, warmup_steps=1, steps=3)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"benchd package: {os.path.dirname(benchd.__file__)}", f"benchd binaries: {BIN}"]


class Daemon:
    """One benchd process; restart() keeps its data dir and, with
    same_address=True, its port."""

    def __init__(self, devices: list[str], prefix: str = "benchd-py-",
                 extra_args: list[str] | None = None) -> None:
        self.data_dir = tempfile.mkdtemp(prefix=prefix)
        self.devices = devices
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.log_path = os.path.join(self.data_dir, "benchd.log")

    def start(self, listen: str = "127.0.0.1:0", timeout: float = 60) -> "Daemon":
        binary = os.path.join(BIN, "benchd")
        if not os.access(binary, os.X_OK):
            pytest.fail(f"no benchd binary at {binary} (build it, or set BENCHD_BIN_DIR)")
        endpoints = os.path.join(self.data_dir, "endpoints.json")
        if os.path.exists(endpoints):
            os.remove(endpoints)
        args = [binary, "--listen", listen, "--metrics", "off", "--data-dir", self.data_dir]
        for d in self.devices:
            args += ["--device", d]
        args += self.extra_args
        env = dict(os.environ, BENCHD_WORKER_THREADS="1")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"benchd exited with {self.proc.returncode}: {self.log()}")
            if os.path.exists(endpoints):
                try:
                    with open(endpoints) as f:
                        e = json.load(f)
                except ValueError:
                    e = {}
                if e.get("pid") == self.proc.pid:
                    self.address = e["grpc"]
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"benchd did not start in {timeout}s: {self.log()}")

    def wait_workers_up(self, timeout: float = 120) -> None:
        with benchd.Client(self.address) as c:
            deadline = time.time() + timeout
            while time.time() < deadline:
                states = {d.name: d.worker_state for d in c.node().proto.devices}
                if all(states.get(d) == benchd.v1.bench_pb2.WORKER_STATE_UP
                       for d in self.devices):
                    return
                time.sleep(0.1)
        raise RuntimeError(f"workers not up in {timeout}s: {self.log()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)

    def restart(self, same_address: bool = True) -> "Daemon":
        self.stop()
        return self.start(listen=self.address if same_address else "127.0.0.1:0")

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        self.stop()
        if self.proc is not None and self.proc.poll() is None:
            self.stop(signal.SIGKILL)
        time.sleep(0.2)
        left = subprocess.run(["pgrep", "-f", f"benchd-worker.*{self.data_dir}"],
                              capture_output=True, text=True).stdout.strip()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        assert left == "", f"workers left running: {left}"


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    d = Daemon(["cpu:0", "cpu:1"]).start()
    try:
        d.wait_workers_up()
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="session")
def client(daemon: Daemon) -> Iterator[benchd.Client]:
    with benchd.Client(daemon.address, timeout=30) as c:
        yield c


@pytest.fixture(scope="session")
def results(client: benchd.Client) -> dict[str, benchd.Job]:
    """One of each kind of result, run once for the session: benchmarks of two
    model sizes x fp32/bf16 (train_step), a profile and a 2-rank collective."""
    jobs: dict[str, benchd.Job] = {}
    custom = dict(vocab_size=500, d_model=32, d_ff=64, num_layers=1, num_heads=2)
    for precision in ("fp32", "bf16"):
        jobs[f"tiny-{precision}"] = client.benchmark(**TINY, mode="train_step",
                                                     precision=precision)
        jobs[f"custom-{precision}"] = client.benchmark(
            batch_size=2, context_length=32, warmup_steps=1, steps=3, mode="train_step",
            precision=precision, **custom)
    jobs["profile"] = client.profile(**TINY, profile_steps=1)
    jobs["collective"] = client.collective(devices=["cpu:0", "cpu:1"], sizes=["4KiB", "64KiB"],
                                           warmup=1, iters=3)
    for name, job in jobs.items():
        job.wait(timeout=120, progress=False)
        assert job.state == benchd.JobState.SUCCEEDED, (name, job.proto.error_message)
    return jobs
