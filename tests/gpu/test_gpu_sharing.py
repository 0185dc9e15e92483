"""--gpu-sharing when-idle against a real other process on the GPU
(scripts/gpu-sharing.sh): a daemon of its own on cuda:0 in when-idle mode;
a Python/torch process holding GPU memory makes Submit refuse a benchmark
(FAILED_PRECONDITION naming cuda:0, the GPU's UUID, that process's pid, name
and memory); once it is killed the same benchmark runs, with no warning; a
process that comes while a benchmark runs leaves the job a warning naming it.
What nvidia-smi showed at each point (benchd's idle worker included: the
resident CUDA context the docs speak of) goes to $BENCHD_GPU_OUT/gpu-sharing.txt."""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import pytest

import benchd_harness
from conftest import Ctl

pytestmark = pytest.mark.gpu

SMALL = ["--device", "cuda:0", "--preset", "small", "--precision", "bf16", "--batch-size", "4",
         "--context-length", "128", "--warmup-steps", "3"]
HOG = """
import sys, time, torch
x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""
HOG_BYTES = 2 << 30


def hog_python():
    """A Python with torch: $BENCHD_GPU_HOG_PYTHON, the machines' /opt/torch/.venv, or this one."""
    for p in (os.environ.get("BENCHD_GPU_HOG_PYTHON"), "/opt/torch/.venv/bin/python3"):
        if p and os.path.exists(p):
            return p
    return sys.executable


class Hog:
    """Another process on the GPU: torch allocating HOG_BYTES, up until killed."""

    def __enter__(self):
        self.proc = subprocess.Popen([hog_python(), "-c", HOG, str(HOG_BYTES), "900"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", f"the other process did not start: {line}{self.proc.stdout.read()}"
        self.pid = self.proc.pid
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)
        # Until the driver has let go of its context.
        deadline = time.time() + 60
        while str(self.pid) in smi_apps() and time.time() < deadline:
            time.sleep(0.5)


def smi(*args):
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60).stdout


def smi_apps():
    return smi("--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader")


@pytest.fixture(scope="module")
def report(out_dir):
    f = open(os.path.join(out_dir, "gpu-sharing.txt"), "a")
    yield lambda *lines: (f.write("\n".join(lines) + "\n"), f.flush())
    f.close()


@pytest.fixture(scope="module")
def when_idle(out_dir, report):
    """benchctl against a benchd of its own on cuda:0 with --gpu-sharing=when-idle."""
    bin_dir = os.environ.get("BENCHD_BIN_DIR", benchd_harness.BIN)
    data = tempfile.mkdtemp(prefix="benchd-gpu-sharing-")
    d = benchd_harness.Daemon(data, devices=["cuda:0"], extra_args=["--gpu-sharing=when-idle"],
                              log_path=os.path.join(out_dir, "benchd-gpu-sharing.log"),
                              bin_dir=bin_dir)
    with d:
        ctl = Ctl(bin_dir, d.address, data)
        info = ctl.wait_up("cuda:0")
        report(f"daemon pid {d.pid}, cuda:0 worker pid {info['workerPid']}",
               "start line: " + next((l for l in open(d.log_path) if "benchd: GPUs:" in l), "?").strip(),
               "nvidia-smi with benchd's idle worker alone:", smi_apps())
        yield ctl
    benchd_harness.remove_data_dir(data)


def uuid():
    return smi("-i", "0", "--query-gpu=uuid", "--format=csv,noheader").strip()


def wait_final(ctl, job_id, timeout=300):
    deadline = time.time() + timeout
    while True:
        job = ctl.json("get", job_id)
        if job.get("state") not in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING"):
            return job
        assert time.time() < deadline, f"job {job_id} still {job.get('state')} after {timeout} s"
        time.sleep(0.5)


def run_job(ctl, *args):
    return wait_final(ctl, ctl.json("submit", "benchmark", *SMALL, *args)["id"])


def test_another_process_on_the_gpu_refuses_the_job_naming_it(when_idle, report):
    with Hog() as hog:
        report(f"other process: pid {hog.pid}", "nvidia-smi with it:", smi_apps())
        r = when_idle.run("submit", "benchmark", *SMALL, "--steps", "5", "--json")
        out = r.stdout + r.stderr
        report(f"submit while it runs: exit {r.returncode}", out.strip())
        if r.returncode == 0:  # taken before the worker reported its UUID: the dispatcher refuses
            job = wait_final(when_idle, json.loads(r.stdout)["id"])
            out = json.dumps(job)
            report("the job:", out)
            assert job.get("errorCode") == 9, out
        assert f"pid {hog.pid} (python" in out, out
        assert "cuda:0 (" + uuid() + ")" in out, out
        assert "GiB of GPU memory" in out and "--gpu-sharing when-idle" in out, out


@pytest.fixture(scope="module")
def idle_run(when_idle, report):
    """The benchmark on the idle GPU once the other process is gone."""
    job = run_job(when_idle, "--steps", "20")
    report(f"after it was killed: {job.get('state')} {job.get('errorMessage', '')}",
           f"warnings: {job.get('warnings', [])}")
    return job


def test_once_it_has_ended_the_job_runs_with_no_warning(idle_run):
    assert idle_run.get("state") == "JOB_STATE_SUCCEEDED", idle_run.get("errorMessage")
    assert not idle_run.get("warnings"), idle_run["warnings"]


def test_a_process_that_comes_during_the_job_is_a_warning(when_idle, idle_run, report):
    host = [float(s.get("hostSeconds", 0)) for s in idle_run["result"]["benchmark"]["steps"]
            if not s.get("warmup")]
    steps = max(200, min(200000, int(30 / max(statistics.median(host), 1e-4))))
    job_id = when_idle.json("submit", "benchmark", *SMALL, "--steps", str(steps))["id"]
    deadline = time.time() + 120
    while when_idle.json("get", job_id).get("state") != "JOB_STATE_RUNNING":
        assert time.time() < deadline, when_idle.json("get", job_id)
        time.sleep(0.2)
    with Hog() as hog:
        state = when_idle.json("get", job_id).get("state")
        assert state == "JOB_STATE_RUNNING", f"the job ({steps} steps) ended before the other process came"
        job = wait_final(when_idle, job_id)
    report(f"a job of {steps} steps; pid {hog.pid} came while it ran: {job.get('state')}",
           f"warnings: {job.get('warnings', [])}")
    assert job.get("state") == "JOB_STATE_SUCCEEDED", job.get("errorMessage")
    warnings = job.get("warnings", [])
    assert any(f"pid {hog.pid} (python" in w and "shared GPU" in w for w in warnings), warnings
