"""The one Python harness that starts benchd for tests and bench scripts: a
daemon (`Daemon`, `cpu_daemon`), a two-daemon cluster (`Cluster`) and the
Python gRPC stubs of proto/ (`stubs`), generated at most once per process.

    from benchd_harness import Daemon, stubs
    bench_pb2, bench_pb2_grpc = stubs()
    with Daemon(data_dir, devices=["cpu:0", "cpu:1"], metrics="off") as d:
        d.wait_worker_up("cpu:1")
        d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest())
        d.benchctl("list", check=0)

Why here, in bench/: a bench script runs as `python3 bench/x.py`, which puts
bench/ first on sys.path, so it imports this file with no path set-up (as it
does benchd_cli.py); the tests already put bench/ on sys.path to load the
scripts they test (tests/integration/conftest.py, one line). In tests/ every
bench script would need a path hack instead. bench/load/ adds its parent.

Stubs: generated from proto/ with grpc_tools into a temporary folder that
goes first on sys.path (`benchd.v1`, `benchd.internal`), once per process;
`BENCHD_PY_STUBS=DIR` (or `stubs(folder=DIR)`) imports a folder made
beforehand instead, where grpc_tools is missing (the GPU machines). The
installed `benchd` package (client/python) is not used: it is not installed in
the test venv (.venv), whose generated stubs it would shadow, nor on the GPU
machines. Nothing here imports grpc until a stub or channel is asked for, so
a script that only drives benchctl needs the standard library alone.

Binaries: $BENCHD_BIN_DIR, else the checkout's build/bin; proto/ from
$BENCHD_SOURCE_DIR, else this checkout.
"""
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("BENCHD_SOURCE_DIR", os.path.join(HERE, ".."))
BIN = os.environ.get("BENCHD_BIN_DIR", os.path.join(SRC, "build", "bin"))
PROTOS = ("benchd/v1/bench.proto", "benchd/internal/worker.proto", "benchd/internal/cluster.proto")

_stub_dir = None


def stub_dir(folder=None):
    """The folder holding the generated benchd.v1 / benchd.internal modules,
    first on sys.path: `folder`, else $BENCHD_PY_STUBS, else generated from
    proto/ (once per process; later calls return the same folder). Pass it to
    child processes (stubs(folder=...)) so that they need not generate again."""
    global _stub_dir
    folder = folder or os.environ.get("BENCHD_PY_STUBS")
    if folder:
        folder = os.path.abspath(folder)
    elif _stub_dir is not None:
        folder = _stub_dir
    else:
        folder = _generate()
    if _stub_dir is not None and folder != _stub_dir:
        # benchd.v1 is already imported from the first folder; a second would be ignored.
        raise RuntimeError(f"benchd_harness: stubs already imported from {_stub_dir}, not {folder}")
    _stub_dir = folder
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


def _generate():
    out = tempfile.mkdtemp(prefix="benchd-stubs-")
    # Imported by then; child processes given the folder have ended (they are joined).
    atexit.register(shutil.rmtree, out, True)
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError as e:
        raise RuntimeError("benchd_harness: generating the Python stubs needs grpcio-tools "
                           f"({e}); or set BENCHD_PY_STUBS to a folder made beforehand") from e
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    proto = os.path.join(SRC, "proto")
    rc = protoc.main(["protoc", f"-I{proto}", f"-I{include}", f"--python_out={out}",
                      f"--grpc_python_out={out}", *PROTOS])
    if rc != 0:
        raise RuntimeError(f"benchd_harness: protoc exited {rc} on {PROTOS} from {proto}")
    return out


def stubs(folder=None):
    """(bench_pb2, bench_pb2_grpc) of benchd.v1 (see stub_dir for `folder`)."""
    stub_dir(folder)
    from benchd.v1 import bench_pb2, bench_pb2_grpc
    return bench_pb2, bench_pb2_grpc


