#!/usr/bin/env python3
"""benchd's data-parallel training against PyTorch's, side by side on the same GPUs.

The peer a user would pick: the course's model (bench/reference/cs336_lm.py)
under torch.nn.parallel.DistributedDataParallel (its defaults: 25 MB buckets,
gradients all-reduced during the backward) with torch.optim.AdamW (its
default foreach path), the same with ZeroRedundancyOptimizer(AdamW)
(ZeRO-1), and DDP with its bf16_compress_hook (gradients all-reduced as
bfloat16: the peer of benchd's --gradient-compressions bf16 rows). One process per GPU (torch.multiprocessing), NCCL, the same
model, precision, per-rank batch, context and steps as benchd's job; each
step timed with CUDA events around the synchronized step on every rank, a
step as long as its slowest rank (all_reduce MAX), warm-up steps dropped.

Then benchd runs the same training as one `ddp` job on a transient NCCL
group of the same GPUs (every variant, the bucket sizes, both optimizers),
and the table prints every run's median step, spread, exposed
communication, memory, and the ratio to PyTorch DDP's median step (below
1.0: benchd is faster). The peer's processes have exited before benchd's
job starts, so neither crowds the other's memory.

  bench/ddp_compare.py --benchctl build-gpu/bin/benchctl --devices cuda:0,cuda:1 \
      --preset xl --precision fp32 --context-length 128 --global-batch 8
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchd_cli import SUCCEEDED, Benchctl
from compare import PRESETS  # the presets' sizes, as common/model_config.cc
from reference import cs336_lm as ref

DTYPES = {"fp32": None, "bf16": torch.bfloat16}


PEERS = {"ddp": "PyTorch DDP (25 MB) + AdamW", "zero": "PyTorch DDP + ZeRO-1 AdamW",
         "ddp_bf16": "PyTorch DDP + bf16_compress_hook"}


def peer_rank(rank, world, args, kind, port, out):
    """One rank of the peer `kind` (PEERS) on cuda:rank; rank 0 writes the figures."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    V, d, dff, L, H = PRESETS[args.preset]
    torch.manual_seed(0)
    model = ref.TransformerLM(V, args.context_length, d, L, H, dff).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    if kind == "ddp_bf16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if kind == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    per_rank = args.global_batch // world
    g = torch.Generator().manual_seed(1000 + rank)
    tokens = torch.randint(0, V, (per_rank, args.context_length + 1), generator=g).to(dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    dtype = DTYPES[args.precision]
    torch.cuda.reset_peak_memory_stats(dev)
    seconds = []
    for s in range(args.warmup_steps + args.steps):
        opt.zero_grad(set_to_none=True)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = ref.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        end.record()
        torch.cuda.synchronize(dev)
        t = torch.tensor([start.elapsed_time(end) / 1e3], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's step
        if s >= args.warmup_steps:
            seconds.append(t.item())
    peak = torch.tensor([torch.cuda.max_memory_allocated(dev)], device=dev, dtype=torch.int64)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"seconds": seconds, "peak": peak.item(), "loss": loss.item()}, f)
    dist.barrier()
    dist.destroy_process_group()


def run_peer(args, world, kind):
    index = list(PEERS).index(kind)
    out = f"/tmp/ddp-peer-{os.getpid()}-{index}.json"
    port = 29500 + (os.getpid() % 1000) + 7 * index
    mp.spawn(peer_rank, args=(world, args, kind, port, out), nprocs=world, join=True)
    with open(out) as f:
        r = json.load(f)
    os.remove(out)
    return r


