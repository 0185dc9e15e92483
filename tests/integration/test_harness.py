"""bench/benchd_harness.py, the one launcher the tests and bench scripts share:
its stubs are generated at most once per process (CI's time is watched: one
protoc run per test file), a second folder is refused rather than silently
ignored, and a daemon that cannot start says why, with its log."""
import os
import sys
import tempfile

import pytest

import benchd_harness
from conftest import Daemon, bench_pb2


def test_stubs_are_generated_once_per_process(monkeypatch):
    folder = benchd_harness.stub_dir()  # conftest generated them at import

    def again():
        raise AssertionError("the stubs were generated a second time")
    monkeypatch.setattr(benchd_harness, "_generate", again)
    assert benchd_harness.stub_dir() == folder
    assert benchd_harness.stubs()[0] is bench_pb2
    assert folder in sys.path
    assert os.path.exists(os.path.join(folder, "benchd", "v1", "bench_pb2.py"))


def test_a_second_stub_folder_is_refused():
    other = tempfile.mkdtemp(prefix="benchd-other-stubs-")
    try:
        with pytest.raises(RuntimeError, match="already imported from"):
            benchd_harness.stub_dir(other)
    finally:
        os.rmdir(other)


def test_a_daemon_that_cannot_start_says_why(tmp_path):
    d = Daemon(str(tmp_path), ["--no-such-flag"])
    with pytest.raises(RuntimeError, match="benchd exited with") as e:
        d.start(timeout=30)
    assert "no-such-flag" in str(e.value), e.value
