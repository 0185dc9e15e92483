"""The daemon under load: start it (cpu:0, port 0, a tmp data dir; through
bench/benchd_harness.py), fill its queue with jobs that stay QUEUED, and read
its memory and CPU from /proc."""
import os
import signal
import sys
import time
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

# bench/ (the harness) beside bench/load/, which is first on sys.path when
# load.py runs; spawned client processes inherit sys.path.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if BENCH not in sys.path:
    sys.path.insert(1, BENCH)
import benchd_harness  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stub_dir(folder: Optional[str] = None) -> str:
    """The stubs' folder (benchd_harness.stub_dir: `folder` when given, else
    generated once in this process); every client process gets it."""
    return str(benchd_harness.stub_dir(folder))


def import_stubs(folder: str) -> Tuple[ModuleType, ModuleType]:
    pb, pb_grpc = benchd_harness.stubs(folder)
    return pb, pb_grpc


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the ")" that closes comm: state is field 3, utime 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_cpu_seconds() -> Tuple[float, float]:
    """(busy, of which interrupts) CPU seconds of the whole machine so far, from
    /proc/stat. Interrupt time (irq + softirq: loopback TCP is mostly softirq)
    is in no process's utime or stime."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user .. steal; guest is already in user
    return (total - idle) / CLOCK_TICKS, (values[5] + values[6]) / CLOCK_TICKS


def status_kb(pid: int, key: str) -> int:
    """A kB figure of /proc/<pid>/status (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(f"{key} not in /proc/{pid}/status")


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def Daemon(bin_dir: str, data_dir: str, extra_env: Dict[str, str]) -> Any:
    """One benchd serving cpu:0 from data_dir (benchd_harness.Daemon, a context
    manager: stopped on exit, killed if SIGTERM does not end it in a minute).
    The heartbeat bound is long: the worker is paused (see pause_worker) and
    GetNodeInfo should answer for an UP worker, as on a busy GPU node."""
    env = dict(os.environ, BENCHD_WORKER_THREADS="1", **extra_env)
    return benchd_harness.Daemon(data_dir, ["--worker-heartbeat-timeout", "3600"], env=env,
                                 metrics="off", bin_dir=bin_dir)


def wait_worker_up(stub: Any, pb: ModuleType, timeout: float = 120) -> int:
    """The cpu:0 worker's pid once it is UP."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = stub.GetNodeInfo(pb.GetNodeInfoRequest(), timeout=10)
        for d in info.devices:
            if d.name == "cpu:0" and d.worker_state == pb.WORKER_STATE_UP:
                return int(d.worker_pid)
        time.sleep(0.1)
    raise RuntimeError(f"worker for cpu:0 not up in {timeout} s")


def tiny_spec(pb: ModuleType, measure_steps: int) -> Any:
    return pb.JobSpec(device="cpu:0", benchmark=pb.BenchmarkSpec(
        model=pb.ModelConfig(preset="tiny"), batch_size=1, context_length=8,
        warmup_steps=0, measure_steps=measure_steps))


def wait_state(stub: Any, pb: ModuleType, job_id: str, state: int, timeout: float = 120) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10)
        if job.state == state:
            return job
        time.sleep(0.05)
    raise RuntimeError(f"job {job_id} not in state {state} after {timeout} s")


def fill_queue(stub: Any, pb: ModuleType, queued: int) -> Tuple[str, List[str]]:
    """A long job that takes the only worker (RUNNING), then `queued` small
    jobs behind it, which stay QUEUED: one job at a time per device, FIFO
    (server/jobs/job_queue.h). Returns (the running job's id, the queued ids)."""
    long_job = stub.Submit(pb.SubmitRequest(spec=tiny_spec(pb, 100000)), timeout=30)
    wait_state(stub, pb, long_job.id, pb.JOB_STATE_RUNNING)
    ids = [stub.Submit(pb.SubmitRequest(spec=tiny_spec(pb, 1)), timeout=30).id
           for _ in range(queued)]
    return long_job.id, ids


def check_still_queued(stub: Any, pb: ModuleType, running_id: str, ids: List[str]) -> None:
    """The long job still runs and every other job is still QUEUED."""
    running = stub.GetJob(pb.GetJobRequest(job_id=running_id), timeout=30)
    if running.state != pb.JOB_STATE_RUNNING:
        raise RuntimeError(f"the long job {running_id} is {running.state}, not RUNNING")
    page = stub.ListJobs(pb.ListJobsRequest(page_size=1000, state=pb.JOB_STATE_QUEUED),
                         timeout=30)
    got = {j.id for j in page.jobs}
    missing = [i for i in ids if i not in got]
    if missing:
        raise RuntimeError(f"{len(missing)} jobs left QUEUED, e.g. {missing[:3]}")


def page_tokens(stub: Any, pb: ModuleType, page_size: int) -> List[str]:
    """Every page's token of ListJobs (no filter), the first page's "" included."""
    tokens = [""]
    while True:
        page = stub.ListJobs(pb.ListJobsRequest(page_size=page_size, page_token=tokens[-1]),
                             timeout=30)
        if not page.next_page_token:
            return tokens
        tokens.append(page.next_page_token)


def pause_worker(pid: int) -> None:
    """SIGSTOP the worker mid-job: its CPU benchmark would otherwise take one
    of this machine's two cores from the daemon (on a GPU node a job's work is
    on the GPU). The job stays RUNNING and the queue behind it stays QUEUED."""
    os.kill(pid, signal.SIGSTOP)


def resume_worker(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
