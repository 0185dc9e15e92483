"""Fixtures for end-to-end tests: a real benchd on port 0 with a real CPU worker,
benchctl run as a subprocess, and Python gRPC stubs generated from proto/ (once
per process). The daemon, cluster and stubs come from bench/benchd_harness.py,
the one harness the tests and bench scripts share; what the test files import
from here stays as it was (BIN, SRC, Daemon, bench_pb2, cpu_daemon, ...)."""
import os
import subprocess
import sys
import tempfile

import pytest

SRC = os.environ.get("BENCHD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
BENCH = os.path.abspath(os.path.join(SRC, "bench"))
# bench/ first, as when a bench script runs (`python3 bench/<name>.py`): the
# harness, and the scripts' own imports (benchd_cli, compare, reference).
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

from benchd_harness import (BIN, Cluster, Daemon, cpu_daemon, free_port,  # noqa: E402,F401
                            remove_data_dir, stubs, wait_for_state, workers_left)

bench_pb2, bench_pb2_grpc = stubs()


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
    remove_data_dir(tmp_data_dir)


def load_bench_script(name):
    """bench/<name>.py as a module, for tests of its functions (bench/ is first
    on sys.path, above, so its imports resolve as when the script runs)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
