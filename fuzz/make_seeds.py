#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ from real inputs.

  job_spec          JobSpecs as the integration tests and benchctl send them
                    (binary protos, through protoc --encode)
  job_id            ids and near-ids
  artifact_name     job id + name pairs (FuzzedDataProvider: "7\\/trace.json")
  profile_analysis  the unit tests' trees and, with --torch PYTHON, a real CPU
                    profile of a small model flattened as worker/profile_run.cc does
  memory_analysis   tests/fixtures/memory/snapshot.pickle (whole and cut) and
                    the unit test's snapshot

The record formats are documented in the fuzzers' files. Files other than
seed-* (reproducers of fixed defects, kept so they stay fixed) are left alone.
Run from anywhere: python3 fuzz/make_seeds.py [--torch .venv/bin/python]
"""
import argparse
import json
import os
import pickle
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def clear(target, keep_torch):
    d = os.path.join(CORPUS, target)
    if os.path.isdir(d):
        for f in os.listdir(d):
            if f.startswith("seed-") and not (keep_torch and f.startswith("seed-torch-")):
                os.remove(os.path.join(d, f))


# --- job_spec --------------------------------------------------------------

TINY = 'model { preset: "tiny" } batch_size: 1 context_length: 8 warmup_steps: 0 measure_steps: 1'
JOB_SPECS = {
    "benchmark-tiny-cpu": f'device: "cpu:0" benchmark {{ {TINY} }}',
    "benchmark-defaults": 'benchmark { model { preset: "small" } }',
    "benchmark-explicit-model": 'benchmark { model { vocab_size: 1000 d_model: 64 d_ff: 256 '
                                'num_layers: 2 num_heads: 4 rope_theta: 500000 } mode: BENCHMARK_MODE_TRAIN_STEP '
                                'precision: PRECISION_BF16 optimizer_impl: OPTIMIZER_IMPL_FUSED weight_copies: true }',
    "benchmark-warmup-auto": 'device: "cuda:0" benchmark { model { preset: "tiny" } warmup_auto: true '
                             'warmup_max_steps: 40 cuda_graph: true attention: ATTENTION_IMPL_SDPA_FLASH '
                             'precision: PRECISION_FP16 }',
    "benchmark-contradiction": 'benchmark { model { preset: "tiny" } warmup_auto: true warmup_steps: 4 }',
    "benchmark-parity-2.7B": 'benchmark { model { preset: "2.7B" } export_parity: true }',
    "benchmark-progress-timeout": f'progress_timeout_seconds: 30 benchmark {{ {TINY} }}',
    "memory-sweep": 'memory { step { model { preset: "tiny" } mode: BENCHMARK_MODE_TRAIN_STEP } '
                    'context_lengths: 64 context_lengths: 128 precisions: PRECISION_FP32 '
                    'precisions: PRECISION_BF16 modes: BENCHMARK_MODE_FORWARD record_steps: 3 '
                    'max_entries: 50000 stacks: MEMORY_STACKS_ALL top_allocations: 5 }',
    "memory-defaults": 'device: "cuda:0" memory { step { model { preset: "small" } } }',
    "profile-tiny": f'device: "cpu:0" profile {{ step {{ {TINY} }} profile_steps: 1 '
                    'activities: PROFILER_ACTIVITY_CPU record_shapes: true }',
    "profile-cuda": 'profile { step { model { preset: "xl" } precision: PRECISION_BF16 } '
                    'activities: PROFILER_ACTIVITY_CPU activities: PROFILER_ACTIVITY_CUDA }',
    "profile-with-stack": 'profile { step { model { preset: "tiny" } } with_stack: true }',
    "collective-devices": 'collective { devices: "cpu:0" devices: "cpu:1" devices: "cpu:2" devices: "cpu:3" '
                          'backend: COLLECTIVE_BACKEND_GLOO world_sizes: 2 world_sizes: 4 '
                          'op: COLLECTIVE_OP_ALL_GATHER dtype: COLLECTIVE_DTYPE_BF16 min_bytes: 1024 '
                          'max_bytes: 1048576 factor: 4 iters: 5 warmup_iters: 1 timeout_seconds: 60 }',
    "collective-group": 'collective { group: "g1" sizes_bytes: 4096 sizes_bytes: 65536 '
                        'op: COLLECTIVE_OP_ALL_TO_ALL }',
    "collective-targets": 'collective { targets { devices: "cuda:0" devices: "cuda:1" } '
                          'targets { group: "g2" } backends: COLLECTIVE_BACKEND_NCCL '
                          'op: COLLECTIVE_OP_REDUCE_SCATTER in_place: true }',
    "collective-backends": 'collective { devices: "cuda:0" devices: "cuda:1" backends: COLLECTIVE_BACKEND_NCCL '
                           'backends: COLLECTIVE_BACKEND_GLOO op: COLLECTIVE_OP_BROADCAST }',
    "sweep-precision-context": f'device: "cpu:0" benchmark {{ {TINY} }} sweep {{ axes {{ field: "precision" '
                               'values: "fp32" values: "BF16" values: "PRECISION_FP16" } '
                               'axes { field: "context_length" values: "16" values: "32" } '
                               'cell_timeout_seconds: 30 }',
    "sweep-profile-preset": 'profile { step { mode: BENCHMARK_MODE_TRAIN_STEP } } sweep { axes { '
                            'field: "step.model.preset" values: "tiny" values: "mini" } axes { '
                            'field: "step.attention" values: "flash" values: "math" } }',
    "attention-cpu": 'device: "cpu:0" attention { batch_size: 2 seq_len: 64 head_dim: 16 causal: true '
                     'implementation: ATTENTION_IMPL_SDPA_MATH warmup_passes: 1 passes: 3 seed: 7 }',
    "attention-grid-cell": 'device: "cuda:0" attention { head_dim: 128 seq_len: 16384 '
                           'precision: PRECISION_BF16 implementation: ATTENTION_IMPL_SDPA_FLASH '
                           'num_heads: 4 memory_cap_bytes: 8589934592 }',
    "attention-defaults": 'attention { }',
    "precision-defaults": 'precision { }',
    "precision-cpu": 'device: "cpu:0" precision { experiments: PRECISION_EXPERIMENT_AUTOCAST '
                     'experiments: PRECISION_EXPERIMENT_ACCUMULATION autocast_dtypes: PRECISION_FP16 '
                     'count: 2000 addend: 0.1 seed: 3 }',
    "precision-sweep": 'device: "cuda:0" precision { experiments: PRECISION_EXPERIMENT_ACCUMULATION } '
                       'sweep { axes { field: "count" values: "10" values: "1000000" } axes { '
                       'field: "addend" values: "0.01" values: "-65504" } }',
    "empty": '',
}


def job_specs():
    proto = os.path.join(ROOT, "proto")
    for name, text in JOB_SPECS.items():
        data = subprocess.run(
            ["protoc", f"-I{proto}", "--encode=benchd.v1.JobSpec", "benchd/v1/bench.proto"],
            input=text.encode(), capture_output=True, check=True).stdout
        write("job_spec", name, data)


# --- job_id, artifact_name -------------------------------------------------

def ids_and_names():
    for i, s in enumerate(["42", "1", "999999999999999999", "9223372036854775807", "0", "042",
                           "-1", "+7", " 7", "7\n", "1e3", "", "..", "7/../8"]):
        write("job_id", f"{i:02d}", s.encode())
    pairs = [("7", "trace.json"), ("7", "snapshot.pickle"), ("7", "half.json.tmp"), ("7", "link"),
             ("7", "sub"), ("7", "fifo"), ("8", "trace.json"), ("7", "../secret"), ("7", ".."),
             ("7", "."), ("07", "trace.json"), ("", "trace.json"), ("7", "a" * 256),
             ("7", "trace.json\0.pickle")]
    for i, (job, name) in enumerate(pairs):
        write("artifact_name", f"{i:02d}", job.replace("\\", "\\\\").encode() + b"\\/" + name.encode())


# --- profile_analysis -------------------------------------------------------

RANGE, OP, RUNTIME, DEVICE = 0, 1, 2, 3


def profile_input(events, device_rows=True, steps=1, flops=None):
    """events: (kind, name, start_ns, end_ns, parent, thread)."""
    out = bytearray([(1 if device_rows else 0) | ((steps + 8) << 1)])
    for kind, name, start, end, parent, thread in events:
        n = name.encode()[:255]
        out += struct.pack("<BBhqqB", kind, thread & 0xFF, parent, start * 4, end * 4, len(n)) + n
    for name, value in (flops or {}).items():
        n = name.encode()[:255]
        out += struct.pack("<BB", 0x80, len(n)) + n + struct.pack("<d", value)
    return bytes(out)


class Tree:
    def __init__(self):
        self.events = []

    def add(self, kind, name, start, end, parent=-1, thread=1):
        self.events.append((kind, name, start, end, parent, thread))
        return len(self.events) - 1

    def launch(self, op, kernel, s, ks, ke, parent, thread=1):
        o = self.add(OP, op, s, s + 10, parent, thread)
        r = self.add(RUNTIME, "cudaLaunchKernel", s + 2, s + 8, o, thread)
        return self.add(DEVICE, kernel, ks, ke, r, 0)


def unit_test_trees():
    # common/profile_analysis_test.cc's trees.
    t = Tree()
    step = t.add(RANGE, "step", 0, 10000)
    fwd = t.add(RANGE, "forward", 100, 1000, step)
    attn = t.add(RANGE, "attention", 200, 400, fwd)
    sm = t.add(RANGE, "attention.softmax", 250, 300, attn)
    t.launch("aten::mm", "void cutlass_kernel<float>(Params)", 110, 1000, 3000, fwd)
    t.launch("aten::_softmax", "void at::native::softmax_warp_forward<float, 4>(float*, int)",
             260, 3000, 3500, sm)
    t.launch("aten::bmm", "ampere_sgemm_128x64_tn", 210, 3500, 3600, attn)
    bwd = t.add(RANGE, "backward", 2000, 9000, step)
    fn = t.add(OP, "autograd::engine::evaluate_function: MmBackward0", 2100, 2400, -1, 2)
    t.launch("aten::mm", "nvjet_tst_128x64", 2110, 4000, 5000, fn, 2)
    t.add(DEVICE, "orphan_kernel", 5000, 5100)
    opt = t.add(RANGE, "optimizer_step", 9000, 9900, step)
    t.launch("aten::_foreach_add_", "multi_tensor_apply_kernel", 9010, 9100, 9500, opt)
    yield "nested-ranges", profile_input(t.events, steps=2,
                                         flops={"forward": 1e9, "step": 3e9, "attention": 2e8})
    yield "nested-ranges-cpu", profile_input(t.events, device_rows=False)
    _ = bwd

    t = Tree()
    step1 = t.add(RANGE, "step", 0, 1000)
    bwd1 = t.add(RANGE, "backward", 100, 900, step1)
    step2 = t.add(RANGE, "step", 2000, 3000)
    t.add(RANGE, "backward", 2100, 2900, step2)
    fn1 = t.add(OP, "MmBackward0", 200, 300, bwd1, 2)
    t.launch("aten::mm", "gemm_1", 210, 400, 500, fn1, 2)
    fn2 = t.add(OP, "MmBackward0", 2200, 2300, bwd1, 2)
    t.launch("aten::mm", "gemm_2", 2210, 2400, 2500, fn2, 2)
    yield "cross-thread-links", profile_input(t.events, steps=2)


def torch_profile(python):
    """A real CPU profile (torch.profiler, as the worker's CPU profile) of a small
    model's train steps with the worker's named ranges, flattened like
    worker/profile_run.cc's Flatten (TorchOps only: no CUDA here)."""
    script = r'''
import json, torch
from torch.profiler import profile, record_function, ProfilerActivity
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(4, 16)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(2):
        with record_function("step"):
            with record_function("forward"):
                with record_function("attention.softmax"):
                    y = torch.softmax(m(x), -1).sum()
            with record_function("backward"):
                y.backward()
            with record_function("optimizer_step"):
                opt.step(); opt.zero_grad()
events, index = [], {}
def visit(e, parent):
    if e.tag != torch._C._profiler._EventType.TorchOp:
        return
    user = e.extra_fields.scope == torch._C._profiler.RecordScope.USER_SCOPE
    index[e.id] = len(events)
    events.append([0 if user else 1, e.name, e.start_time_ns, e.end_time_ns, parent, e.start_tid])
    me = len(events) - 1
    for c in e.children:
        visit(c, me)
for root in prof.profiler.kineto_results.experimental_event_tree():
    visit(root, -1)
print(json.dumps(events))
'''
    out = subprocess.run([python, "-c", script], capture_output=True, check=True, text=True).stdout
    events = [tuple(e) for e in json.loads(out.strip().splitlines()[-1])]
    base = min(e[2] for e in events)  # keep the clock's magnitude, far from the 2^61 limit
    base -= base % 1000000000
    tids = {}
    events = [(k, n, s - base + 1700000000000000000, e - base + 1700000000000000000, p,
               tids.setdefault(t, len(tids) + 1)) for k, n, s, e, p, t in events]
    return profile_input(events, device_rows=False, steps=2, flops={"forward": 2 * 4 * 16 * 32 * 2})


# --- memory_analysis --------------------------------------------------------

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "snapshot", "oom"]
STATES = ["active_allocated", "active_pending_free", "inactive"]


