#!/usr/bin/env python3
"""benchd under load: one real daemon (cpu:0), its queue holding QUEUED jobs,
a Watch stream open on each of them, and a mixed unary load (GetJob, ListJobs
pages, GetNodeInfo) from several client processes; calls/s, p50/p99 latency
per call kind, each Watch stream's time to its first event, the daemon's RSS
idle and under load, the CPU split and every failed call, beside the targets
of issue 18 (10,000 calls/s and p99 < 20 ms at 1,000 watchers, RSS < 300 MB)
and issue 36 (first event p99 <= 100 ms at 1,000 watchers).

    .venv/bin/python bench/load/load.py --bin build/bin   # 1,000 then 0 watchers
    .venv/bin/python bench/load/load.py --watchers 1000 --duration 60 --perf perf.txt

The unary clients are benchd_loadgen processes (loadgen.cc, built beside
benchd: `ninja -C build benchd_loadgen`) unless --api picks Python's grpc.aio
or sync stub; the Python clients cost 3-4 times as much CPU per call, which on
a 2-core machine is taken from the daemon being measured. The Watch streams
are held by one benchd_loadgen --watchers process (one thread, one
CompletionQueue) unless --watchers-from py holds them from grpc.aio.

Each figure set is a fresh daemon. The queue: a long benchmark takes the only
worker (RUNNING), `--queued` small jobs wait behind it (one job at a time per
device, FIFO), and then the worker is SIGSTOPped so that its CPU benchmark does
not take one of this machine's cores (the job stays RUNNING, the rest QUEUED;
its heartbeat bound is an hour, so GetNodeInfo shows it UP). The clients run
on the same machine as the daemon; the CPU rows say who used what.
"""
import argparse
import dataclasses
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from typing import Any, List, Optional, Tuple

import grpc