def free_port(host="127.0.0.1"):
    """A port nobody listens on at `host` now (for flags that need one up front)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def workers_left(data_dir):
    """The command lines of benchd-worker processes still running from data_dir ("": none)."""
    return subprocess.run(["pgrep", "-af", f"benchd-worker.*{data_dir}"],
                          capture_output=True, text=True).stdout.strip()


class Daemon:
    """One benchd process:

        BIN/benchd --listen LISTEN --metrics METRICS --data-dir DATA_DIR
                   --device D... EXTRA_ARGS...

    its stdout and stderr appended to log_path (default DATA_DIR/benchd.log).
    start() waits for DATA_DIR/endpoints.json naming this process; address
    and metrics_address are then what it bound. The data dir is kept across
    restart() so that tests can check what survives a restart. `channel` and
    `stub` (Bench) are made on first use. As a context manager: started, and
    stopped on exit (killed if SIGTERM does not end it within a minute)."""

    def __init__(self, data_dir, extra_args=(), preexec_fn=None, env=None, log_path=None,
                 devices=("cpu:0",), listen="127.0.0.1:0", metrics="127.0.0.1:0", bin_dir=None):
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.preexec_fn, self.env = preexec_fn, env
        self.devices, self.listen, self.metrics = list(devices), listen, metrics
        self.bin_dir = bin_dir or BIN
        self.proc = None
        self.address = None
        self.metrics_address = None
        self.log_path = log_path or os.path.join(data_dir, "benchd.log")
        self._channel = self._stub = None

    def argv(self):
        devices = [a for d in self.devices for a in ("--device", d)]
        return [os.path.join(self.bin_dir, "benchd"), "--listen", self.listen,
                "--metrics", self.metrics, "--data-dir", self.data_dir, *devices, *self.extra_args]

    def start(self, timeout=60):
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        endpoints = os.path.join(self.data_dir, "endpoints.json")
        if os.path.exists(endpoints):
            os.remove(endpoints)
        self._channel = self._stub = None
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=self.preexec_fn, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"benchd exited with {self.proc.returncode}: {self.log()}")
            if os.path.exists(endpoints):
                try:
                    with open(endpoints) as f:
                        e = json.load(f)
                except ValueError:
                    e = {}  # written by rename, so whole; a reader's race all the same
                if e.get("pid") == self.proc.pid:
                    self.address, self.metrics_address = e["grpc"], e.get("metrics")
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"benchd did not start in {timeout}s: {self.log()}")

    @property
    def pid(self):
        return self.proc.pid

    @property
    def channel(self):
        if self._channel is None:
            import grpc
            self._channel = grpc.insecure_channel(self.address)
        return self._channel

    @property
    def stub(self):
        if self._stub is None:
            self._stub = stubs()[1].BenchStub(self.channel)
        return self._stub

    def wait_worker_up(self, device="cpu:0", timeout=120):
        """The device's DeviceInfo once its worker is UP."""
        pb = stubs()[0]
        deadline = time.time() + timeout
        while time.time() < deadline:
            info = self.stub.GetNodeInfo(pb.GetNodeInfoRequest(), timeout=10)
            for d in info.devices:
                if d.name == device and d.worker_state == pb.WORKER_STATE_UP:
                    return d
            time.sleep(0.1)
        raise RuntimeError(f"worker for {device} not up in {timeout}s: {self.log()}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends sig and waits for the exit (TimeoutExpired if it does not come); its status."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None
        return self.proc.returncode

    def restart(self):
        self.stop()
        return self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self):
        """The last 4,000 characters of its log."""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def benchctl(self, *args, timeout=300, check=None, env=None):
        """benchctl --address ADDRESS ARGS... (text output); with check, its exit status must be that."""
        r = subprocess.run([os.path.join(self.bin_dir, "benchctl"), "--address", self.address, *args],
                           capture_output=True, text=True, timeout=timeout, env=env)
        if check is not None:
            assert r.returncode == check, (
                f"benchctl {' '.join(args)} exited {r.returncode}, wanted {check}\n"
                f"stdout: {r.stdout}\nstderr: {r.stderr}\ndaemon: {self.log()}")
        return r