def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchctl", default="build-gpu/bin/benchctl")
    p.add_argument("--devices", default="cuda:0,cuda:1")
    p.add_argument("--preset", default="xl", choices=sorted(PRESETS))
    p.add_argument("--precision", default="fp32", choices=sorted(DTYPES))
    p.add_argument("--context-length", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--bucket-mb", default="1,10,25,100,1000")
    p.add_argument("--variants", default="naive,flat,overlap,bucketed")
    p.add_argument("--optimizers", default="adamw,sharded_adamw")
    p.add_argument("--gradient-compressions", default="none",
                   help="benchd's --gradient-compressions: none, bf16 or both (none,bf16)")
    p.add_argument("--optimizer-impl", default="faithful", choices=["faithful", "foreach", "fused"],
                   help="how benchd's AdamW (or a rank's shard) steps; the peer's torch.optim.AdamW "
                        "takes its default (foreach) either way")
    p.add_argument("--autograd", action="store_true",
                   help="benchd's runs through the autograd engine (its hooks say when a gradient "
                        "is final); add reducer to --variants for c10d's Reducer beside them")
    p.add_argument("--peers", default="ddp,zero",
                   help="which peers to run first: ddp (DistributedDataParallel + AdamW), zero "
                        "(+ ZeroRedundancyOptimizer), ddp_bf16 (DDP + bf16_compress_hook), "
                        "a list (default ddp,zero) or none")
    p.add_argument("--json-out", help="write both sides' figures here")
    args = p.parse_args()
    devices = args.devices.split(",")
    world = len(devices)
    if devices != [f"cuda:{i}" for i in range(world)]:
        sys.exit("ddp_compare: --devices must be cuda:0..cuda:N-1 (the peer's ranks use those)")

    name = torch.cuda.get_device_name(0)
    print(f"# {args.preset} {args.precision}, context {args.context_length}, global batch "
          f"{args.global_batch} on {world} x {name}; benchd's AdamW {args.optimizer_impl}; "
          f"{args.warmup_steps} warm-up + {args.steps} "
          f"measured steps; torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    peer = {}
    wanted = {x for x in args.peers.split(",") if x and x != "none"}
    if wanted - set(PEERS):
        sys.exit(f"ddp_compare: --peers: expected {', '.join(PEERS)} or none, got {args.peers}")
    for kind in PEERS:
        if kind not in wanted:
            continue
        t0 = time.time()
        peer[kind] = run_peer(args, world, kind)
        print(f"# peer {PEERS[kind]}: {time.time() - t0:.0f} s")

    cli = Benchctl(args.benchctl, timeout=3600)
    job = cli.run_job("ddp", "--devices", args.devices, "--preset", args.preset,
                      "--precision", args.precision, "--context-length", args.context_length,
                      "--global-batch", args.global_batch, "--warmup-steps", args.warmup_steps,
                      "--steps", args.steps, "--variants", args.variants,
                      # Bucket sizes only where a variant takes them (benchctl refuses them else).
                      *(["--bucket-mb", args.bucket_mb]
                        if {"bucketed", "reducer"} & set(args.variants.split(",")) else []),
                      "--optimizers", args.optimizers,
                      "--gradient-compressions", args.gradient_compressions,
                      "--optimizer-impl", args.optimizer_impl,
                      *(["--autograd"] if args.autograd else []))
    if job["state"] != SUCCEEDED:
        sys.exit(f"benchd's job {job['id']} {job['state']}: {job.get('errorMessage')}")
    r = job["result"]["ddp"]
    # Ratios against a peer that did not run are blank (nan).
    base = statistics.median(peer["ddp"]["seconds"]) if "ddp" in peer else float("nan")
    zbase = statistics.median(peer["zero"]["seconds"]) if "zero" in peer else float("nan")
    bbase = statistics.median(peer["ddp_bf16"]["seconds"]) if "ddp_bf16" in peer else float("nan")
    gib = 1 << 30
    print(f"# benchd job {job['id']}: {r.get('deviceName')}, {r.get('parameterCount')} parameters, "
          f"timer {r.get('timer')}; group {json.dumps(r.get('group'))}")
    header = (f"{'run':44} {'median ms':>10} {'spread':>7} {'exposed ms':>11} {'exposed %':>9} "
              f"{'pred ms':>8} {'hidden':>7} {'busy':>5} "
              f"{'calls':>6} {'peak GiB':>9} {'opt GiB':>8} {'agree':>6} {'loss':>9} "
              f"{'/ DDP':>7} {'/ ZeRO':>7} {'/ bf16':>7}")
    print(header)

    def line(label, med, sp, exposed, frac, pred, hidden, busy, calls, peak, opt, agree, loss):
        print(f"{label:44} {med * 1e3:10.2f} {sp:7.1%} {exposed:11} {frac:>9} {pred:>8} {hidden:>7} "
              f"{busy:>5} "
              f"{calls:>6} {peak / gib:9.2f} {opt:>8} {agree:>6} {loss:9.4f} {med / base:7.3f} "
              f"{med / zbase:7.3f} {med / bbase:7.3f}")

    def hidden(row):
        # The share of the profiled step's communication that ran under computation.
        t = [k.get("timeline", {}) for k in row.get("ranks", [])]
        comm = sum(x.get("commSeconds", 0) for x in t)
        return f"{sum(x.get('commOverlappedSeconds', 0) for x in t) / comm:.0%}" if comm else ""

    def busy(row):
        # The least busy rank's profiled step: the share of it with a kernel
        # running (compute or communication). Well under 100% with no
        # communication to wait for: the step waited for the host.
        shares = []
        for k in row.get("ranks", []):
            t = k.get("timeline", {})
            if t.get("stepSeconds"):
                union = (t.get("computeSeconds", 0) + t.get("commSeconds", 0)
                         - t.get("commOverlappedSeconds", 0))
                shares.append(union / t["stepSeconds"])
        return f"{min(shares):.0%}" if shares else ""

    for kind, label in PEERS.items():
        if kind not in peer:
            continue
        xs = peer[kind]["seconds"]
        line(label, statistics.median(xs), spread(xs), "", "", "", "", "", "", peer[kind]["peak"],
             "", "", peer[kind]["loss"])
    rows = [("compute only (no comm)", r["computeOnly"])] + [
        (run_label(row), row) for row in r.get("rows", [])]
    for label, row in rows:
        xs = row["stepSeconds"]
        pred = row.get("predictedExposedCommSeconds")
        line(label, statistics.median(xs), spread(xs), f"{row.get('exposedCommSeconds', 0) * 1e3:.2f}",
             f"{row.get('exposedCommFraction', 0):.1%}", "" if pred is None else f"{pred * 1e3:.2f}",
             hidden(row), busy(row), row.get("callsPerStep", 0),
             int(row.get("peakMemoryBytes", 0)), f"{int(row.get('optimizerStateBytes', 0)) / gib:.2f}",
             "-" if label.startswith("compute") else ("yes" if row.get("ranksAgree") else "NO"),
             row.get("loss", 0.0))
    m = r.get("overheadModel", {})
    if m.get("unavailable"):
        print(f"# overhead model: not made: {m['unavailable']}")
    elif m:
        print(f"# overhead model: all_reduce(s) = {m.get('perCallSeconds', 0) * 1e6:.1f} us + s / "
              f"{m.get('bandwidthBytesPerSecond', 0) / 1e9:.1f} GB/s over "
              f"{len(m.get('sweepBytes', []))} sizes; backward {m.get('backwardSeconds', 0) * 1e3:.2f} ms; "
              f"predicted best bucket {m.get('predictedBestBucketMb', 0):.3g} MB "
              f"(exposed {m.get('predictedBestExposedSeconds', 0) * 1e3:.2f} ms), measured best "
              f"{m.get('measuredBestBucketMb', 0):.3g} MB: ratio {m.get('bestBucketRatio', 0):.2f} "
              f"(target 0.5 .. 2)")
        for b, t in zip(m.get("sweepBytes", []), m.get("sweepSeconds", [])):
            fit = m.get("perCallSeconds", 0) + int(b) / m.get("bandwidthBytesPerSecond", 1)
            print(f"#   sweep {int(b):>11} B  {t * 1e6:10.1f} us  fit {fit * 1e6:10.1f} us")
    best = min(r.get("rows", []), key=lambda row: statistics.median(row["stepSeconds"]))
    # ZeRO-1's formula (the write-up's): fp32 parameters and gradients whole,
    # AdamW's two moments whole or 1/world; beside the optimizer step's peak.
    n = int(r.get("parameterCount", 0))
    print(f"# memory formula: unsharded {n * 16 / gib:.2f} GiB (4 + 4 + 8 bytes per parameter), "
          f"ZeRO-1 {n * (8 + 8 / world) / gib:.2f} GiB (4 + 4 + 8/{world})")
    for label, row in rows:
        bwd, opt = int(row.get("backwardPeakMemoryBytes", 0)), int(row.get("optimizerPeakMemoryBytes", 0))
        if "adamw_overlapped" in label:  # its optimizer steps inside the synchronisation
            opt = max(bwd, opt)
        formula = n * (8 + (8 / world if "sharded" in label else 8))
        print(f"#   {label:44} peak to the end of the backward {bwd / gib:6.2f} GiB, in the optimizer "
              f"step {opt / gib:6.2f} GiB ({opt / formula:.3f} x the formula)")
    print(f"# best benchd run: {run_label(best)}, {statistics.median(best['stepSeconds']) / base:.3f} x "
          f"PyTorch DDP's step (target <= 0.8)")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"peer": {kind: peer.get(kind) for kind in PEERS}, "benchd": job}, f)


def run_label(row):
    v = row.get("variant", "DDP_VARIANT_UNSPECIFIED").removeprefix("DDP_VARIANT_").lower()
    if v in ("bucketed", "reducer"):
        v += f" {row.get('bucketMb', 0):g} MB"
    optimizer = row.get("optimizer", "DDP_OPTIMIZER_ADAMW")
    if optimizer != "DDP_OPTIMIZER_ADAMW":
        v += " + " + optimizer.removeprefix("DDP_OPTIMIZER_").lower()
    compression = row.get("gradientCompression", "DDP_GRADIENT_COMPRESSION_NONE")
    if compression not in ("DDP_GRADIENT_COMPRESSION_NONE", "DDP_GRADIENT_COMPRESSION_UNSPECIFIED"):
        v += " + " + compression.removeprefix("DDP_GRADIENT_COMPRESSION_").lower() + " gradients"
    return v


if __name__ == "__main__":
    main()
