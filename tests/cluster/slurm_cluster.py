"""A throwaway Slurm cluster on this one machine, for tests (issue 25).

Debian's own daemons, nothing mocked: munged, slurmctld in the host network
namespace on a Linux bridge, and one slurmd per "node", each in a network
namespace of its own with a veth into the bridge, its own address and its own
NodeName (node0 .. nodeN-1). Every node name resolves inside every namespace
(/etc/netns/<ns>/hosts, which `ip netns exec` bind-mounts over /etc/hosts).

    with SlurmCluster(nodes=3) as cluster:
        job = cluster.sbatch("#!/bin/sh\\nsrun hostname\\n", nodes=3)
        assert job.state == "COMPLETED", job

Needs root (namespaces, bridge, /etc/netns) and Debian's slurmctld, slurmd,
slurm-client and munge (scripts/setup.sh installs them); `missing()` says what
is absent. Names carry a prefix, this process's pid and a per-process counter,
so parallel runs never clash; start() first removes what earlier runs whose
process is gone left behind. stop() (also on a failed start, half way) kills
every process it started and every process left in its namespaces, and removes
the namespaces, veths, bridge, /etc/netns entries and its temporary folder.

No cgroups, accounting or systemd: proctrack/linuxproc, task/none,
jobacct_gather/none, accounting_storage/none, select/linear (whole nodes).
Everything runs as root, and all the nodes share the host's file system (the
job's output files, the build's binaries, the munge socket).
"""
from __future__ import annotations

import dataclasses
import fcntl
import itertools
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Callable, Iterable, Mapping

NS_PREFIX = "benchd-slurm"       # namespaces: benchd-slurm-<pid>-<seq>-node<k>
LINK_PREFIX = "bds"              # links: bds<pid>x<seq>b (bridge), bds<pid>x<seq>v<k> (veth)
SUBNET_PREFIX = "10.213"         # each cluster takes a free 10.213.<x>.0/24
LOCK_PATH = "/run/lock/benchd-slurm-cluster.lock"
NETNS_ETC = pathlib.Path("/etc/netns")
SLURMD_PORT = 6818               # every slurmd in its own namespace: no clash
TOOLS = {"ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux", "munged": "munge",
         "slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client",
         "srun": "slurm-client", "scontrol": "slurm-client", "scancel": "slurm-client",
         "squeue": "slurm-client"}   # program: its Debian package
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
_ids = itertools.count()


def missing() -> list[str]:
    """What this machine lacks to run a cluster (empty: nothing)."""
    absent = [f"{tool} (Debian: {package})" for tool, package in TOOLS.items()
              if shutil.which(tool) is None]
    if os.geteuid() != 0:
        absent.append("root (network namespaces, a bridge, /etc/netns)")
    return absent


class ClusterError(RuntimeError):
    pass


@dataclasses.dataclass
class JobResult:
    job_id: int
    state: str          # COMPLETED, FAILED, ... (scontrol's JobState)
    exit_code: str      # "0:0": the batch script's status : the signal that ended it
    output: str         # the batch script's stdout (and every srun step's)
    error: str          # its stderr
    info: dict          # scontrol show job, as key=value pairs

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == "0:0"

    def __str__(self) -> str:
        return (f"job {self.job_id}: {self.state} exit {self.exit_code} "
                f"(reason {self.info.get('Reason')})\n--- stdout\n{self.output}"
                f"--- stderr\n{self.error}")


