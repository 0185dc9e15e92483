#!/usr/bin/env python3
"""ListJobs at scale: the same pages timed against a real daemon whose store
holds N_SMALL jobs, then N_LARGE jobs (default 1,000 and 100,000), for every
filter. A page read through an index costs the same at any size, so each
ratio (large / small) should be near 1; a full scan or a sort would grow
with the store (~100x).

    python3 bench/list_jobs.py --bin build/bin [--small 1000] [--large 100000]

The jobs are copies of one real finished job, written into the daemon's
SQLite store while it is stopped (submitting 100,000 jobs would run them),
spread over states, kinds and two devices as the filters need.
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

from benchd_harness import Daemon, stubs


def daemon(bin_dir, data_dir):
    """benchd serving cpu:0 and cpu:1 from data_dir, no /metrics (a context manager)."""
    return Daemon(data_dir, devices=["cpu:0", "cpu:1"], metrics="off", bin_dir=bin_dir)


def fill(db_path, n, template, kinds):
    """n copies of `template` (a serialized Job) as ids 1..n: every 3rd job
    failed, kinds in turn, devices alternating, every 7th on both."""
    db = sqlite3.connect(db_path)
    db.execute("DELETE FROM jobs")
    db.execute("DELETE FROM job_devices")
    jobs, devices = [], []
    for i in range(1, n + 1):
        state = 4 if i % 3 == 0 else 3  # JOB_STATE_FAILED, JOB_STATE_SUCCEEDED
        kind = kinds[i % len(kinds)]
        devs = ["cpu:0", "cpu:1"] if i % 7 == 0 else [f"cpu:{i % 2}"]
        jobs.append((i, kind, ",".join(devs), state, 0, template))
        devices += [(d, i) for d in devs]
    db.executemany("INSERT INTO jobs (id, kind, device, state, created_unix_ms, job) "
                   "VALUES (?, ?, ?, ?, ?, ?)", jobs)
    db.executemany("INSERT INTO job_devices (device, job_id) VALUES (?, ?)", devices)
    db.commit()
    db.close()


def time_pages(stub, pb, request, repeats):
    """Median and spread (min, max) of one ListJobs call in ms, after 3 warm-up calls."""
    for _ in range(3):
        stub.ListJobs(request, timeout=30)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        page = stub.ListJobs(request, timeout=30)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times), max(times), len(page.jobs)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "bin"))
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=100000)
    ap.add_argument("--page-size", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    pb, _ = stubs()

    data = tempfile.mkdtemp(prefix="benchd-listbench-")
    try:
        # One real job, run by the daemon, is the template every row copies.
        with daemon(args.bin, data) as d:
            stub = d.stub
            spec = pb.JobSpec(device="cpu:0", benchmark=pb.BenchmarkSpec(
                model=pb.ModelConfig(preset="tiny"), batch_size=1, context_length=8,
                warmup_steps=0, measure_steps=1))
            job = stub.Submit(pb.SubmitRequest(spec=spec), timeout=30)
            for _ in range(1200):
                job = stub.GetJob(pb.GetJobRequest(job_id=job.id), timeout=30)
                if job.state == pb.JOB_STATE_SUCCEEDED:
                    break
                time.sleep(0.1)
            else:
                sys.exit(f"the template job did not succeed: {job.error_message}")
        template = job.SerializeToString()
        filters = {
            "none": {},
            "state=failed": {"state": pb.JOB_STATE_FAILED},
            "kind=profile": {"kind": pb.JOB_KIND_PROFILE},
            "kind+state": {"kind": pb.JOB_KIND_PROFILE, "state": pb.JOB_STATE_FAILED},
            "device=cpu:1": {"device": "cpu:1"},
            "device+state": {"device": "cpu:1", "state": pb.JOB_STATE_FAILED},
        }
        results = {}
        for n in (args.small, args.large):
            fill(os.path.join(data, "benchd.sqlite3"), n, template,
                 ["benchmark", "profile", "memory", "collective"])
            with daemon(args.bin, data) as d:
                stub = d.stub
                for name, f in filters.items():
                    first = stub.ListJobs(pb.ListJobsRequest(page_size=args.page_size, **f), timeout=30)
                    # The first page, and a page from the middle of the store.
                    middle = pb.ListJobsRequest(page_size=args.page_size, **f)
                    token = first.next_page_token
                    for _ in range(1):
                        page = stub.ListJobs(pb.ListJobsRequest(page_size=args.page_size,
                                                                page_token=token, **f), timeout=30)
                        token = page.next_page_token
                    middle.page_token = token
                    results[(n, name, "first")] = time_pages(
                        stub, pb, pb.ListJobsRequest(page_size=args.page_size, **f), args.repeats)
                    results[(n, name, "page 3")] = time_pages(stub, pb, middle, args.repeats)
    finally:
        shutil.rmtree(data, ignore_errors=True)

    print(f"ListJobs, page_size {args.page_size}, median of {args.repeats} calls "
          f"(min-max), ms; one daemon, CPU workers, loopback gRPC")
    print()
    print(f"| filter | page | {args.small:,} jobs | {args.large:,} jobs | ratio | rows |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in filters:
        for which in ("first", "page 3"):
            s = results[(args.small, name, which)]
            l = results[(args.large, name, which)]
            print(f"| {name} | {which} | {s[0]:.2f} ({s[1]:.2f}-{s[2]:.2f}) | "
                  f"{l[0]:.2f} ({l[1]:.2f}-{l[2]:.2f}) | {l[0] / s[0]:.2f} | {s[3]}, {l[3]} |")


if __name__ == "__main__":
    main()