def s8(b):
    b = b.encode()[:255]
    return bytes([len(b)]) + b


def memory_input(snapshot, device=-1, top=10, max_bands=150, max_events=None):
    out = bytearray([((device + 1) & 7) | (min(top, 31) << 3), max_bands & 0xFF])
    for seg in snapshot["segments"]:
        blocks = seg["blocks"][:255]
        out += struct.pack("<BBqqB", 0, seg["device"], seg["address"], seg["total_size"], len(blocks))
        for b in blocks:
            state = STATES.index(b["state"]) if b["state"] in STATES else 3
            out += struct.pack("<qqB", b["size"], b["requested_size"], state)
    stacks = {}
    for dev, trace in enumerate(snapshot["device_traces"]):
        for e in trace[:max_events]:
            frames = e.get("frames") or []
            k = 0
            if frames:
                key = json.dumps(frames, sort_keys=True)
                if key not in stacks:
                    stacks[key] = len(stacks)
                    out += struct.pack("<BB", 3, min(len(frames), 255))
                    for f in frames[:255]:
                        out += s8(f["name"]) + s8(f["filename"]) + struct.pack("<q", f["line"])
                k = stacks[key] + 1
                assert k < 256
            action = ACTIONS.index(e["action"]) if e["action"] in ACTIONS else 9
            size = e.get("size", 0)
            out += struct.pack("<BBBqqqqB", 1, dev, action, e.get("addr", 0), size, e["time_us"],
                               e.get("device_free", 0), k)
    for a in snapshot["external_annotations"]:
        out += struct.pack("<BBBq", 2, a["device"], 1 if a["stage"] == "START" else 0, a["time_us"])
        out += s8(a["name"])
    return bytes(out)


