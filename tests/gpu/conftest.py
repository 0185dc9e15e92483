"""The checks of the GPU scripts (scripts/gpu-*.sh), as pytest tests marked
`gpu`. Without an NVIDIA GPU (CI is CPU-only) they are collected and skipped;
ctest gpu.collected keeps them importable there.

On a GPU machine a script builds the programs, starts its daemon, runs its
benchmarks and then

    BENCHD_BIN_DIR=build-gpu/bin BENCHD_GPU_TEST_ADDRESS=$BENCHD_ADDRESS \\
      BENCHD_GPU_OUT=$OUT python3 -m pytest -m gpu tests/gpu/test_estimate.py

The environment:
  BENCHD_BIN_DIR           benchd, benchd-worker, benchctl (default build/bin)
  BENCHD_GPU_TEST_ADDRESS  a running daemon's gRPC address (the script's);
                           unset, the session starts its own through the
                           harness (bench/benchd_harness.py) on every GPU
                           nvidia-smi lists and cpu:0
  BENCHD_GPU_TEST_DATA     that running daemon's data dir (for tests that read
                           its artifacts in place)
  BENCHD_GPU_TEST_NODES    the two cluster nodes' addresses, node0 first
                           (test_cluster.py; scripts/gpu-cluster.sh)
  BENCHD_GPU_SCRIPT        the script running them (gpu-lib.sh's gpu_pytest):
                           they then run without a GPU too (its dry runs)
  BENCHD_GPU_OUT           where tests leave what they fetched or printed
                           (default: a temporary folder)
Only the standard library, pytest and the harness are needed: the GPU
machines' Python has no grpc_tools, so the tests drive benchctl (JSON out).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import benchd_harness  # noqa: E402


def gpus():
    """The GPU indices nvidia-smi lists ([] without nvidia-smi or a GPU)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    r = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                       text=True, timeout=60)
    return [line.strip() for line in r.stdout.splitlines() if line.strip()] if r.returncode == 0 else []


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("gpu")]
    # Run by a GPU script (a CPU dry run included), or against daemons given.
    given = any(os.environ.get(v) for v in ("BENCHD_GPU_SCRIPT", "BENCHD_GPU_TEST_ADDRESS",
                                            "BENCHD_GPU_TEST_NODES"))
    if not marked or given or gpus():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi lists none here); "
                                   "the GPU machines run these through scripts/gpu-*.sh")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def out_dir():
    """Where a test leaves its files: $BENCHD_GPU_OUT, else a temporary folder."""
    out = os.environ.get("BENCHD_GPU_OUT") or tempfile.mkdtemp(prefix="benchd-gpu-out-")
    os.makedirs(out, exist_ok=True)
    return out


class Ctl:
    """benchctl against one daemon; run() returns the CompletedProcess whatever
    the exit status (the checks look at it), json() parses the job it printed."""

    def __init__(self, bin_dir, address, data_dir):
        self.path = os.path.join(bin_dir, "benchctl")
        self.address, self.data_dir = address, data_dir

    def run(self, *args, rpc_timeout=60, timeout=1200):
        return subprocess.run([self.path, "--address", self.address, "--timeout", str(rpc_timeout),
                               *[str(a) for a in args]],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout)

    def json(self, *args, **kw):
        r = self.run(*args, "--json", **kw)
        try:
            return json.loads(r.stdout)
        except ValueError:
            raise AssertionError(f"benchctl {' '.join(map(str, args))} --json exited "
                                 f"{r.returncode} with no JSON: {r.stdout[-600:]} {r.stderr[-600:]}")

    def node(self):
        return self.json("node")

    def wait_up(self, device, timeout=180):
        """Until device's worker is UP with its memory known (a CUDA worker
        takes seconds to start); its DeviceInfo as JSON."""
        import time
        deadline = time.time() + timeout
        while True:
            devices = {d["name"]: d for d in self.node().get("devices", [])}
            d = devices.get(device, {})
            if d.get("workerState") == "WORKER_STATE_UP" and int(d.get("totalMemoryBytes", 0)) > 0:
                return d
            assert time.time() < deadline, f"{device} not up in {timeout} s: {devices}"
            time.sleep(1)


@pytest.fixture(scope="session")
def ctl(out_dir):
    """benchctl against the script's daemon (BENCHD_GPU_TEST_ADDRESS), or one this
    session starts on every GPU and cpu:0, its log in out_dir/benchd-pytest.log."""
    address = os.environ.get("BENCHD_GPU_TEST_ADDRESS")
    if address:
        yield Ctl(benchd_harness.BIN, address, os.environ.get("BENCHD_GPU_TEST_DATA"))
        return
    data = tempfile.mkdtemp(prefix="benchd-gpu-test-")
    devices = [f"cuda:{i}" for i in gpus()] + ["cpu:0"]
    d = benchd_harness.Daemon(data, devices=devices,
                              log_path=os.path.join(out_dir, "benchd-pytest.log"))
    with d:
        yield Ctl(benchd_harness.BIN, d.address, data)
    benchd_harness.remove_data_dir(data)
