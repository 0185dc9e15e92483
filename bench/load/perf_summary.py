#!/usr/bin/env python3
"""Where the daemon's CPU went, from a `perf record --call-graph dwarf` of it:
the share of samples whose stack holds each frame of interest (inclusive,
so rows overlap), the share by thread, and the top leaf functions (self).

    python3 bench/load/perf_summary.py perf.data [--top 25]

load.py --perf FILE records the daemon during its first run and writes this
summary to FILE."""
import argparse
import collections
import re
import subprocess
import sys
from typing import Dict, Iterator, List, Tuple

# (label, regular expression over one frame's symbol); a sample counts once per
# row. A label "X | in Y" counts samples with a frame X (the regex before " @ ")
# and a frame Y (after it).
FRAMES: List[Tuple[str, str]] = [
    ("BenchService::GetJob (handler)", r"BenchService::GetJob\b"),
    ("BenchService::ListJobs (handler)", r"BenchService::ListJobs\b"),
    ("BenchService::GetNodeInfo (handler)", r"BenchService::GetNodeInfo\b"),
    ("  Store::Get", r"Store::Get\b"),
    ("  Store::List", r"Store::List\b"),
    ("  SQLite: sqlite3_prepare (the SQL text compiled per call)", r"sqlite3_prepare"),
    ("  SQLite: sqlite3_step", r"sqlite3_step"),
    ("  SQLite: sqlite3_finalize", r"sqlite3_finalize"),
    ("  Job proto parse (ParseFromString of the stored row)", r"Job::_InternalParse|MergeFromImpl"),
    ("  SummarizeJob (ListJobs)", r"SummarizeJob"),
    ("  proto copy (MergeFrom, CopyFrom, not parsing)", r"(?<!internal::)MergeFrom(?!Impl)|::MergeImpl|CopyFrom"),
    ("  proto destructors (~Job, ~JobSpec, ...)", r"~Job|~JobSpec|~RepeatedPtrField|ArenaStringPtr::Destroy"),
    ("  Supervisor::Devices / WorkerVersions (GetNodeInfo)", r"Supervisor::(Devices|WorkerVersions)"),
    ("  gethostname", r"gethostname|__uname"),
    ("  in ListJobs: sqlite3_prepare", r"sqlite3_prepare @ BenchService::ListJobs\b"),
    ("  in ListJobs: Job parse", r"Job::_InternalParse|MergeFromImpl @ BenchService::ListJobs\b"),
    ("  in ListJobs: proto destructors", r"~Job|~JobSpec|~RepeatedPtrField|ArenaStringPtr::Destroy"
     r" @ BenchService::ListJobs\b"),
    ("  in ListJobs: malloc/free", r"^(malloc|free|_int_malloc|_int_free|malloc_consolidate|"
     r"__GI___libc_malloc|__GI___libc_free|unlink_chunk) @ BenchService::ListJobs\b"),
    ("  in GetJob: sqlite3_prepare", r"sqlite3_prepare @ BenchService::GetJob\b"),
    ("  in GetJob: Job parse", r"Job::_InternalParse|MergeFromImpl @ BenchService::GetJob\b"),
    ("  in handlers: std::mutex waits (futex)", r"do_futex @ BenchService::"),
    ("Watch: WatchReactor / EventHub", r"WatchReactor|EventHub"),
    ("gRPC: response serialization + send batch (CallOpSet, sendmsg)", r"CallOpSet<grpc::internal::CallOpSendInitialMetadata"),
    ("gRPC: any sendmsg (TCP write)", r"__libc_sendmsg|__sys_sendmsg"),
    ("gRPC: any recvmsg (TCP read)", r"__libc_recvmsg|__sys_recvmsg"),
    ("gRPC: epoll_wait (polling)", r"epoll_wait"),
    ("gRPC: ExecCtx::Flush (core's closures)", r"ExecCtx::Flush"),
    ("gRPC: new call set-up (CallbackRequest::Run)", r"CallbackRequest<grpc::CallbackServerContext>::CallbackCallTag::Run"),
    ("absl::Mutex deadlock detection (GraphCycles)", r"GraphCycles"),
    ("absl::Mutex (all)", r"absl::\w+::Mutex::"),
    ("malloc/free (all)", r"^(malloc|free|_int_malloc|_int_free|malloc_consolidate|cfree|"
     r"__GI___libc_malloc|__GI___libc_free|operator new|operator delete|unlink_chunk)"),
    ("futex (lock waits, wake-ups)", r"do_futex|__x64_sys_futex"),
    ("scheduler (context switches)", r"^(schedule|__schedule)$"),
]


def samples(perf_data: str) -> Iterator[Tuple[str, List[str]]]:
    """(thread name, frames leaf first) for every sample in the file."""
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "comm,tid,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    for block in out.split("\n\n"):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        thread = lines[0].rsplit(None, 1)[0].strip()
        frames = []
        for line in lines[1:]:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(parts[1].rsplit(" (", 1)[0])
        yield thread, frames


def summarize(perf_data: str, top: int) -> str:
    compiled = [(label, [re.compile(part) for part in rx.split(" @ ")]) for label, rx in FRAMES]
    inclusive: Dict[str, int] = collections.Counter()
    threads: Dict[str, int] = collections.Counter()
    leaves: Dict[str, int] = collections.Counter()
    n = 0
    for thread, frames in samples(perf_data):
        n += 1
        threads[thread] += 1
        leaves[frames[0] if frames else "?"] += 1
        for label, parts in compiled:
            if all(any(rx.search(f) for f in frames) for rx in parts):
                inclusive[label] += 1
    if n == 0:
        return "no samples\n"
    lines = [f"{n} samples of the daemon (perf record -F 499 --call-graph dwarf)", "",
             "| inclusive: samples with this frame on the stack | % |", "| --- | ---: |"]
    lines += [f"| {label.strip() if not label.startswith('  ') else '… ' + label.strip()} | "
              f"{100.0 * inclusive[label] / n:.1f} |" for label, _ in FRAMES]
    lines += ["", "| thread | % |", "| --- | ---: |"]
    lines += [f"| {t} | {100.0 * c / n:.1f} |" for t, c in threads.most_common()]
    lines += ["", "| self (leaf function) | % |", "| --- | ---: |"]
    lines += [f"| {sym[:110]} | {100.0 * c / n:.1f} |" for sym, c in leaves.most_common(top)]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("perf_data")
    ap.add_argument("--top", type=int, default=25, help="leaf functions to list")
    args = ap.parse_args()
    sys.stdout.write(summarize(args.perf_data, args.top))


if __name__ == "__main__":
    main()
