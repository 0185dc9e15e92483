"""Figures of one load run and the table that sets runs beside the targets."""
from array import array
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from clients import KINDS

TARGET_CALLS_PER_S = 10000
TARGET_P99_MS = 20.0
TARGET_RSS_MB = 300.0
# Issue 36: every Watch stream's first event within 100 ms at p99 (1,000 watchers).
TARGET_FIRST_EVENT_P99_MS = 100.0


@dataclass
class KindFigures:
    calls: int
    per_s: float
    p50_ms: float
    p99_ms: float


@dataclass
class FirstEventFigures:
    """Time from a Watch stream's start to its first event (the job's `queued`
    event: its history), over the streams that had one."""
    streams: int
    start_all_s: float  # from the first stream's start to the last one's
    first_all_s: float  # from the first stream's start to the last first event
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


def first_event_figures(latencies: array, start_all_s: float,
                        first_all_s: float) -> FirstEventFigures:
    values = sorted(latencies)
    return FirstEventFigures(len(values), start_all_s, first_all_s,
                             percentile(values, 50), percentile(values, 90),
                             percentile(values, 99), values[-1] if values else float("nan"))


@dataclass
class RunFigures:
    watchers: int
    watchers_open_at_end: int
    queued: int
    clients: int
    api: str
    concurrency: int
    duration_s: float
    kinds: Dict[str, KindFigures]
    total: KindFigures
    failures: List[str]
    rss_started_mb: float  # worker up, nothing queued
    rss_idle_mb: float  # queue filled, watchers open, no unary load
    rss_load_max_mb: float  # the highest VmRSS sampled during the window
    hwm_mb: float  # VmHWM at the end
    threads_idle: int
    threads_load_max: int
    cpu_cores: Dict[str, float] = field(default_factory=dict)  # daemon, clients, watchers, ...
    watchers_from: str = "py"  # "cpp" (benchd_loadgen --watchers) or "py" (grpc.aio)
    watch_open: str = "before"  # streams opened "before" the unary window or "during" it
    first_event: Optional[FirstEventFigures] = None  # None without watchers
    load_average: float = float("nan")  # 1-minute, just before this run


