#!/usr/bin/env python3
"""The same collective sweep through benchd and through torch.distributed, side by side.

benchd's side: `benchctl submit collective` (a resident group when --group is
given, else devices + backend), its Job read back with `benchctl get --json` —
its rows carry the median of the slowest rank per iteration. The reference:
torch.multiprocessing.spawn, one process per device,
dist.init_process_group(backend) on a TCP store, then per size the same
warm-up and measured iterations, each timed on every rank exactly as the
benchd worker does (CUDA events around the op + wait on the current stream,
launched back to back, one synchronize per size; host clock on CPUs), the
slowest rank per iteration (all_gather of the times), median, and nccl-tests'
bandwidths. Sizes follow nccl-tests: the whole buffer.

  python3 bench/collective_compare.py --benchctl build/bin/benchctl --address HOST:PORT \\
      --devices cuda:0,cuda:1 --backend nccl --op all_reduce --min 1MiB --max 1GiB \\
      --warmup 5 --iters 20 [--group g1] [--json out.json]

Gloo on CPUs: --devices cpu:0,cpu:1 --backend gloo (the daemon needs cpu:N workers).
Prints one table: size, benchd median/busbw, torch.distributed median/busbw,
busbw ratio (benchd / torch) and latency ratio (benchd / torch median).

Ranks on several nodes (scripts/gpu-cross-node.sh): each rank is started on its
own node, in its own environment, with --rank R --store HOST:PORT --torch-out FILE
(rank 0's store listens on HOST; rank 0 writes the rows to FILE; benchd is not
called); then --compare-job JOB.json --torch-rows FILE prints the table for a
benchd Job already run (`benchctl ... --json`) against those rows.
"""
import argparse
import json
import os
import socket
import statistics
import sys

from benchd_cli import SUCCEEDED, Benchctl, BenchctlError

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "int32": 4}


def parse_size(text):
    t = text.replace(" ", "").lower()
    units = [("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10), ("gb", 10**9), ("mb", 10**6),
             ("kb", 10**3), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10), ("b", 1)]
    for suffix, scale in units:
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * scale)
    return int(t)


def sweep(min_bytes, max_bytes, factor):
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def busbw_factor(op, n):
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def shape(op, size_bytes, elem, world):
    """(input count, output count, size as run) — common/collective_math.cc ShapeFor."""
    total = max(1, size_bytes // elem)
    per_rank = max(1, total // world)
    if op == "all_gather":
        return per_rank, per_rank * world, per_rank * world * elem
    if op == "reduce_scatter":
        return per_rank * world, per_rank, per_rank * world * elem
    if op == "all_to_all":
        return per_rank * world, per_rank * world, per_rank * world * elem
    return total, total, total * elem


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, args, port, queue, store_host="127.0.0.1"):
    """One rank's sweep; rank 0's rows go to `queue` (or are returned when None)."""
    import torch
    import torch.distributed as dist
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
             "fp64": torch.float64, "int32": torch.int32}[args.dtype]
    cuda = args.devices[0].startswith("cuda")
    if cuda:
        index = int(args.devices[rank].split(":")[1])
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    store = dist.TCPStore(store_host, port, world, rank == 0)
    kwargs = {"device_id": device} if (cuda and args.backend == "nccl") else {}
    dist.init_process_group(args.backend, store=store, rank=rank, world_size=world, **kwargs)
    # The first collective creates NCCL's communicator (benchd does it when the group is made).
    one = torch.ones(1, device=device)
    dist.all_reduce(one)
    if cuda:
        torch.cuda.synchronize()
    elem = DTYPES[args.dtype]
    rows = []
    for size in args.sizes:
        cin, cout, size_run = shape(args.op, size, elem, world)
        if args.op in ("all_reduce", "broadcast"):
            inp = out = torch.zeros(cin, dtype=dtype, device=device)
        elif args.op == "all_gather":
            out = torch.zeros(cout, dtype=dtype, device=device)
            inp = out.narrow(0, rank * cin, cin) if args.in_place else torch.zeros(cin, dtype=dtype, device=device)
        elif args.op == "reduce_scatter":
            inp = torch.zeros(cin, dtype=dtype, device=device)
            out = inp.narrow(0, rank * cout, cout) if args.in_place else torch.zeros(cout, dtype=dtype, device=device)
        else:
            inp = torch.zeros(cin, dtype=dtype, device=device)
            out = torch.zeros(cout, dtype=dtype, device=device)

        def launch():
            if args.op == "all_reduce":
                dist.all_reduce(out)
            elif args.op == "broadcast":
                dist.broadcast(out, 0)
            elif args.op == "all_gather":
                dist.all_gather_into_tensor(out, inp)
            elif args.op == "reduce_scatter":
                dist.reduce_scatter_tensor(out, inp)
            else:
                dist.all_to_all_single(out, inp)

        dist.barrier()
        times = []
        if cuda:
            for _ in range(args.warmup):
                launch()
            torch.cuda.synchronize()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
            for i in range(args.iters):
                starts[i].record()
                launch()
                ends[i].record()
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]
        else:
            import time
            for i in range(args.warmup + args.iters):
                t0 = time.perf_counter()
                launch()
                t1 = time.perf_counter()
                if i >= args.warmup:
                    times.append(t1 - t0)
        t = torch.tensor(times, dtype=torch.float64, device=device)
        gathered = [torch.zeros_like(t) for _ in range(world)]
        dist.all_gather(gathered, t)
        if rank == 0:
            slowest = torch.stack(gathered).max(0).values.tolist()
            median = statistics.median(slowest)
            algbw = size_run / median / 1e9
            rows.append({"size_bytes": size_run, "median_s": median, "algbw_gbps": algbw,
                         "busbw_gbps": algbw * busbw_factor(args.op, world)})
    dist.destroy_process_group()
    if rank == 0 and queue is not None:
        queue.put(rows)
    return rows