def _run(args: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and result.returncode != 0:
        raise ClusterError(f"{shlex.join(args)} exited {result.returncode}: "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    return result


def _pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _netns_names() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = _run(["ip", "-o", "link", "show"], check=False).stdout
    return [m.group(1) for m in re.finditer(r"^\d+: ([^:@]+)[:@]", out, re.M)]


def _kill_netns_processes(ns: str) -> None:
    """SIGKILL whatever still runs in namespace ns (slurmstepd, job tasks)."""
    for _ in range(20):
        out = _run(["ip", "netns", "pids", ns], check=False).stdout.split()
        pids = [int(p) for p in out if p.isdigit() and int(p) != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise ClusterError(f"processes still in namespace {ns}: {out}")


def _remove_netns(ns: str) -> None:
    if ns in _netns_names():
        _kill_netns_processes(ns)
        _run(["ip", "netns", "delete", ns])
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)


def _remove_link(name: str) -> None:
    if name in _link_names():
        _run(["ip", "link", "delete", name])


def node_command(ns: str, hostname: str, args: list[str]) -> list[str]:
    """args run as on node `hostname`: in network namespace ns, with
    /etc/netns/<ns>/hosts as /etc/hosts, and that hostname (a UTS namespace
    of its own, as a real node has).

    Not `ip netns exec`: it mounts a fresh sysfs over /sys, which hides
    /sys/fs/cgroup, and slurmd 22.05 loads its cgroup plugin even under
    proctrack/linuxproc + task/none ("No filesystem mounted on
    /sys/fs/cgroup", then "slurmd initialization failed"). So a mount and UTS
    namespace of our own (unshare), the hosts file bound over /etc/hosts there
    (what ip netns exec does with /etc/netns), then the network namespace
    (nsenter)."""
    return ["unshare", "--mount", "--propagation", "slave", "--uts", "--",
            "nsenter", f"--net=/run/netns/{ns}", "--",
            "sh", "-c", 'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"',
            str(NETNS_ETC / ns / "hosts"), hostname, *args]


def remove_stale() -> list[str]:
    """Removes what earlier runs whose process is gone (killed before their
    stop()) left: their daemons (found by their temporary folder in their
    command line or environment), namespaces, links, /etc/netns entries and
    temporary folders. Returns what went."""
    removed = []
    stale = re.compile(rf"{NS_PREFIX}-(\d+)-\d+-".encode())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                text = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                text += f.read()
        except OSError:
            continue
        m = stale.search(text)
        if m and not _pid_alive(int(m.group(1))):
            try:
                os.kill(int(entry), signal.SIGKILL)
                removed.append(f"pid {entry}")
            except ProcessLookupError:
                pass
    for path in pathlib.Path(tempfile.gettempdir()).glob(f"{NS_PREFIX}-*"):
        m = re.match(rf"{NS_PREFIX}-(\d+)-\d+-", path.name)
        if m and path.is_dir() and not _pid_alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    owner = re.compile(rf"^{NS_PREFIX}-(\d+)-\d+-node\d+$")
    names = set(_netns_names()) | (
        {p.name for p in NETNS_ETC.iterdir()} if NETNS_ETC.is_dir() else set())
    for ns in sorted(names):
        m = owner.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _remove_netns(ns)
            removed.append(ns)
    link = re.compile(rf"^{LINK_PREFIX}(\d+)x\d+[bv]\d*$")
    for name in _link_names():
        m = link.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _remove_link(name)
            removed.append(name)
    return removed


class SlurmCluster:
    """N slurmd nodes in N network namespaces, one slurmctld, one munged.

    Attributes once started: nodes (names), addresses (name -> IP),
    controller_address, env (what a Slurm client here needs: SLURM_CONF),
    tmp (its folder: slurm.conf, logs, spool, jobs/)."""

    def __init__(self, nodes: int = 2, *, cpus_per_node: int = 2,
                 start_timeout: float = 30.0, keep_tmp: bool = False):
        if not 1 <= nodes <= 50:
            raise ValueError(f"nodes must be 1..50, not {nodes}")
        self.n = nodes
        self.cpus_per_node = cpus_per_node
        self.start_timeout = start_timeout
        self.keep_tmp = keep_tmp
        seq = next(_ids)
        pid = os.getpid()
        self.tag = f"{pid}-{seq}"
        self.nodes = [f"node{k}" for k in range(nodes)]
        self.namespaces = [f"{NS_PREFIX}-{pid}-{seq}-node{k}" for k in range(nodes)]
        self.bridge = f"{LINK_PREFIX}{pid}x{seq}b"
        self.veths = [f"{LINK_PREFIX}{pid}x{seq}v{k}" for k in range(nodes)]
        for name in [self.bridge, *self.veths]:
            assert len(name) <= 15, name   # IFNAMSIZ
        self.tmp: pathlib.Path | None = None
        self.addresses: dict[str, str] = {}
        self.controller_address: str | None = None
        self.controller_port: int | None = None
        self.env: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self._undo: list[tuple[str, Callable[[], None]]] = []

    # --- life

    def __enter__(self) -> "SlurmCluster":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        errors = self.stop()
        if errors and exc_type is None:
            raise ClusterError("teardown: " + "; ".join(errors))

    def start(self) -> "SlurmCluster":
        """Builds the cluster and waits until every node is IDLE. On any
        failure it tears down what it made, then raises."""
        absent = missing()
        if absent:
            raise ClusterError("missing: " + ", ".join(absent))
        try:
            remove_stale()
            self._make_tmp()
            self._make_network()
            self._start_munged()
            self._write_conf()
            self._start_slurmctld()
            for k in range(self.n):
                self._start_slurmd(k)
            self._wait_for_nodes()
        except BaseException as e:
            logs = self.logs() if self.tmp else ""
            errors = self.stop()
            if isinstance(e, Exception):
                raise ClusterError(f"cluster start failed: {e}"
                                   + (f"\nteardown: {errors}" if errors else "")
                                   + (f"\n{logs}" if logs else "")) from e
            raise
        return self

    def stop(self) -> list[str]:
        """Undoes start() in reverse, every step even if one fails. Safe to
        call twice and after a half-done start. Returns the errors seen."""
        errors = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as e:  # keep going: leave as little as possible
                errors.append(f"{what}: {e}")
        return errors

    def _on_stop(self, what: str, undo: Callable[[], None]) -> None:
        self._undo.append((what, undo))

    # --- setup steps (each registers its undo before it acts)

    def _make_tmp(self) -> None:
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix=f"{NS_PREFIX}-{self.tag}-"))
        tmp = self.tmp
        self._on_stop(f"remove {tmp}", lambda: None if self.keep_tmp
                      else shutil.rmtree(tmp, ignore_errors=False))
        tmp.chmod(0o755)   # SlurmdSpoolDir holds the job scripts: 755 (slurm.conf(5))
        for sub in ("log", "spool", "state", "run", "jobs"):
            (tmp / sub).mkdir(mode=0o755)

    def _make_network(self) -> None:
        # The subnet is picked and taken (the bridge's address) under a lock,
        # so two runs starting together never pick the same one.
        LOCK = pathlib.Path(LOCK_PATH)
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _run(["ip", "-o", "-4", "addr", "show"]).stdout + \
                _run(["ip", "-4", "route", "show"]).stdout
            for x in itertools.chain(range(os.getpid() % 200 + 10, 250), range(10, 250)):
                subnet = f"{SUBNET_PREFIX}.{x}."
                if subnet not in used:
                    break
            else:
                raise ClusterError(f"no free {SUBNET_PREFIX}.x.0/24 subnet")
            self.controller_address = subnet + "1"
            self._on_stop(f"remove bridge {self.bridge}", lambda: _remove_link(self.bridge))
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{self.controller_address}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
        self.addresses = {name: f"{subnet}{10 + k}" for k, name in enumerate(self.nodes)}
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{ip} {name}\n" for name, ip in self.addresses.items())
        hosts += f"{self.controller_address} slurmctld\n"
        for k, (ns, veth) in enumerate(zip(self.namespaces, self.veths)):
            self._on_stop(f"remove namespace {ns}", lambda ns=ns: _remove_netns(ns))
            self._on_stop(f"remove veth {veth}", lambda veth=veth: _remove_link(veth))
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                  "netns", ns])
            _run(["ip", "link", "set", veth, "master", self.bridge, "up"])
            ip = self.addresses[self.nodes[k]]
            _run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)

    def _spawn(self, name: str, args: list[str], env: Mapping[str, str] | None = None,
               node: int | None = None) -> subprocess.Popen:
        """Starts one foreground daemon in its own session (on node `node`:
        in its namespaces), output to log/<name>.out."""
        if node is not None:
            args = node_command(self.namespaces[node], self.nodes[node], args)
        out = open(self.tmp / "log" / f"{name}.out", "wb")
        self._on_stop(f"stop {name}", lambda: self._terminate(name))
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
        out.close()
        self.procs[name] = proc
        return proc

    def _terminate(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        # Whatever else it left in its session (forked helpers).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            raise ClusterError(f"{name} (pid {proc.pid}) survived SIGKILL")

    def _wait(self, what: str, ready: Callable[[], bool], procs: Iterable[str],
              timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            for name in procs:
                code = self.procs[name].poll()
                if code is not None:
                    raise ClusterError(f"{name} exited {code} before {what}:\n"
                                       + self._tail(self.tmp / "log" / f"{name}.out"))
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} after {timeout:.0f} s")
            time.sleep(0.1)

    def _start_munged(self) -> None:
        munge = self.tmp / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        self.munge_socket = munge / "munge.socket"
        self._spawn("munged", [
            "munged", "--foreground", "--force", f"--socket={self.munge_socket}",
            f"--key-file={key}", f"--log-file={munge / 'munged.log'}",
            f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}"])
        self._wait("munge socket", self.munge_socket.exists, ["munged"], 10)

    def _write_conf(self) -> None:
        with socket.socket() as s:   # a free port on the bridge for slurmctld
            s.bind((self.controller_address, 0))
            self.controller_port = s.getsockname()[1]
        t = self.tmp
        conf = f"""\
# A throwaway cluster made by tests/cluster/slurm_cluster.py ({self.tag}).
ClusterName=benchd{self.tag.replace('-', 'x')}
SlurmctldHost={socket.gethostname().split('.')[0]}({self.controller_address})
SlurmctldPort={self.controller_port}
SlurmdPort={SLURMD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={t}/state
SlurmdSpoolDir={t}/spool/%n
SlurmctldPidFile={t}/run/slurmctld.pid
SlurmdPidFile={t}/run/slurmd-%n.pid
SlurmctldLogFile={t}/log/slurmctld.log
SlurmdLogFile={t}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/linear
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=30
SlurmctldTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=300
NodeName=DEFAULT CPUs={self.cpus_per_node} RealMemory=1000 State=UNKNOWN Port={SLURMD_PORT}
"""
        conf += "".join(f"NodeName={name} NodeAddr={ip} NodeHostname={name}\n"
                        for name, ip in self.addresses.items())
        conf += "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        (t / "slurm.conf").write_text(conf)
        self.env = {"SLURM_CONF": str(t / "slurm.conf")}

    def _start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"], env=self.env)
        self._wait("slurmctld answering", lambda: self.scontrol("ping", check=False)
                   .stdout.find("is UP") >= 0, ["slurmctld"], 15)

    def _start_slurmd(self, k: int) -> None:
        name = self.nodes[k]
        (self.tmp / "spool" / name).mkdir(mode=0o755, exist_ok=True)
        self._spawn(f"slurmd-{name}", ["slurmd", "-D", "-N", name], env=self.env, node=k)

    def _wait_for_nodes(self) -> None:
        def idle() -> bool:
            states = self.node_states()
            return len(states) == self.n and all(s == "IDLE" for s in states.values())
        self._wait(f"{self.n} IDLE nodes", idle,
                   ["munged", "slurmctld", *(f"slurmd-{n}" for n in self.nodes)],
                   self.start_timeout)

    # --- using it

    def client(self, args: list[str], check: bool = True, timeout: float = 30,
               env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Runs a Slurm client command (in the host namespace) against this cluster."""
        return _run(args, check=check, timeout=timeout,
                    env={**os.environ, **(env or {}), **self.env})

    def scontrol(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.client(["scontrol", *args], check=check)

    def node_states(self) -> dict[str, str]:
        out = self.scontrol("show", "nodes", "-o", check=False).stdout
        states = {}
        for line in out.splitlines():
            info = _fields(line)
            if "NodeName" in info:
                states[info["NodeName"]] = info.get("State", "")
        return states

    def node_processes(self) -> dict[str, list[tuple[int, str]]]:
        """What runs in each node's network namespace: name -> [(pid, comm)]."""
        found = {}
        for name, ns in zip(self.nodes, self.namespaces):
            procs = []
            for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
                try:
                    comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    continue
                procs.append((int(pid), comm))
            found[name] = procs
        return found

    def job_info(self, job_id: int) -> dict:
        return _fields(self.scontrol("show", "job", "-o", str(job_id)).stdout)

    def sbatch(self, script: str | os.PathLike, nodes: int, *, args: Iterable[str] = (),
               env: Mapping[str, str] | None = None, timeout: float = 60,
               name: str = "job") -> JobResult:
        """Submits a batch script (its text, or a path to it) on `nodes` nodes,
        waits until it ends, and returns its state and output. The job gets
        this process's environment plus env (sbatch --export=ALL). A job not
        done within timeout is cancelled and ClusterError raised."""
        job_id = self.submit(script, nodes, args=args, env=env, name=name)
        return self.wait_job(job_id, timeout=timeout, name=name)

    def submit(self, script: str | os.PathLike, nodes: int, *, args: Iterable[str] = (),
               env: Mapping[str, str] | None = None, name: str = "job") -> int:
        """sbatch without waiting: the job's id (wait_job() waits for it)."""
        jobs = self.tmp / "jobs"
        if isinstance(script, os.PathLike):
            path = pathlib.Path(script)
        else:
            path = jobs / f"{name}.sh"
            path.write_text(script)
            path.chmod(0o755)
        out, err = jobs / f"{name}-%j.out", jobs / f"{name}-%j.err"
        submitted = self.client(["sbatch", "--parsable", "-N", str(nodes), "-J", name,
                                 f"--output={out}", f"--error={err}", f"--chdir={jobs}",
                                 *args, str(path)], env=env)
        return int(submitted.stdout.strip().split(";")[0])

    def wait_job(self, job_id: int, *, timeout: float = 60, name: str = "job") -> JobResult:
        """Waits until job job_id (submitted as `name`) ends; cancels it and
        raises ClusterError when it has not within timeout."""
        jobs = self.tmp / "jobs"
        deadline = time.monotonic() + timeout
        while True:
            info = self.job_info(job_id)
            state = info.get("JobState", "")
            if state in FINAL_STATES:
                break
            if time.monotonic() > deadline:
                self.client(["scancel", str(job_id)], check=False)
                raise ClusterError(f"job {job_id} still {state} after {timeout:.0f} s "
                                   f"(reason {info.get('Reason')})\n"
                                   + self._read(jobs / f"{name}-{job_id}.out")
                                   + self._read(jobs / f"{name}-{job_id}.err"))
            time.sleep(0.2)
        return JobResult(job_id, state, info.get("ExitCode", ""),
                         self._read(jobs / f"{name}-{job_id}.out"),
                         self._read(jobs / f"{name}-{job_id}.err"), info)

    # --- diagnostics

    def logs(self, lines: int = 30) -> str:
        """The tail of every daemon's log, for a failure message."""
        if not self.tmp or not self.tmp.exists():
            return ""
        parts = []
        for path in sorted((self.tmp / "log").glob("*")) + [self.tmp / "munge" / "munged.log"]:
            if path.exists():
                parts.append(f"--- {path.name}\n{self._tail(path, lines)}")
        return "\n".join(parts)

    @staticmethod
    def _tail(path: pathlib.Path, lines: int = 30) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @staticmethod
    def _read(path: pathlib.Path) -> str:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""


def _fields(line: str) -> dict:
    """scontrol -o output: key=value pairs separated by spaces."""
    return dict(m.groups() for m in re.finditer(r"(\S+?)=(\S*)", line))
