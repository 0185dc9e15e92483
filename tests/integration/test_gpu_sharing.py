"""--gpu-sharing on a CPU machine (no NVIDIA driver, so no NVML): a value it
does not know stops benchd with a clear error; `when-idle` without NVML says
at start, loudly, that it cannot check the GPUs and that it will refuse every
GPU job (fail closed: a GPU shared silently is what the mode exists to
prevent), and CPU jobs still run. The refusal itself, and the check against a
real other process, run on a GPU (tests/gpu/test_gpu_sharing.py)."""
import json
import os
import subprocess
import tempfile
import time

from conftest import BIN, Daemon, bench_pb2, remove_data_dir, wait_for_state


def start_line(d):
    """The start log's "benchd: GPUs:" line (written just after endpoints.json)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        line = next((l for l in d.log().splitlines() if "benchd: GPUs:" in l), None)
        if line is not None:
            return line
        time.sleep(0.1)
    raise AssertionError(f"no 'benchd: GPUs:' line in the log: {d.log()}")


def test_an_unknown_mode_is_refused_naming_the_choices():
    r = subprocess.run([os.path.join(BIN, "benchd"), "--gpu-sharing", "sometimes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "--gpu-sharing: expected dedicated" in r.stderr and "or when-idle" in r.stderr, r.stderr
    assert "got 'sometimes'" in r.stderr, r.stderr


def test_when_idle_without_nvml_says_so_at_start_and_cpu_jobs_run():
    data = tempfile.mkdtemp(prefix="benchd-it-gpu-sharing-")
    env = dict(os.environ, BENCHD_NVML_LIBRARY="libbenchd-absent-nvml.so.1")
    d = Daemon(data, extra_args=["--gpu-sharing=when-idle"], env=env).start()
    try:
        line = start_line(d)
        assert "WARNING: --gpu-sharing when-idle cannot check the GPUs" in line, line
        assert "libbenchd-absent-nvml.so.1" in line and "REFUSED" in line, line
        assert "CPU jobs run" in line, line
        d.wait_worker_up()
        r = d.benchctl("submit", "benchmark", "--preset", "tiny", "--batch-size", "2",
                       "--context-length", "16", "--steps", "2", "--json", check=0)
        job = wait_for_state(d.stub, json.loads(r.stdout)["id"],
                             [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED],
                             timeout=300)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        assert list(job.warnings) == []
    finally:
        d.stop()
        remove_data_dir(data)


def test_dedicated_is_the_default_and_says_so():
    data = tempfile.mkdtemp(prefix="benchd-it-gpu-sharing-")
    d = Daemon(data).start()
    try:
        assert "--gpu-sharing dedicated" in start_line(d)
    finally:
        d.stop()
        remove_data_dir(data)