def memory_seeds():
    with open(os.path.join(ROOT, "tests/fixtures/memory/snapshot.pickle"), "rb") as f:
        fixture = pickle.load(f)
    write("memory_analysis", "fixture", memory_input(fixture))
    write("memory_analysis", "fixture-first-40", memory_input(fixture, max_events=40, max_bands=8))
    # common/memory_analysis_test.cc's Fixture().
    mib = 1 << 20
    stack = lambda ours: [
        {"name": "unwind::unwind()", "filename": "/pytorch/torch/csrc/profiler/unwind/unwind.cpp", "line": 10},
        {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)",
         "filename": "/pytorch/c10/cuda/CUDACachingAllocator.cpp", "line": 1390},
        {"name": ours, "filename": "/src/benchd/worker/transformer.cc", "line": 42},
        {"name": "__libc_start_main", "filename": "", "line": 0}]
    ev = lambda a, addr, size, t, frames=None: {"action": a, "addr": addr, "size": size,
                                                "time_us": t, "frames": frames}
    unit = {
        "segments": [
            {"device": 0, "address": 0x1000000, "total_size": 2 * mib,
             "blocks": [{"size": 1024, "requested_size": 1000, "state": "active_allocated"},
                        {"size": 2 * mib - 1024, "requested_size": 0, "state": "inactive"}]},
            {"device": 0, "address": 0x2000000, "total_size": 2 * mib,
             "blocks": [{"size": 512, "requested_size": 500, "state": "active_allocated"},
                        {"size": 2 * mib - 512, "requested_size": 0, "state": "inactive"}]}],
        "device_traces": [[
            ev("segment_alloc", 0x2000000, 2 * mib, 9),
            ev("alloc", 0x2000000, 500, 10, stack("benchd::worker::A()")),
            ev("alloc", 0x2000200, 4096, 11, stack("benchd::worker::B()")),
            ev("free_requested", 0x2000200, 4096, 19),
            ev("free_completed", 0x2000200, 4096, 21),
            ev("alloc", 0x2000200, 2048, 22, stack("benchd::worker::C()")),
            ev("free_requested", 0x2000200, 2048, 30),
            ev("free_completed", 0x2000200, 2048, 30)]],
        "external_annotations": [
            {"name": "forward", "stage": "START", "device": 0, "time_us": 5},
            {"name": "forward", "stage": "END", "device": 0, "time_us": 20},
            {"name": "backward", "stage": "START", "device": 0, "time_us": 20},
            {"name": "backward", "stage": "END", "device": 0, "time_us": 25}],
    }
    write("memory_analysis", "unit-test", memory_input(unit, max_bands=2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch", help="a python with torch, for a real CPU profile seed")
    args = ap.parse_args()
    for t in ["job_spec", "job_id", "artifact_name", "profile_analysis", "memory_analysis"]:
        clear(t, keep_torch=not args.torch)
    job_specs()
    ids_and_names()
    for name, data in unit_test_trees():
        write("profile_analysis", name, data)
    if args.torch:
        write("profile_analysis", "torch-cpu-train-steps", torch_profile(args.torch))
    else:
        print("make_seeds: no --torch: the real-profile seed is kept as it is", file=sys.stderr)
    memory_seeds()
    for t in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, t))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        print(f"{t}: {len(files)} files, {size} bytes")


if __name__ == "__main__":
    main()