def run_torch(args):
    import torch.multiprocessing as mp
    world = len(args.devices)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_rank_main, args=(world, args, free_port(), queue), nprocs=world, join=True,
                       start_method="spawn")
    return queue.get()


def run_benchd(args):
    """benchd's rows (as run_torch's, plus wrong elements) and its finished Job."""
    flags = ["--op", args.op, "--dtype", args.dtype, "--sizes", ",".join(str(s) for s in args.sizes),
             "--warmup", args.warmup, "--iters", args.iters]
    if args.group:
        flags += ["--group", args.group]
    else:
        flags += ["--devices", ",".join(args.devices), "--backend", args.backend]
    if args.in_place:
        flags.append("--in-place")
    job = Benchctl(args.benchctl, address=args.address, timeout=args.timeout).run_job("collective", *flags)
    return benchd_rows(job), job


def benchd_rows(job):
    """A finished collective Job's rows, as run_torch's plus wrong elements."""
    if job["state"] != SUCCEEDED:
        sys.exit(f"collective_compare: benchd's collective job {job['id']} {job['state']}: "
                 f"{job.get('errorMessage', '')}")
    return [{"size_bytes": int(row["sizeBytes"]), "median_s": row["duration"]["median"],
             "algbw_gbps": row.get("algbwGbps", 0.0), "busbw_gbps": row.get("busbwGbps", 0.0),
             "wrong": int(row.get("wrongElements", 0))}
            for row in job["result"]["collective"].get("rows", [])]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build/bin/benchctl")
    p.add_argument("--address", default=os.environ.get("BENCHD_ADDRESS", "127.0.0.1:7531"))
    p.add_argument("--devices", required=True)
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("--group", default="", help="run benchd's side on this resident group (same devices)")
    p.add_argument("--op", default="all_reduce", choices=OPS)
    p.add_argument("--dtype", default="fp32", choices=list(DTYPES))
    p.add_argument("--min", default="1MiB")
    p.add_argument("--max", default="")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--in-place", action="store_true")
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--json", default="", help="write both sides' rows here")
    p.add_argument("--rank", type=int, default=-1,
                   help="run this one torch.distributed rank here (ranks on several nodes)")
    p.add_argument("--store", default="", help="with --rank: rank 0's TCPStore, HOST:PORT")
    p.add_argument("--torch-out", default="", help="with --rank 0: write the rows here")
    p.add_argument("--compare-job", default="", help="a finished benchd collective Job (JSON)")
    p.add_argument("--torch-rows", default="", help="with --compare-job: --torch-out's file")
    args = p.parse_args()
    args.devices = args.devices.split(",")
    args.sizes = sweep(parse_size(args.min), parse_size(args.max or args.min), args.factor)

    if args.rank >= 0:
        host, port = args.store.rsplit(":", 1)
        rows = _rank_main(args.rank, len(args.devices), args, int(port), None, host)
        if args.rank == 0:
            with open(args.torch_out, "w") as f:
                json.dump({"rows": rows}, f, indent=1)
        return
    if args.compare_job:
        with open(args.compare_job) as f:
            job = json.load(f)
        with open(args.torch_rows) as f:
            torch_rows = json.load(f)["rows"]
        return print_table(args, benchd_rows(job), torch_rows, job)
    try:
        rows, job = run_benchd(args)
    except BenchctlError as e:
        sys.exit(f"collective_compare: {e}")
    print_table(args, rows, run_torch(args), job)


def print_table(args, benchd_rows, torch_rows, job):
    """benchd's and torch.distributed's rows side by side, with the ratios (--json: saved)."""
    by_size = {r["size_bytes"]: r for r in torch_rows}
    world = len(args.devices)
    print(f"{args.op} {args.dtype}, {args.backend} on {','.join(args.devices)} ({world} ranks), "
          f"{args.warmup} warm-up + {args.iters} iterations, median of the slowest rank")
    hdr = f"{'size':>10} {'benchd µs':>12} {'torch µs':>12} {'benchd busbw':>13} {'torch busbw':>12} " \
          f"{'busbw ratio':>12} {'time ratio':>11} {'wrong':>6}"
    print(hdr)
    out = []
    for b in benchd_rows:
        t = by_size.get(b["size_bytes"])
        if t is None:
            continue
        ratio = b["busbw_gbps"] / t["busbw_gbps"] if t["busbw_gbps"] else float("nan")
        tratio = b["median_s"] / t["median_s"] if t["median_s"] else float("nan")
        print(f"{b['size_bytes']:>10} {b['median_s'] * 1e6:>12.1f} {t['median_s'] * 1e6:>12.1f} "
              f"{b['busbw_gbps']:>13.2f} {t['busbw_gbps']:>12.2f} {ratio:>12.3f} {tratio:>11.3f} {b['wrong']:>6}")
        out.append({"size_bytes": b["size_bytes"], "benchd": b, "torch": t, "busbw_ratio": ratio,
                    "time_ratio": tratio})
    if job:
        for g in job.get("result", {}).get("collective", {}).get("groups", []):
            print(f"benchd group {g.get('group')}: "
                  + ("resident, no set-up" if g.get("wasResident") else f"set up in {g.get('setupSeconds', 0):.3f} s"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"op": args.op, "backend": args.backend, "devices": args.devices, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
