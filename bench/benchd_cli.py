"""benchctl from the bench scripts: runs it, reads its --json output, and says
what went wrong when it could not do what it was asked.

  from benchd_cli import Benchctl, BenchctlError, SUCCEEDED

  cli = Benchctl("build/bin/benchctl")            # the daemon at $BENCHD_ADDRESS
  job = cli.run_job("benchmark", "--preset", "small", "--steps", "10")
  if job["state"] == SUCCEEDED:
      print(job["result"]["benchmark"]["step"]["median"])

A job is queued with `benchctl submit KIND` (benchmark, profile, memory,
collective), followed with `watch` and read back with `get --json`: a Job in
protobuf JSON (lowerCamelCase names, enum value names such as
"JOB_STATE_SUCCEEDED", int64 as strings). Exit status 1 is benchctl's verdict
on a job (it failed, was cancelled or interrupted), which the Job itself
carries; any other non-zero status (2 usage or refused, 3 unreachable, 4 RPC
error) raises BenchctlError with benchctl's stderr.

A bench script runs as `python3 bench/x.py`, which puts bench/ first on
sys.path, so `import benchd_cli` finds this file. Standard library only: the
GPU machines have grpcio (1.84) but not the `benchd` package, whose wheel
would have to travel with every run; benchctl is built there anyway, and the
scripts exercise it. The package (client/python) is for notebooks and users'
own scripts.
"""
import json
import subprocess

SUCCEEDED = "JOB_STATE_SUCCEEDED"
JOB_FAILED = 1  # benchctl's exit status for a job that failed, was cancelled or interrupted


class BenchctlError(RuntimeError):
    """benchctl failed (exit status 2, 3, 4 or a timeout), or its output was not the JSON asked for."""

    def __init__(self, argv, returncode, stderr):
        """returncode: benchctl's exit status, None when it did not exit by itself (or did not start)."""
        self.argv, self.returncode, self.stderr = list(argv), returncode, stderr
        status = "" if returncode is None else f" exited {returncode}"
        super().__init__(f"benchctl {' '.join(self.argv)}{status}: {stderr.strip()}")


class Benchctl:
    """One benchctl binary and daemon.

    path: the benchctl binary. address: the daemon's gRPC address (None:
    benchctl's default, $BENCHD_ADDRESS then 127.0.0.1:7531). rpc_timeout:
    benchctl's --timeout (seconds to reach the daemon). timeout: seconds
    after which a benchctl command is killed and BenchctlError raised (None:
    no limit)."""

    def __init__(self, path="build/bin/benchctl", address=None, rpc_timeout=60, timeout=None):
        self.path, self.address, self.rpc_timeout, self.timeout = path, address, rpc_timeout, timeout

    def run(self, *args):
        """benchctl ARGS... as a CompletedProcess (text stdout and stderr);
        raises BenchctlError unless it exited 0 or 1 (a job's verdict)."""
        argv = [str(a) for a in args]
        cmd = [self.path, "--timeout", str(self.rpc_timeout)]
        if self.address:
            cmd += ["--address", self.address]
        try:
            r = subprocess.run(cmd + argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                               timeout=self.timeout)
        except subprocess.TimeoutExpired as e:
            stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise BenchctlError(argv, None, f"killed after {self.timeout} s. {stderr}") from e
        except OSError as e:
            raise BenchctlError(argv, None, f"cannot run {self.path}: {e}") from e
        if r.returncode not in (0, JOB_FAILED):
            raise BenchctlError(argv, r.returncode, r.stderr)
        return r

    def json(self, *args):
        """benchctl ARGS... --json, its stdout parsed (one JSON document)."""
        r = self.run(*args, "--json")
        try:
            return json.loads(r.stdout)
        except ValueError as e:
            raise BenchctlError([*args, "--json"], r.returncode,
                                f"printed no JSON ({e}): {r.stdout[:200]!r} {r.stderr}") from e

    def submit(self, kind, *flags):
        """Queues a job (`benchctl submit KIND FLAGS...`) and returns its id."""
        return self.json("submit", kind, *flags)["id"]

    def wait(self, job_id):
        """The Job once it has ended (succeeded or not): `watch`, then `get`."""
        self.run("watch", job_id, "--json")
        return self.get(job_id)

    def get(self, job_id):
        return self.json("get", job_id)

    def run_job(self, kind, *flags):
        """Submits a job, waits for it and returns the ended Job; its "state"
        says whether it succeeded ("errorCode", "errorMessage" why not)."""
        return self.wait(self.submit(kind, *flags))

    def evict_all(self):
        """Frees every resident model on every device."""
        self.run("evict", "--all")

    def node(self):
        return self.json("node")

    def jobs(self, limit=None, state=None, kind=None, device=None):
        """`benchctl list`'s jobs, newest first (benchctl fetches the pages)."""
        args = ["list"]
        for flag, value in (("--limit", limit), ("--state", state), ("--kind", kind), ("--device", device)):
            if value is not None:
                args += [flag, value]
        return self.json(*args).get("jobs", [])