def remove_data_dir(data_dir):
    """After its daemon stopped: no worker may outlive it (AssertionError naming
    them); the folder is removed either way."""
    time.sleep(0.2)
    left = workers_left(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    assert left == "", f"workers left running: {left}"


@contextlib.contextmanager
def cpu_daemon(devices, prefix, extra_args=()):
    """A daemon serving these cpu:N devices with every worker up, each worker on
    one thread (they share this machine's cores), in a data dir of its own;
    stopped and removed after, and no worker may outlive it."""
    data = tempfile.mkdtemp(prefix=prefix)
    extra = [a for dev in devices if dev != "cpu:0" for a in ("--device", dev)] + list(extra_args)
    d = Daemon(data, extra, env=dict(os.environ, BENCHD_WORKER_THREADS="1"))
    try:
        d.start()
        for dev in devices:
            d.wait_worker_up(dev)
        yield d
    finally:
        if d.proc is not None:
            d.stop()
        remove_data_dir(data)


def write_secret_file(path):
    """A new random cluster secret in `path` (mode 0600, as benchd wants it); the path."""
    import secrets
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


class Cluster:
    """Two daemons that form one cluster (docs/architecture.md "Cluster"):
    node0 on 127.0.0.1 (the coordinator), node1 on 127.0.0.2, each with its
    own data dir and cpu:0 worker on one thread, ports chosen up front (the
    coordinator's address is a flag of both), and the cluster's secret in a
    file of its own (--cluster-secret-file; `secret_file`), as a launcher
    hands every member one. `make(rank)` builds a node's
    Daemon with more flags or another environment (a twin, a restart with
    other credentials); `start()` starts both and waits for their workers;
    `close()` stops them and checks that no worker outlived them."""

    HOSTS = ("127.0.0.1", "127.0.0.2")

    def __init__(self, prefix="benchd-cl", lost_after="2", extra_args=(), env=None):
        self.dirs = [tempfile.mkdtemp(prefix=f"{prefix}{i}-") for i in range(2)]
        self.hosts = list(self.HOSTS)
        self.ports = [free_port(h) for h in self.hosts]
        self.addresses = [f"{h}:{p}" for h, p in zip(self.hosts, self.ports)]
        self.coordinator = self.addresses[0]
        self.lost_after, self.extra_args = str(lost_after), list(extra_args)
        self.env = env if env is not None else dict(os.environ, BENCHD_WORKER_THREADS="1")
        self.secret_dir = tempfile.mkdtemp(prefix=f"{prefix}-secret-")
        self.secret_file = write_secret_file(os.path.join(self.secret_dir, "secret"))
        self.nodes = [self.make(rank) for rank in range(2)]

    def args(self, rank, extra=()):
        return ["--listen", self.addresses[rank], "--metrics", "off",
                "--cluster-coordinator", self.coordinator, "--node-rank", str(rank),
                "--nodes", "2", "--cluster-lost-after", self.lost_after,
                "--cluster-secret-file", self.secret_file, *self.extra_args, *extra]

    def make(self, rank, extra=(), env=None):
        return Daemon(self.dirs[rank], self.args(rank, extra),
                      env=env if env is not None else self.env)

    def start(self):
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_worker_up()
        return self

    def close(self):
        for node in self.nodes:
            if node is not None and node.proc is not None:
                node.stop()
        time.sleep(0.2)
        left = [workers_left(d) for d in self.dirs]
        for d in self.dirs + [self.secret_dir]:
            shutil.rmtree(d, ignore_errors=True)
        assert not any(left), f"workers left running: {left}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def wait_for_state(stub, job_id, states, timeout=300):
    """The Job once its state is one of `states` (AssertionError after timeout)."""
    pb = stubs()[0]
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10)
        if job.state in states:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} not in {states} after {timeout}s")