def percentile(sorted_values: List[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(round(q / 100.0 * len(sorted_values) + 0.5)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def kind_figures(latencies: array, duration_s: float) -> KindFigures:
    values = sorted(latencies)
    return KindFigures(len(values), len(values) / duration_s, percentile(values, 50),
                       percentile(values, 99))


def merge(per_client: List[Dict[str, array]]) -> Dict[str, array]:
    merged = {k: array("d") for k in KINDS}
    for lat in per_client:
        for k in KINDS:
            merged[k].extend(lat[k])
    return merged


def us_per_call(run: RunFigures, who: str) -> float:
    """CPU microseconds `who` (daemon, clients) spent per unary call."""
    calls = run.total.calls
    return run.cpu_cores[who] * run.duration_s / calls * 1e6 if calls else float("nan")


def daemon_us_per_call(run: RunFigures) -> float:
    return us_per_call(run, "daemon")


def print_run(run: RunFigures) -> None:
    print(f"\n## {run.watchers} watchers, {run.queued} queued, {run.clients} x {run.api} "
          f"clients x {run.concurrency} in flight, {run.duration_s:.0f} s")
    print("| call | calls | calls/s | p50 ms | p99 ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, f in list(run.kinds.items()) + [("all", run.total)]:
        print(f"| {name} | {f.calls:,} | {f.per_s:,.0f} | {f.p50_ms:.2f} | {f.p99_ms:.2f} |")
    print("CPU (cores busy over the window): " +
          ", ".join(f"{k} {v:.2f}" for k, v in run.cpu_cores.items()))
    print(f"CPU per unary call: daemon {daemon_us_per_call(run):.0f} us, clients "
          f"{us_per_call(run, 'clients'):.0f} us; daemon threads idle "
          f"{run.threads_idle}, under load up to {run.threads_load_max}")
    if run.first_event is not None:
        fe = run.first_event
        print(f"Watch first event ({run.watchers_from} watchers, opened {run.watch_open} the "
              f"unary window): {fe.streams:,} of {run.watchers:,} streams, p50 {fe.p50_ms:.1f}, "
              f"p90 {fe.p90_ms:.1f}, p99 {fe.p99_ms:.1f}, max {fe.max_ms:.1f} ms; all started "
              f"in {fe.start_all_s * 1e3:.0f} ms, all first events in {fe.first_all_s * 1e3:.0f} "
              f"ms; {run.watchers_open_at_end:,} open at the end")
    print(f"failed calls: {len(run.failures)}")
    for f in run.failures:
        print(f"  FAILED {f}")


def mark(ok: bool) -> str:
    return "" if ok else " ✗"


def row(label: str, values: List[str], target: str) -> str:
    return f"| {label} | " + " | ".join(values) + f" | {target} |"


def print_table(runs: List[RunFigures], cores: int) -> None:
    """The runs side by side with the issue's targets (✗: target missed)."""
    print("\n| figure | " + " | ".join(f"{r.watchers:,} watchers" for r in runs) + " | target |")
    print("| --- | " + " | ".join("---:" for _ in runs) + " | --- |")
    print(row("unary calls/s, all", [f"{r.total.per_s:,.0f}{mark(r.total.per_s >= TARGET_CALLS_PER_S)}"
                                     for r in runs], f"≥ {TARGET_CALLS_PER_S:,}"))
    for k in KINDS:
        print(row(f"{k} calls/s", [f"{r.kinds[k].per_s:,.0f}" for r in runs], ""))
    print(row("p99 ms, all", [f"{r.total.p99_ms:.1f}{mark(r.total.p99_ms < TARGET_P99_MS)}"
                              for r in runs], f"< {TARGET_P99_MS:.0f}"))
    for k in KINDS:
        print(row(f"{k} p50 / p99 ms", [
            f"{r.kinds[k].p50_ms:.2f} / {r.kinds[k].p99_ms:.2f}"
            f"{mark(r.kinds[k].p99_ms < TARGET_P99_MS)}" for r in runs], f"p99 < {TARGET_P99_MS:.0f}"))
    print(row("failed calls", [f"{len(r.failures)}{mark(not r.failures)}" for r in runs], "0"))
    print(row("Watch streams open at the end", [f"{r.watchers_open_at_end:,} of {r.watchers:,}"
                                                for r in runs], "all"))
    if any(r.first_event is not None for r in runs):
        with_fe = [r.first_event for r in runs]  # None ("–") for a run without watchers
        print(row("Watch streams with a first event", [
            f"{f.streams:,} of {r.watchers:,}{mark(f.streams == r.watchers)}" if f else "–"
            for r, f in zip(runs, with_fe)], "all"))
        print(row("Watch first event p50 / p90 ms", [
            f"{f.p50_ms:.1f} / {f.p90_ms:.1f}" if f else "–" for f in with_fe], ""))
        print(row("Watch first event p99 ms", [
            f"{f.p99_ms:.1f}{mark(f.p99_ms <= TARGET_FIRST_EVENT_P99_MS)}" if f else "–"
            for f in with_fe], f"≤ {TARGET_FIRST_EVENT_P99_MS:.0f}"))
        print(row("Watch first event max ms", [f"{f.max_ms:.1f}" if f else "–" for f in with_fe],
                  ""))
    print(row("daemon RSS, worker up, empty queue (MB)", [f"{r.rss_started_mb:.0f}" for r in runs], ""))
    print(row("daemon RSS idle: queue + watchers (MB)",
              [f"{r.rss_idle_mb:.0f}{mark(r.rss_idle_mb < TARGET_RSS_MB)}" for r in runs],
              f"< {TARGET_RSS_MB:.0f}"))
    print(row("daemon RSS under load, max (MB)",
              [f"{r.rss_load_max_mb:.0f}{mark(r.rss_load_max_mb < TARGET_RSS_MB)}" for r in runs],
              f"< {TARGET_RSS_MB:.0f}"))
    print(row("daemon threads idle / under load", [f"{r.threads_idle} / {r.threads_load_max}"
                                                   for r in runs], ""))
    for name in runs[0].cpu_cores:
        print(row(f"CPU {name} (cores of {cores})", [f"{r.cpu_cores[name]:.2f}" for r in runs], ""))
    print(row("daemon CPU per unary call (us)", [f"{daemon_us_per_call(r):.0f}" for r in runs], ""))
    print(row("clients' CPU per unary call (us)", [f"{us_per_call(r, 'clients'):.0f}" for r in runs], ""))
    print(row(f"calls/s if the daemon had all {cores} cores", [
        f"{cores / daemon_us_per_call(r) * 1e6:,.0f}" for r in runs], f"≥ {TARGET_CALLS_PER_S:,}"))


def print_noise(runs: List[RunFigures], cores: int) -> None:
    """Say so when other processes took a share of the machine during a window."""
    for r in runs:
        other = r.cpu_cores.get("other processes", 0.0)
        if other > 0.1:
            print(f"NOTE: at {r.watchers} watchers other processes used {other:.2f} of the "
                  f"{cores} cores during the window: calls/s and latency are lower bounds")


def failed_any(runs: List[RunFigures]) -> Optional[str]:
    bad = [r for r in runs if r.failures or r.watchers_open_at_end != r.watchers
           or (r.first_event is not None and r.first_event.streams != r.watchers)]
    if not bad:
        return None
    return ", ".join(f"{r.watchers} watchers: {len(r.failures)} failed calls, "
                     f"{r.first_event.streams if r.first_event else 0} of {r.watchers} streams "
                     f"had a first event, {r.watchers_open_at_end} of {r.watchers} open at the end"
                     for r in bad)
