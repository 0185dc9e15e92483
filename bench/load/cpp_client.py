"""The C++ unary client (benchd_loadgen, built from loadgen.cc) driven like
clients.py's: the same plan, the same window, a ClientResult back. It costs
the machine a fraction of the Python clients' CPU per call, so on a 2-core
machine more of it is left to the daemon being measured."""
import os
import subprocess
from array import array
from typing import IO, List, Optional

from clients import KINDS, ClientPlan, ClientResult


class CppClient:
    """One benchd_loadgen process: started at once, ready once its first
    GetNodeInfo answered, then given the window on stdin."""

    def __init__(self, loadgen: str, plan: ClientPlan, work_dir: str) -> None:
        self.out_dir = os.path.join(work_dir, f"client-{plan.index}")
        os.makedirs(self.out_dir)
        ids_path = os.path.join(self.out_dir, "job_ids.txt")
        tokens_path = os.path.join(self.out_dir, "page_tokens.txt")
        for path, lines in ((ids_path, plan.job_ids), (tokens_path, plan.page_tokens)):
            if any("\n" in line for line in lines):
                raise ValueError(f"{path}: a job id or page token holds a newline")
            with open(path, "w") as f:
                f.write("".join(line + "\n" for line in lines))
        mix = ",".join(f"{kind}={weight}" for kind, weight in plan.mix)
        self.stderr_path = os.path.join(self.out_dir, "stderr.txt")
        self.stderr: IO[bytes] = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [loadgen, "--address", plan.address, "--index", str(plan.index),
             "--concurrency", str(plan.concurrency), "--mix", mix, "--job-ids", ids_path,
             "--page-tokens", tokens_path, "--page-size", str(plan.page_size),
             "--out", self.out_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.index = plan.index

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"benchd_loadgen {self.index} exited with {self.proc.returncode}: "
                               f"{self.error_text()}")
        return line

    def wait_ready(self) -> None:
        line = self._line()
        if line != "ready":
            raise RuntimeError(f"benchd_loadgen {self.index}: expected 'ready', got {line!r}")

    def go(self, start_at: float, end_at: float) -> None:
        """The window, in time.monotonic() seconds (CLOCK_MONOTONIC, as
        std::chrono::steady_clock on Linux)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{start_at!r} {end_at!r}\n")
        self.proc.stdin.close()

    def result(self) -> ClientResult:
        line = self._line()
        rc = self.proc.wait()
        if rc != 0 or not line.startswith("done "):
            raise RuntimeError(f"benchd_loadgen {self.index} exited with {rc} ({line!r}): "
                               f"{self.error_text()}")
        result = ClientResult(self.index, {k: array("d") for k in KINDS})
        for kind in KINDS:
            with open(os.path.join(self.out_dir, f"{kind}.f64"), "rb") as f:
                result.latencies_ms[kind].frombytes(f.read())
        with open(os.path.join(self.out_dir, "failures.txt")) as f:
            result.failures = [l.rstrip("\n") for l in f if l.strip()]
        return result

    def error_text(self) -> str:
        self.stderr.flush()
        with open(self.stderr_path, errors="replace") as f:
            return f.read()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def start_all(loadgen: str, plans: List[ClientPlan], work_dir: str) -> List[CppClient]:
    if not os.access(loadgen, os.X_OK):
        raise SystemExit(f"--api cpp: no benchd_loadgen at {loadgen!r}: build it (ninja -C build "
                         "benchd_loadgen) and pass --loadgen, or use --api aio")
    started: List[CppClient] = []
    try:
        for plan in plans:
            started.append(CppClient(loadgen, plan, work_dir))
        for c in started:
            c.wait_ready()
    except BaseException:
        close_all(started)
        raise
    return started


def close_all(clients: Optional[List[CppClient]]) -> None:
    for c in clients or []:
        c.close()