import clients
import cpp_client
import daemon as d
import report

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..")
# --watch-open during: the burst of Watch streams starts this far into the window.
WATCH_OPEN_INTO_WINDOW_S = 1.0


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"),
                    help="folder with benchd and benchd-worker")
    ap.add_argument("--duration", type=float, default=30.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each window")
    ap.add_argument("--watchers", type=int, nargs="+", default=[1000, 0],
                    help="Watch streams to hold; one run (a fresh daemon) per value")
    ap.add_argument("--watch-channels", type=int, default=10,
                    help="TCP connections the Watch streams are spread over")
    ap.add_argument("--watchers-from", choices=["cpp", "py"], default="cpp",
                    help="who holds the Watch streams: benchd_loadgen --watchers (one thread "
                         "polling a completion queue) or a grpc.aio process")
    ap.add_argument("--watch-open", choices=["before", "during"], default="before",
                    help="open every Watch stream at once before the unary window (the idle RSS "
                         f"then includes them), or {WATCH_OPEN_INTO_WINDOW_S:g} s into it, so the "
                         "burst and the unary calls meet (--watchers-from cpp)")
    ap.add_argument("--open-timeout", type=float, default=60.0,
                    help="seconds for every Watch stream to deliver its first event")
    ap.add_argument("--clients", type=int, default=2, help="unary client processes")
    ap.add_argument("--api", choices=["cpp", "aio", "sync"], default="cpp",
                    help="the unary clients: benchd_loadgen (C++, one thread polling a "
                         "completion queue), grpc.aio coroutines, or the sync stub on threads")
    ap.add_argument("--loadgen", help="benchd_loadgen for --api cpp and --watchers-from cpp "
                                      "(default: BIN/benchd_loadgen)")
    ap.add_argument("--concurrency", type=int, default=16,
                    help="calls in flight per client process (coroutines or threads)")
    ap.add_argument("--queued", type=int, default=1000, help="jobs kept QUEUED")
    ap.add_argument("--page-size", type=int, default=50, help="ListJobs page size")
    ap.add_argument("--mix", default="GetJob=6,ListJobs=3,GetNodeInfo=1",
                    help="call kinds and their weights")
    ap.add_argument("--daemon-env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment for the daemon (e.g. LD_PRELOAD=...), repeatable")
    ap.add_argument("--stubs", metavar="DIR",
                    help="Python stubs of benchd/v1 made beforehand (where grpc_tools is missing); "
                         "by default they are generated from proto/")
    ap.add_argument("--json", metavar="FILE",
                    help="also write every run's figures to FILE (JSON)")
    ap.add_argument("--perf", metavar="FILE",
                    help="perf record the daemon during the first run's window into FILE.data; "
                         "perf_summary.py's tables and perf's top entries go to FILE")
    args = ap.parse_args()
    check_args(ap, args)
    return args


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every figure in range, and the options that need each other, with the reason."""
    if args.duration <= 0:
        ap.error(f"--duration: {args.duration:g} s; it must be > 0")
    if args.warmup < 0:
        ap.error(f"--warmup: {args.warmup:g} s; it must be >= 0")
    if any(w < 0 for w in args.watchers):
        ap.error(f"--watchers: {args.watchers}; each must be >= 0")
    if args.watch_channels < 1:
        ap.error(f"--watch-channels: {args.watch_channels}; it must be >= 1")
    if args.watch_channels > max(args.watchers) > 0:
        ap.error(f"--watch-channels: {args.watch_channels} connections for at most "
                 f"{max(args.watchers)} watchers would leave some without a stream")
    if args.clients < 1 or args.concurrency < 1:
        ap.error("--clients and --concurrency must be >= 1")
    if args.queued < 1:
        ap.error(f"--queued: {args.queued}; the watchers and GetJob need at least one job")
    if not 1 <= args.page_size <= 1000:
        ap.error(f"--page-size: {args.page_size}; the daemon takes 1 to 1000")
    if args.open_timeout <= 0:
        ap.error(f"--open-timeout: {args.open_timeout:g} s; it must be > 0")
    if args.watch_open == "during":
        if args.watchers_from != "cpp":
            ap.error("--watch-open during needs --watchers-from cpp (the Python watchers open "
                     "their streams as the process starts)")
        if args.duration <= WATCH_OPEN_INTO_WINDOW_S:
            ap.error(f"--watch-open during opens the streams {WATCH_OPEN_INTO_WINDOW_S:g} s into "
                     f"the window: --duration must be longer (got {args.duration:g})")


def parse_mix(text: str) -> List[Tuple[str, int]]:
    mix = []
    for part in text.split(","):
        kind, weight = part.split("=")
        if kind not in clients.KINDS:
            sys.exit(f"--mix: unknown call {kind!r}; expected {', '.join(clients.KINDS)}")
        mix.append((kind, int(weight)))
    return mix


class PyWatchers:
    """The grpc.aio watcher process (clients.watcher_main): its streams start
    as the process starts, so open() starts it."""

    def __init__(self, ctx: Any, address: str, stub_dir: str, job_ids: List[str],
                 channels: int) -> None:
        self.watchers = len(job_ids)
        self.ready, self.stop_event, self.out = ctx.Queue(), ctx.Event(), ctx.Queue()
        self.proc = ctx.Process(target=clients.watcher_main,
                                args=(address, stub_dir, job_ids, channels, self.ready,
                                      self.stop_event, self.out))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def open(self, at: float = 0.0) -> None:
        self.proc.start()

    def opened(self, timeout: float) -> bool:
        try:
            self.ready.get(timeout=timeout)
            return True
        except Exception:
            return False

    def stop(self) -> clients.WatchResult:
        self.stop_event.set()
        result: clients.WatchResult = self.out.get(timeout=60)
        self.proc.join()
        return result

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class CppWatchers:
    """benchd_loadgen --watchers (cpp_client.CppWatcher); none for 0 watchers."""

    def __init__(self, loadgen: str, address: str, job_ids: List[str], channels: int,
                 open_timeout: float) -> None:
        self.watchers = len(job_ids)
        self.work_dir = tempfile.mkdtemp(prefix="benchd-load-watchers-")
        self.proc: Optional[cpp_client.CppWatcher] = None
        if job_ids:
            self.proc = cpp_client.CppWatcher(loadgen, address, job_ids, channels, self.work_dir,
                                              open_timeout)
            self.proc.connected()

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def open(self, at: float = 0.0) -> None:
        if self.proc:
            self.proc.open(at)

    def opened(self, timeout: float) -> bool:
        """benchd_loadgen keeps to its own --open-timeout; `timeout` is not used."""
        return self.proc.opened() == self.watchers if self.proc else True

    def stop(self) -> clients.WatchResult:
        return self.proc.stop() if self.proc else clients.WatchResult()

    def close(self) -> None:
        if self.proc:
            self.proc.close()
        shutil.rmtree(self.work_dir, ignore_errors=True)


def start_watchers(args: argparse.Namespace, ctx: Any, address: str, stub_dir: str,
                   job_ids: List[str]) -> Any:
    if args.watchers_from == "cpp":
        return CppWatchers(args.loadgen or os.path.join(args.bin, "benchd_loadgen"), address,
                           job_ids, min(args.watch_channels, max(1, len(job_ids))),
                           args.open_timeout)
    return PyWatchers(ctx, address, stub_dir, job_ids, args.watch_channels)


def fail_open(watch: Any) -> None:
    """Not every stream had its first event in time: stop and say why."""
    result = watch.stop()
    sys.exit(f"the Watch streams did not all open ({result.opened} of {watch.watchers}): "
             + "; ".join(result.failures[:10]))


def start_perf(pid: int, seconds: float, data_path: str) -> subprocess.Popen[bytes]:
    """perf record of every thread of `pid` with DWARF call stacks (Debian's
    libraries have no frame pointers)."""
    return subprocess.Popen(["perf", "record", "-F", "499", "--call-graph", "dwarf,16384",
                             "-p", str(pid), "-o", data_path, "--", "sleep", f"{seconds:.1f}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_perf_report(data_path: str, out_path: str) -> None:
    """perf_summary.py's tables, then perf's own self-time reports by
    shared object and by symbol (lines cut at 160 characters)."""
    parts = [subprocess.run([sys.executable, os.path.join(HERE, "perf_summary.py"), data_path],
                            capture_output=True, text=True, check=False).stdout]
    for sort in ("dso", "dso,sym"):
        report = subprocess.run(["perf", "report", "-i", data_path, "--stdio", "--no-children",
                                 "--sort", sort, "-g", "none", "--percent-limit", "0.5"],
                                capture_output=True, text=True, check=False).stdout
        lines = [l.rstrip()[:160] for l in report.splitlines() if l.strip() and not l.startswith("#")]
        parts.append(f"### perf report --no-children --sort {sort}\n" + "\n".join(lines) + "\n")
    with open(out_path, "w") as out:
        out.write("\n".join(parts))


def measure(pids: dict, window: Tuple[float, float], daemon_pid: int,
            perf: Optional[Tuple[str, str]]) -> Tuple[dict, float, int]:
    """CPU (cores) of each group of pids over the window, the highest daemon
    VmRSS (MB) and thread count sampled every 0.25 s during it."""
    start_at, end_at = window
    time.sleep(max(0.0, start_at - time.monotonic()))
    before = {name: sum(d.cpu_seconds(p) for p in ps) for name, ps in pids.items()}
    machine_before = d.machine_cpu_seconds()
    perf_proc = start_perf(daemon_pid, end_at - time.monotonic() - 1, perf[0]) if perf else None
    rss_max, threads_max = 0.0, 0
    while time.monotonic() < end_at:
        rss_max = max(rss_max, d.status_kb(daemon_pid, "VmRSS") / 1024)
        threads_max = max(threads_max, d.thread_count(daemon_pid))
        time.sleep(min(0.25, max(0.0, end_at - time.monotonic())))
    after = {name: sum(d.cpu_seconds(p) for p in ps) for name, ps in pids.items()}
    machine_after = d.machine_cpu_seconds()
    seconds = end_at - start_at
    cores = {name: (after[name] - before[name]) / seconds for name in pids}
    cores["interrupts (irq, softirq)"] = (machine_after[1] - machine_before[1]) / seconds
    cores["machine"] = (machine_after[0] - machine_before[0]) / seconds
    cores["other processes"] = (cores["machine"] - cores["interrupts (irq, softirq)"]
                                - sum(cores[name] for name in pids))
    if perf_proc is not None:
        perf_proc.wait()
        write_perf_report(perf[0], perf[1])
    return cores, rss_max, threads_max


def start_clients(args: argparse.Namespace, ctx: Any, plans: List[clients.ClientPlan]
                  ) -> Tuple[Tuple[float, float], List[int], Any]:
    """Starts the unary clients, waits until each is ready, opens the window
    (after --warmup). Returns the window, the clients' pids and a function that
    waits for their results."""
    if args.api == "cpp":
        work_dir = tempfile.mkdtemp(prefix="benchd-load-clients-")
        try:
            started = cpp_client.start_all(
                args.loadgen or os.path.join(args.bin, "benchd_loadgen"), plans, work_dir)
        except BaseException:
            shutil.rmtree(work_dir, ignore_errors=True)
            raise
        start_at = time.monotonic() + args.warmup
        for c in started:
            c.go(start_at, start_at + args.duration)

        def collect_cpp() -> List[clients.ClientResult]:
            try:
                return [c.result() for c in started]
            finally:
                cpp_client.close_all(started)
                shutil.rmtree(work_dir, ignore_errors=True)
        return (start_at, start_at + args.duration), [c.pid for c in started], collect_cpp

    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    times = ctx.Array("d", 2)
    procs = []
    for plan in plans:
        p = ctx.Process(target=clients.client_main, args=(plan, ready, go, times, out))
        p.start()
        procs.append(p)
    for _ in procs:
        ready.get(timeout=120)
    start_at = time.monotonic() + args.warmup
    times[0], times[1] = start_at, start_at + args.duration
    go.set()

    def collect_py() -> List[clients.ClientResult]:
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        return results
    return (start_at, start_at + args.duration), [p.pid for p in procs], collect_py


def run_once(args: argparse.Namespace, watchers: int, stub_dir: str,
             perf: Optional[Tuple[str, str]]) -> report.RunFigures:
    pb, pb_grpc = d.import_stubs(stub_dir)
    ctx = multiprocessing.get_context("spawn")
    data = tempfile.mkdtemp(prefix="benchd-load-")
    worker_pid = 0
    try:
        env = dict(e.split("=", 1) for e in args.daemon_env)
        with d.Daemon(args.bin, data, env) as daemon, grpc.insecure_channel(daemon.address) as ch:
            stub = pb_grpc.BenchStub(ch)
            worker_pid = d.wait_worker_up(stub, pb)
            rss_started = d.status_kb(daemon.pid, "VmRSS") / 1024
            running_id, ids = d.fill_queue(stub, pb, args.queued)
            d.pause_worker(worker_pid)
            tokens = d.page_tokens(stub, pb, args.page_size)
            print(f"daemon {daemon.pid} at {daemon.address}: job {running_id} RUNNING (worker "
                  f"{worker_pid} stopped), {len(ids)} QUEUED, {len(tokens)} ListJobs pages",
                  flush=True)

            watch_ids = [ids[i % len(ids)] for i in range(watchers)]
            load_average = os.getloadavg()[0]
            watch = start_watchers(args, ctx, daemon.address, stub_dir, watch_ids)
            try:
                if args.watch_open == "before":
                    watch.open()
                    if not watch.opened(args.open_timeout):
                        fail_open(watch)
                time.sleep(1.0)
                rss_idle = d.status_kb(daemon.pid, "VmRSS") / 1024
                threads_idle = d.thread_count(daemon.pid)

                plans = [clients.ClientPlan(i, daemon.address, stub_dir, args.api,
                                            args.concurrency, ids, tokens, args.page_size,
                                            parse_mix(args.mix))
                         for i in range(args.clients)]
                window, client_pids, collect = start_clients(args, ctx, plans)
                if args.watch_open == "during":
                    watch.open(window[0] + WATCH_OPEN_INTO_WINDOW_S)
                pids = {"daemon": [daemon.pid], "clients": client_pids,
                        "watchers": [watch.pid] if watch.pid else [], "worker": [worker_pid],
                        "this script": [os.getpid()]}
                cores, rss_max, threads_max = measure(pids, window, daemon.pid, perf)
                results: List[clients.ClientResult] = collect()
                if args.watch_open == "during":
                    watch.opened(args.open_timeout)  # its count is in the result
                watched: clients.WatchResult = watch.stop()
            finally:
                watch.close()
            hwm = d.status_kb(daemon.pid, "VmHWM") / 1024
            d.check_still_queued(stub, pb, running_id, ids)
            d.resume_worker(worker_pid)  # so that it can stop with the daemon
            worker_pid = 0
    finally:
        if worker_pid:
            d.resume_worker(worker_pid)
        shutil.rmtree(data, ignore_errors=True)

    merged = report.merge([r.latencies_ms for r in results])
    kinds = {k: report.kind_figures(merged[k], args.duration) for k in clients.KINDS}
    all_calls = array("d")
    for k in clients.KINDS:
        all_calls.extend(merged[k])
    failures = [f for r in results for f in r.failures] + watched.failures
    return report.RunFigures(
        watchers=watchers, watchers_open_at_end=watched.open_at_end, queued=args.queued,
        clients=args.clients, api=args.api, concurrency=args.concurrency,
        duration_s=args.duration, kinds=kinds, total=report.kind_figures(all_calls, args.duration),
        failures=failures, rss_started_mb=rss_started, rss_idle_mb=rss_idle,
        rss_load_max_mb=rss_max, hwm_mb=hwm, threads_idle=threads_idle,
        threads_load_max=threads_max, cpu_cores=cores, watchers_from=args.watchers_from,
        watch_open=args.watch_open,
        first_event=(report.first_event_figures(watched.first_event_ms, watched.start_all_s,
                                                watched.first_all_s) if watchers else None),
        load_average=load_average)


def main() -> None:
    args = parse_args()
    parse_mix(args.mix)
    if args.watchers_from == "cpp" or args.api == "cpp":
        loadgen = args.loadgen or os.path.join(args.bin, "benchd_loadgen")
        if not os.access(loadgen, os.X_OK):
            sys.exit(f"no benchd_loadgen at {loadgen!r} (needed by --api cpp and --watchers-from "
                     "cpp): build it (cmake --build build --target benchd_loadgen) and pass "
                     "--loadgen, or use --api aio --watchers-from py")
    stub_dir = d.stub_dir(args.stubs)
    load_before = f"{os.getloadavg()[0]:.1f}"
    cores = len(os.sched_getaffinity(0))
    runs = []
    for i, watchers in enumerate(args.watchers):
        perf = None
        if args.perf and i == 0:
            perf = (args.perf + ".data", args.perf)
        run = run_once(args, watchers, stub_dir, perf)
        report.print_run(run)
        runs.append(run)
    print(f"\nbenchd under load: {args.queued:,} jobs queued, {args.clients} {args.api} client "
          f"processes x {args.concurrency} calls in flight, mix {args.mix}, watchers from "
          f"{args.watchers_from} over {args.watch_channels} connections (opened {args.watch_open} "
          "the window), "
          f"{args.duration:.0f} s per run, {cores} cores (this process's affinity) shared by "
          "daemon and clients"
          + (f", daemon env {' '.join(args.daemon_env)}" if args.daemon_env else "")
          + f"; load average before {load_before}, after {os.getloadavg()[0]:.1f}")
    report.print_table(runs, cores)
    report.print_noise(runs, cores)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "cores": cores, "runs": [dataclasses.asdict(r)
                                                                    for r in runs]}, f, indent=1)
    bad = report.failed_any(runs)
    if bad:
        sys.exit(f"FAILED: {bad}")


if __name__ == "__main__":
    main()
