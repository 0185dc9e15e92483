"""The C++ unary client (benchd_loadgen, built from loadgen.cc) driven like
clients.py's: the same plan, the same window, a ClientResult back. It costs
the machine a fraction of the Python clients' CPU per call, so on a 2-core
machine more of it is left to the daemon being measured."""
import json
import os
import subprocess
from array import array
from typing import IO, Any, Dict, List, Optional

from clients import KINDS, ClientPlan, ClientResult, WatchResult


class _Loadgen:
    """One benchd_loadgen process (`name` in messages): its stdout a line
    protocol, its stderr in OUT_DIR/stderr.txt, its files in OUT_DIR."""

    def __init__(self, argv: List[str], out_dir: str, name: str) -> None:
        self.out_dir, self.name = out_dir, name
        self.stderr_path = os.path.join(out_dir, "stderr.txt")
        self.stderr: IO[bytes] = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"benchd_loadgen {self.name} exited with {self.proc.returncode}: "
                               f"{self.error_text()}")
        return line

    def _wait_ok(self, line: str) -> None:
        """Waits for the process to end; it must end with status 0 (`line`: its last line)."""
        rc = self.proc.wait()
        if rc != 0:
            raise RuntimeError(f"benchd_loadgen {self.name} exited with {rc} ({line!r}): "
                               f"{self.error_text()}")

    def _failures(self) -> List[str]:
        with open(os.path.join(self.out_dir, "failures.txt")) as f:
            return [l.rstrip("\n") for l in f if l.strip()]

    def error_text(self) -> str:
        self.stderr.flush()
        with open(self.stderr_path, errors="replace") as f:
            return f.read()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class CppClient(_Loadgen):
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
        super().__init__(
            [loadgen, "--address", plan.address, "--index", str(plan.index),
             "--concurrency", str(plan.concurrency), "--mix", mix, "--job-ids", ids_path,
             "--page-tokens", tokens_path, "--page-size", str(plan.page_size),
             "--out", self.out_dir], self.out_dir, str(plan.index))
        self.index = plan.index

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
        self._wait_ok(line)
        if not line.startswith("done "):
            raise RuntimeError(f"benchd_loadgen {self.name}: expected 'done ...', got {line!r}: "
                               f"{self.error_text()}")
        result = ClientResult(self.index, {k: array("d") for k in KINDS})
        for kind in KINDS:
            with open(os.path.join(self.out_dir, f"{kind}.f64"), "rb") as f:
                result.latencies_ms[kind].frombytes(f.read())
        result.failures = self._failures()
        return result


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


class CppWatcher(_Loadgen):
    """benchd_loadgen --watchers N: the process that holds the Watch streams,
    spread over `channels` TCP connections, from one thread polling one
    CompletionQueue. connected() once every channel answered a GetNodeInfo;
    open(at) starts every stream at `at` (time.monotonic(); 0 = now);
    opened() waits until all had a first event (or its --open-timeout);
    stop() cancels them and returns a WatchResult with each stream's
    first-event latency."""

    def __init__(self, loadgen: str, address: str, job_ids: List[str], channels: int,
                 work_dir: str, open_timeout: float) -> None:
        if not os.access(loadgen, os.X_OK):
            raise SystemExit(f"--watchers-from cpp: no benchd_loadgen at {loadgen!r}: build it "
                             "(cmake --build build --target benchd_loadgen) and pass --loadgen, "
                             "or use --watchers-from py")
        self.watchers = len(job_ids)
        self.out_dir = os.path.join(work_dir, "watchers")
        os.makedirs(self.out_dir)
        ids_path = os.path.join(self.out_dir, "watch_ids.txt")
        if any("\n" in j for j in job_ids):
            raise ValueError(f"{ids_path}: a job id holds a newline")
        with open(ids_path, "w") as f:
            f.write("".join(j + "\n" for j in job_ids))
        super().__init__(
            [loadgen, "--address", address, "--watchers", str(len(job_ids)),
             "--watch-ids", ids_path, "--watch-channels", str(channels),
             "--open-timeout", str(open_timeout), "--out", self.out_dir],
            self.out_dir, "(watchers)")
        self.summary: Dict[str, Any] = {}

    def _expect(self, word: str) -> str:
        line = self._line()
        if line.split(" ")[0] != word:
            raise RuntimeError(f"benchd_loadgen (watchers): expected {word!r}, got {line!r}")
        return line

    def connected(self) -> None:
        self._expect("connected")

    def open(self, at: float = 0.0) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"open {at!r}\n")
        self.proc.stdin.flush()

    def opened(self) -> int:
        """Streams that had a first event: all of them, or fewer after --open-timeout."""
        return int(self._expect("opened").split(" ")[1])

    def stop(self) -> WatchResult:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.close()
        self._wait_ok(self._expect("done"))
        with open(os.path.join(self.out_dir, "watch.json")) as f:
            self.summary = json.load(f)
        result = WatchResult(opened=self.summary["opened"],
                             open_at_end=self.summary["open_at_end"],
                             events=self.summary["events"])
        for key, name in (("issue_s", "start_all_s"), ("all_opened_s", "first_all_s")):
            if self.summary.get(key) is not None:
                setattr(result, name, float(self.summary[key]))
        with open(os.path.join(self.out_dir, "first_event.f64"), "rb") as f:
            result.first_event_ms.frombytes(f.read())
        result.failures = self._failures()
        return result
