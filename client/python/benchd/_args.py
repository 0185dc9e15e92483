"""Keyword arguments of the request kinds, checked before any RPC, and the
JobSpec each kind's arguments make. The names are benchctl's flags with '_'
for '-' (client/commands/): `benchctl submit benchmark --preset small --mode
train_step --steps 10` is `client.benchmark(preset="small", mode="train_step",
steps=10)`; devices, iters, passes and warmup_steps are the older spellings
benchctl still accepts for its --device, --steps and --warmup.

Each kind has a TypedDict (what a type checker and an IDE see) and a table of
checkers (what runs): tests/test_args.py checks the two agree.
"""
from __future__ import annotations

import difflib
import math
import numbers
import re
from typing import Any, Callable, Mapping, Sequence, TypedDict, Union, cast

from . import _enums as E
from ._errors import ArgumentError, ArgumentTypeError
from .v1 import bench_pb2 as pb

Size = Union[int, str]  # bytes, or "64KiB", "1MiB", "1GB" as benchctl reads them


class ModelArgs(TypedDict, total=False):
    """Which model: a preset or its sizes (every step's, a ddp job's too)."""
    preset: str              # tiny, mini, small, medium, large, xl, 2.7B
    vocab_size: int
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    rope_theta: float


class StepArgs(ModelArgs, total=False):
    """What one step is (benchmark, profile and memory share them)."""
    device: str              # "cuda:0", "cpu:0"; default: the node's first device
    mode: str                # forward | forward_backward | train_step
    precision: str           # fp32 | bf16 | fp16
    batch_size: int          # default 4
    context_length: int      # default 128
    warmup_steps: int        # default 5
    seed: int
    warmup: Union[int, str]  # "auto" (until step times settle) or N (= warmup_steps N)
    warmup_max_steps: int    # with warmup="auto" (default 50)
    attention: str           # faithful | sdpa | flash | efficient | cudnn | math
    optimizer: str           # faithful | foreach | fused (train_step)
    tf32: bool
    weight_copies: bool
    fused_ops: bool
    autograd: bool
    optimizer_overlap: bool  # train_step, optimizer="fused": each update beside the backward
    # A sweep of the request (JobSpec.sweep): {field: [values]}, the product
    # run in order as one job, e.g. {"precision": ["fp32", "bf16"],
    # "model.preset": ["small", "medium"]} (profile and memory: "step.precision").
    sweep: Mapping[str, Union[str, Sequence[object]]]
    cell_timeout: float      # with sweep: seconds a cell may run (a TIMEOUT row)
    force: bool              # queue it even if its memory estimate exceeds the GPU's memory


class EstimateArgs(TypedDict, total=False):
    """Bench.Estimate: the model and step shape, and the sharding."""
    preset: str              # tiny, mini, small, medium, large, xl, 2.7B, xxl
    vocab_size: int
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    rope_theta: float
    mode: str                # forward | forward_backward | train_step
    precision: str           # fp32 | bf16 | fp16
    batch_size: int          # default 4 (per data-parallel replica)
    context_length: int      # default 128
    autograd: bool           # a forward-only step through autograd keeps what backward needs
    data_parallel: int       # replicas (default 1)
    zero_stage: int          # 0..3
    fsdp: bool               # CS336's FSDP: ZeRO-3 and half the activations sharded
    tensor_parallel: int     # default 1
    pipeline_stages: int     # default 1


class BenchmarkArgs(StepArgs, total=False):
    steps: int               # measured steps (default 10)
    export_parity: bool
    cuda_graph: bool


class ProfileArgs(StepArgs, total=False):
    steps: int               # measured steps of the unprofiled reference run (default 10)
    profile_steps: int       # steps recorded by the profiler (default 3)
    activities: Union[str, Sequence[str]]  # "cpu", "cuda", ["cpu", "cuda"], "cpu,cuda"
    record_shapes: bool
    profile_memory: bool


class MemoryArgs(StepArgs, total=False):
    record_steps: int        # steps recorded after the warm-up (default 2)
    max_entries: int         # allocator history entries per run (default 100000)
    stacks: str              # none | cpp | all
    top: int                 # largest allocations listed per run (default 10)
    contexts: Union[str, Sequence[int]]     # sweep: [128, 256, 512] or "128,256,512"
    modes: Union[str, Sequence[str]]        # sweep: ["forward", "train_step"]
    precisions: Union[str, Sequence[str]]   # sweep: ["fp32", "bf16"]


class CollectiveArgs(TypedDict, total=False):
    group: str               # a resident group id, or:
    devices: Union[str, Sequence[str]]      # rank order: ["cpu:0", "cpu:1"] or "cpu:0,cpu:1"
    backend: str             # nccl | gloo (default: nccl on cuda, gloo on cpu)
    backends: Union[str, Sequence[str]]     # sweep: one series per backend
    world_sizes: Union[str, Sequence[int]]  # sweep: the first N devices
    op: str                  # all_reduce | all_gather | reduce_scatter | broadcast | all_to_all
    dtype: str               # fp32 | fp16 | bf16 | fp64 | int32
    min: Size                # smallest message (default 1MiB)
    max: Size                # largest message (default min)
    factor: int              # size multiplier (default 2)
    sizes: Union[Size, Sequence[Size]]      # a list instead of min..max
    warmup: int              # warm-up iterations per size (default 5)
    iters: int               # measured iterations per size (default 20)
    in_place: bool
    group_timeout: float     # seconds before a hung collective is aborted (default 300)


class DdpArgs(ModelArgs, total=False):
    """Data-parallel training (`benchctl submit ddp`): a compute-only run, then
    every variant x bucket size x optimizer."""
    group: str               # a resident group id, or:
    devices: Union[str, Sequence[str]]      # rank order: ["cpu:0", "cpu:1"] or "cpu:0,cpu:1"
    backend: str             # with devices: nccl | gloo (default: nccl on cuda, gloo on cpu)
    precision: str           # fp32 | bf16 | fp16
    global_batch: int        # sequences of all ranks together, split evenly (default 8)
    batch_size: int          # or sequences per rank (not with global_batch)
    context_length: int      # default 128
    warmup_steps: int        # per run (default 5)
    steps: int               # measured steps per run (default 10)
    seed: int
    tf32: bool
    autograd: bool           # every run through the autograd engine; needed by reducer
    # naive | flat | overlap | bucketed | reducer (default the first four, and reducer with autograd)
    variants: Union[str, Sequence[str]]
    bucket_mb: Union[float, str, Sequence[float]]  # bucketed, reducer: MB (10^6 bytes), one run each
    optimizers: Union[str, Sequence[str]]   # adamw | sharded_adamw | adamw_overlapped (default adamw)
    sharded_optimizer: bool  # = optimizers="sharded_adamw"
    # none | bf16 (as DDP's bf16_compress_hook; not with reducer); both = every run twice
    gradient_compressions: Union[str, Sequence[str]]
    optimizer_impl: str      # faithful (default), foreach or fused: how AdamW steps
    group_timeout: float     # seconds before a hung collective fails the job (default 300)
    traces: bool             # one profiled step per run and rank: timelines + traces (default True)


class AttentionArgs(TypedDict, total=False):
    """One cell of the CS336 pytorch_attention benchmark (`benchctl submit attention`)."""
    device: str              # "cuda:0", "cpu:0"; default: the node's first device
    batch_size: int          # default 8
    heads: int               # default: none (inputs (batch, seq, d), as the course)
    head_dim: int            # d per head, default 64
    seq_len: int             # default 1024
    causal: bool
    precision: str           # fp32 | bf16 | fp16: the dtype of Q, K, V (not autocast)
    impl: str                # faithful | sdpa | flash | efficient | cudnn | math | tiled | fused
    warmup: int              # warm-up passes (default 5)
    passes: int              # measured passes, each a forward and a backward (default 100)
    seed: int
    memory_cap: Size         # CUDA only: e.g. "2GiB", a real cap on the caching allocator
    flush_l2: bool           # 256 MiB zeroed before every pass (triton's do_bench; CUDA)
    preset: str              # "leaderboard": bf16 causal 1 x 16 heads x 16384 x 64, L2 flushed
    # A grid as one job (JobSpec.sweep), fields of AttentionSpec: {"seq_len":
    # [256, 1024], "implementation": ["faithful", "flash"], "precision": [...]}
    sweep: Mapping[str, Union[str, Sequence[object]]]
    cell_timeout: float      # with sweep: seconds a cell may run (a TIMEOUT row)


class PrecisionArgs(TypedDict, total=False):
    """The CS336 mixed_precision experiments (`benchctl submit precision`)."""
    device: str              # "cuda:0", "cpu:0"; default: the node's first device
    # accumulation | autocast, a list or "accumulation,autocast" (default both)
    experiments: Union[str, Sequence[str]]
    # bf16 | fp16: the autocast experiment's dtypes, one run each (default both)
    autocast_dtypes: Union[str, Sequence[str]]
    count: int               # additions in the accumulation experiment (default 1000)
    addend: float            # the value added (default 0.01)
    seed: int                # the ToyModel's weights, input and targets
    sweep: Mapping[str, Union[str, Sequence[object]]]  # e.g. {"count": [10, 1000]}
    cell_timeout: float      # with sweep: seconds a cell may run (a TIMEOUT row)


# ------------------------------------------------------------------ checkers

def _type_error(argument: str, value: object, expected: str) -> ArgumentTypeError:
    return ArgumentTypeError(argument, value, expected,
                             f"{argument}: expected {expected}, got {type(value).__name__} "
                             f"{value!r}")


def as_int(argument: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _type_error(argument, value, "an int")
    return int(value)


def as_float(argument: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_error(argument, value, "a number")
    f = float(value)
    if not math.isfinite(f):
        raise ArgumentError(argument, value, "a finite number",
                            f"{argument}: expected a finite number, got {value!r}")
    return f


def as_bool(argument: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _type_error(argument, value, "True or False")
    return value


def as_str(argument: str, value: object) -> str:
    if not isinstance(value, str):
        raise _type_error(argument, value, "a string")
    return value


def as_list(argument: str, value: object, item: Callable[[str, object], Any]) -> list[Any]:
    """A list/tuple of items, or one string of items separated by commas
    (as benchctl's flags take them); a lone item counts as a list of one."""
    if isinstance(value, str):
        parts: Sequence[object] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, (list, tuple)):
        parts = value
    else:
        parts = [value]
    return [item(f"{argument}[{i}]", p) for i, p in enumerate(parts)]


def _number_or_text(argument: str, value: object) -> float:
    """A number, or one written as text ("2.5"), as a comma-separated flag gives it."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ArgumentError(argument, value, "a number",
                                f"{argument}: expected a number, got {value!r}") from None
    return as_float(argument, value)


def _int_or_digits(argument: str, value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return as_int(argument, value)


_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]*)?)([a-zA-Z]*)$")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
SIZE_HELP = ("bytes (an int) or a string with an optional unit, e.g. 4096, '64KiB', '1MiB', "
             "'1GiB' (KiB/MiB/GiB = 2^10/2^20/2^30; KB/MB/GB = 10^3/10^6/10^9)")


def as_size(argument: str, value: object) -> int:
    """Bytes, as benchctl's --min/--max/--sizes read them."""
    if isinstance(value, str):
        m = _SIZE.match(value.replace(" ", ""))
        if m and m.group(2).lower() in _UNITS:
            b = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if b == math.floor(b) and b <= 9e18:
                return int(b)
        raise ArgumentError(argument, value, SIZE_HELP,
                            f"{argument}: {value!r} is not a size; expected {SIZE_HELP}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _type_error(argument, value, SIZE_HELP)
    return int(value)


def _enum(e: E.EnumArg) -> Callable[[str, object], int]:
    return lambda argument, value: e.parse(argument, value)


def _enum_list(e: E.EnumArg) -> Callable[[str, object], list[int]]:
    return lambda argument, value: as_list(argument, value, e.parse)


def _warmup(argument: str, value: object) -> int | str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(argument, value, ["auto", "a number of steps"],
                                f"{argument}: expected 'auto' or a number of steps (0 or more), "
                                f"got {value!r}")
    if int(value) < 0:
        raise ArgumentError(argument, value, ["auto", "a number of steps"],
                            f"{argument}: expected 'auto' or a number of steps (0 or more), "
                            f"got {value!r}")
    return int(value)


def _sweep_value(argument: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, numbers.Real)):
        return str(value)
    raise ArgumentTypeError(argument, value, "a value as text, a number or a bool",
                            f"{argument}: expected a value (text, number or bool), got {value!r}")


def _sweep(argument: str, value: object) -> list[tuple[str, list[str]]]:
    if not isinstance(value, Mapping) or not value:
        raise ArgumentTypeError(argument, value, "{field: [values]}",
                                f"{argument}: expected a non-empty mapping of field to values, "
                                f"e.g. {{'precision': ['fp32', 'bf16']}}, got {value!r}")
    axes = []
    for field, values in value.items():
        if not isinstance(field, str):
            raise ArgumentTypeError(argument, value, "{field: [values]}",
                                    f"{argument}: field names are text, got {field!r}")
        where = f"{argument}[{field!r}]"
        items = values.split(",") if isinstance(values, str) else values
        if not isinstance(items, Sequence) or isinstance(items, (bytes, bytearray)):
            raise ArgumentTypeError(where, values, "a list of values",
                                    f"{where}: expected a list of values, got {values!r}")
        axes.append((field, [_sweep_value(where, v) for v in items]))
    return axes


Checker = Callable[[str, object], Any]

STEP_CHECKS: dict[str, Checker] = {
    "device": as_str, "preset": as_str, "vocab_size": as_int, "d_model": as_int, "d_ff": as_int,
    "num_layers": as_int, "num_heads": as_int, "rope_theta": as_float, "mode": _enum(E.MODE),
    "precision": _enum(E.PRECISION), "batch_size": as_int, "context_length": as_int,
    "warmup_steps": as_int, "seed": as_int, "warmup": _warmup, "warmup_max_steps": as_int,
    "attention": _enum(E.ATTENTION), "optimizer": _enum(E.OPTIMIZER), "tf32": as_bool,
    "weight_copies": as_bool, "fused_ops": as_bool, "autograd": as_bool, "force": as_bool,
    "optimizer_overlap": as_bool, "sweep": _sweep, "cell_timeout": as_float,
}
ESTIMATE_CHECKS: dict[str, Checker] = {
    "preset": as_str, "vocab_size": as_int, "d_model": as_int, "d_ff": as_int,
    "num_layers": as_int, "num_heads": as_int, "rope_theta": as_float, "mode": _enum(E.MODE),
    "precision": _enum(E.PRECISION), "batch_size": as_int, "context_length": as_int,
    "autograd": as_bool, "data_parallel": as_int, "zero_stage": as_int, "fsdp": as_bool,
    "tensor_parallel": as_int, "pipeline_stages": as_int,
}
BENCHMARK_CHECKS: dict[str, Checker] = {
    **STEP_CHECKS, "steps": as_int, "export_parity": as_bool, "cuda_graph": as_bool}
PROFILE_CHECKS: dict[str, Checker] = {
    **STEP_CHECKS, "steps": as_int, "profile_steps": as_int,
    "activities": _enum_list(E.ACTIVITY), "record_shapes": as_bool, "profile_memory": as_bool}
MEMORY_CHECKS: dict[str, Checker] = {
    **STEP_CHECKS, "record_steps": as_int, "max_entries": as_int, "stacks": _enum(E.STACKS),
    "top": as_int, "contexts": lambda a, v: as_list(a, v, _int_or_digits),
    "modes": _enum_list(E.MODE), "precisions": _enum_list(E.PRECISION)}
COLLECTIVE_CHECKS: dict[str, Checker] = {
    "group": as_str, "devices": lambda a, v: as_list(a, v, as_str), "backend": _enum(E.BACKEND),
    "backends": _enum_list(E.BACKEND),
    "world_sizes": lambda a, v: as_list(a, v, _int_or_digits), "op": _enum(E.OP),
    "dtype": _enum(E.DTYPE), "min": as_size, "max": as_size, "factor": as_int,
    "sizes": lambda a, v: as_list(a, v, as_size), "warmup": as_int, "iters": as_int,
    "in_place": as_bool, "group_timeout": as_float,
}
DDP_CHECKS: dict[str, Checker] = {
    "group": as_str, "devices": lambda a, v: as_list(a, v, as_str), "backend": _enum(E.BACKEND),
    "preset": as_str, "vocab_size": as_int, "d_model": as_int, "d_ff": as_int,
    "num_layers": as_int, "num_heads": as_int, "rope_theta": as_float,
    "precision": _enum(E.PRECISION), "global_batch": as_int, "batch_size": as_int,
    "context_length": as_int, "warmup_steps": as_int, "steps": as_int, "seed": as_int,
    "tf32": as_bool, "variants": _enum_list(E.DDP_VARIANT),
    "bucket_mb": lambda a, v: as_list(a, v, _number_or_text),
    "optimizers": _enum_list(E.DDP_OPTIMIZER), "sharded_optimizer": as_bool,
    "gradient_compressions": _enum_list(E.DDP_GRADIENT_COMPRESSION),
    "optimizer_impl": _enum(E.OPTIMIZER), "group_timeout": as_float, "traces": as_bool,
    "autograd": as_bool,
}
ATTENTION_CHECKS: dict[str, Checker] = {
    "device": as_str, "batch_size": as_int, "heads": as_int, "head_dim": as_int,
    "seq_len": as_int, "causal": as_bool, "precision": _enum(E.PRECISION),
    "impl": _enum(E.ATTENTION), "warmup": as_int, "passes": as_int, "seed": as_int,
    "memory_cap": as_size, "flush_l2": as_bool, "preset": as_str,
    "sweep": _sweep, "cell_timeout": as_float,
}
PRECISION_CHECKS: dict[str, Checker] = {
    "device": as_str, "experiments": _enum_list(E.EXPERIMENT),
    "autocast_dtypes": _enum_list(E.PRECISION), "count": as_int, "addend": as_float,
    "seed": as_int, "sweep": _sweep, "cell_timeout": as_float,
}

# Keywords another kind takes, with what to give here instead.
_HINTS: dict[str, dict[str, str]] = {
    "memory": {
        "steps": "a memory request records record_steps steps after the warm-up; give that",
        "export_parity": "only benchmark() writes parity bundles",
        "cuda_graph": "not supported by a memory request (a graph replays its own memory pool)",
    },
    "precision": {
        "precision": "give autocast_dtypes (bf16, fp16)",
        "precisions": "give autocast_dtypes (bf16, fp16)",
        "dtypes": "give autocast_dtypes (bf16, fp16)",
        "steps": "give count (the accumulation experiment's additions)",
    },
    "attention": {
        "num_heads": "give heads",
        "implementation": "give impl",
        "attention": "give impl",
        "steps": "give passes (each a forward and a backward)",
        "warmup_passes": "give warmup",
    },
    "ddp": {
        "device": "give devices (rank order) or group",
        "global_batch_size": "give global_batch",
        "measure_steps": "give steps",
        "timeout": "give group_timeout",
        "timeout_seconds": "give group_timeout",
        "optimizer": "give optimizers (adamw, sharded_adamw) or sharded_optimizer=True; "
                     "optimizer_impl (faithful, foreach, fused) says how they step",
        "mode": "a data-parallel step is always a train_step",
        "warmup": "give warmup_steps (every rank runs the same steps)",
        **{name: "this option changes the model's ops; data-parallel training trains the "
                 "course's model as written (autograd=True runs it through the autograd engine)"
           for name in ("attention", "fused_ops", "weight_copies")},
    },
    "profile": {
        "export_parity": "only benchmark() writes parity bundles",
        "cuda_graph": "not supported by a profile request (a graph replay has no operators or "
                      "ranges to attribute its kernels to)",
    },
}


def check(call: str, checks: Mapping[str, Checker], given: Mapping[str, object]) -> dict[str, Any]:
    """Every keyword known and well typed: the converted values (None = not given)."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name not in checks:
            hint = _HINTS.get(call, {}).get(name)
            close = difflib.get_close_matches(name, list(checks), n=1)
            why = (f"; {hint}" if hint else
                   f"; did you mean {close[0]!r}?" if close else "")
            raise ArgumentTypeError(
                name, value, sorted(checks),
                f"{call}() got an unexpected keyword argument {name!r}{why} (accepted: "
                f"{', '.join(checks)})")
        if value is None:
            continue
        out[name] = checks[name](name, value)
    return out


def check_positionals(call: str, args: Sequence[object], checks: Mapping[str, Checker]) -> None:
    if args:
        raise ArgumentTypeError(
            "*args", args, list(checks),
            f"{call}() takes keyword arguments only, got {len(args)} positional "
            f"({', '.join(repr(a) for a in args)}); accepted: {', '.join(checks)}")


# ------------------------------------------------------------------ specs

def _benchmark_spec(a: Mapping[str, Any]) -> tuple[str, pb.BenchmarkSpec]:
    b = pb.BenchmarkSpec()
    m = b.model
    m.preset = a.get("preset", "")
    for name in ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads", "rope_theta"):
        if name in a:
            setattr(m, name, a[name])
    if "mode" in a:
        b.mode = a["mode"]
    if "precision" in a:
        b.precision = a["precision"]
    for name in ("batch_size", "context_length", "warmup_steps", "warmup_max_steps"):
        if name in a:
            setattr(b, name, a[name])
    if "seed" in a:
        if a["seed"] < 0:
            raise ArgumentError("seed", a["seed"], "0 or more",
                                f"seed: must be 0 or more, got {a['seed']}")
        b.seed = a["seed"]
    if "warmup" in a:
        if "warmup_steps" in a:
            raise ArgumentError("warmup", a["warmup"], ["auto", "a number of steps"],
                                "warmup: give warmup ('auto' or N) or warmup_steps N, not both")
        if a["warmup"] == "auto":
            b.warmup_auto = True
        else:
            b.warmup_steps = a["warmup"]
    if "attention" in a:
        b.attention = a["attention"]
    if "optimizer" in a:
        b.optimizer_impl = a["optimizer"]
    b.allow_tf32 = a.get("tf32", False)
    b.weight_copies = a.get("weight_copies", False)
    b.fused_ops = a.get("fused_ops", False)
    b.autograd = a.get("autograd", False)
    b.optimizer_overlap = a.get("optimizer_overlap", False)
    if "steps" in a:
        b.measure_steps = a["steps"]
    b.export_parity = a.get("export_parity", False)
    b.cuda_graph = a.get("cuda_graph", False)
    return a.get("device", ""), b


def _with_sweep(spec: pb.JobSpec, a: Mapping[str, Any]) -> pb.JobSpec:
    """The sweep's axes as given (the daemon checks fields and values and
    names the bad one: sweep.axes[i].values[j])."""
    if "sweep" not in a:
        if "cell_timeout" in a:
            raise ArgumentError("cell_timeout", a["cell_timeout"], "with sweep",
                                "cell_timeout: needs sweep (it limits each cell of a sweep)")
        return spec
    for field, values in a["sweep"]:
        spec.sweep.axes.add(field=field, values=values)
    if "cell_timeout" in a:
        spec.sweep.cell_timeout_seconds = a["cell_timeout"]
    return spec


def benchmark_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("benchmark", BENCHMARK_CHECKS, given)
    device, b = _benchmark_spec(a)
    return _with_sweep(pb.JobSpec(device=device, benchmark=b, force=a.get("force", False)), a)


def profile_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("profile", PROFILE_CHECKS, given)
    device, b = _benchmark_spec(a)
    p = pb.ProfileSpec(step=b, record_shapes=a.get("record_shapes", False),
                       profile_memory=a.get("profile_memory", False))
    if "profile_steps" in a:
        p.profile_steps = a["profile_steps"]
    p.activities.extend(a.get("activities", []))
    return _with_sweep(pb.JobSpec(device=device, profile=p, force=a.get("force", False)), a)


def memory_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("memory", MEMORY_CHECKS, given)
    device, b = _benchmark_spec(a)
    m = pb.MemorySpec(step=b)
    for name, field in (("record_steps", "record_steps"), ("max_entries", "max_entries"),
                        ("top", "top_allocations")):
        if name in a:
            setattr(m, field, a[name])
    if "stacks" in a:
        m.stacks = a["stacks"]
    m.context_lengths.extend(a.get("contexts", []))
    m.modes.extend(a.get("modes", []))
    m.precisions.extend(a.get("precisions", []))
    return _with_sweep(pb.JobSpec(device=device, memory=m, force=a.get("force", False)), a)


def estimate_request(given: Mapping[str, object]) -> pb.EstimateRequest:
    """The daemon checks the ranges (and names the field); types are checked here."""
    a = check("estimate", ESTIMATE_CHECKS, given)
    r = pb.EstimateRequest(autograd=a.get("autograd", False))
    r.model.preset = a.get("preset", "")
    for name in ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads", "rope_theta"):
        if name in a:
            setattr(r.model, name, a[name])
    for name in ("mode", "precision", "batch_size", "context_length"):
        if name in a:
            setattr(r, name, a[name])
    for name in ("data_parallel", "tensor_parallel", "pipeline_stages", "zero_stage"):
        if name in a:
            setattr(r.sharding, name, a[name])
    r.sharding.fsdp = a.get("fsdp", False)
    return r


def collective_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("collective", COLLECTIVE_CHECKS, given)
    if a.get("group") and a.get("devices"):
        raise ArgumentError("group", a["group"], ["group", "devices"],
                            "group and devices: give one (a resident group, or devices and a "
                            "backend)")
    c = pb.CollectiveSpec(group=a.get("group", ""), devices=a.get("devices", []),
                          backends=a.get("backends", []), world_sizes=a.get("world_sizes", []),
                          sizes_bytes=a.get("sizes", []), in_place=a.get("in_place", False))
    if "backend" in a:
        c.backend = a["backend"]
    if "op" in a:
        c.op = a["op"]
    if "dtype" in a:
        c.dtype = a["dtype"]
    for name, field in (("min", "min_bytes"), ("max", "max_bytes"), ("factor", "factor"),
                        ("warmup", "warmup_iters"), ("iters", "iters"),
                        ("group_timeout", "timeout_seconds")):
        if name in a:
            setattr(c, field, a[name])
    return pb.JobSpec(collective=c)


# Bucket sizes are 0 < MB <= this (common/ddp_spec.h kMaxDdpBucketMb).
MAX_BUCKET_MB = 1e6


def ddp_spec(given: Mapping[str, object]) -> pb.JobSpec:
    """What `benchctl submit ddp` sends for the same flags; refused here as
    there (naming the argument) when the arguments exclude each other."""
    a = check("ddp", DDP_CHECKS, given)
    if a.get("group") and a.get("devices"):
        raise ArgumentError("group", a["group"], ["group", "devices"],
                            "group and devices: give one (a resident group, or devices and a "
                            "backend)")
    if not a.get("group") and not a.get("devices"):
        raise ArgumentError("devices", given.get("devices"), "devices in rank order, or group",
                            "devices: give the ranks' devices in rank order (e.g. "
                            "['cpu:0', 'cpu:1']), or group= for a resident group")
    if a.get("group") and "backend" in a:
        raise ArgumentError("backend", given["backend"], "with devices",
                            "backend: a resident group has its own backend; give backend with "
                            "devices, not with group")
    if "global_batch" in a and "batch_size" in a:
        raise ArgumentError("global_batch", a["global_batch"], ["global_batch", "batch_size"],
                            "global_batch and batch_size: give one (the batch of all ranks "
                            "together, split evenly, or each rank's)")
    for i, mb in enumerate(a.get("bucket_mb", [])):
        if not 0 < mb <= MAX_BUCKET_MB:
            raise ArgumentError(f"bucket_mb[{i}]", mb, f"0 < MB <= {MAX_BUCKET_MB:g}",
                                f"bucket_mb[{i}]: expected a bucket size in MB (10^6 bytes), "
                                f"above 0 and at most {MAX_BUCKET_MB:g}, got {mb!r}")
    variants = a.get("variants", [])
    if a.get("bucket_mb") and variants and not any(map(E.ddp_takes_buckets, variants)):
        raise ArgumentError("bucket_mb", given["bucket_mb"], "with the bucketed variant",
                            "bucket_mb: only the bucketed and reducer variants have buckets, "
                            "and variants leaves them out (add 'bucketed', or drop bucket_mb)")
    if a.get("sharded_optimizer") and "optimizers" in a:
        raise ArgumentError("sharded_optimizer", True, ["sharded_optimizer", "optimizers"],
                            "sharded_optimizer and optimizers: give one (sharded_optimizer=True "
                            "is optimizers='sharded_adamw')")
    step_keys = ("preset", "vocab_size", "d_model", "d_ff", "num_layers", "num_heads",
                 "rope_theta", "precision", "batch_size", "context_length", "warmup_steps",
                 "steps", "seed", "tf32", "autograd")
    step: dict[str, Any] = {k: a[k] for k in step_keys if k in a}
    if "optimizer_impl" in a:
        step["optimizer"] = a["optimizer_impl"]
    _, b = _benchmark_spec(step)
    d = pb.DdpSpec(step=b, variants=variants, bucket_mb=a.get("bucket_mb", []),
                   optimizers=([pb.DDP_OPTIMIZER_SHARDED_ADAMW] if a.get("sharded_optimizer")
                               else a.get("optimizers", [])),
                   gradient_compressions=a.get("gradient_compressions", []))
    d.target.group = a.get("group", "")
    d.target.devices.extend(a.get("devices", []))
    if "backend" in a:
        d.target.backend = a["backend"]
    if "global_batch" in a:
        d.global_batch_size = a["global_batch"]
    if "group_timeout" in a:
        d.timeout_seconds = a["group_timeout"]
    if "traces" in a:
        d.traces = a["traces"]
    return pb.JobSpec(ddp=d)


def attention_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("attention", ATTENTION_CHECKS, given)
    if a.get("preset", "") not in ("", "leaderboard"):
        raise ArgumentError("preset", a["preset"], ["leaderboard"],
                            f"preset: unknown preset {a['preset']!r}; expected 'leaderboard' "
                            "(the CS336 FlashAttention leaderboard's case)")
    s = pb.AttentionSpec(causal=a.get("causal", False), flush_l2=a.get("flush_l2", False),
                         preset=a.get("preset", ""))
    for name, field in (("batch_size", "batch_size"), ("heads", "num_heads"),
                        ("head_dim", "head_dim"), ("seq_len", "seq_len"),
                        ("precision", "precision"), ("impl", "implementation"),
                        ("warmup", "warmup_passes"), ("passes", "passes"),
                        ("memory_cap", "memory_cap_bytes")):
        if name in a:
            setattr(s, field, a[name])
    if "seed" in a:
        if a["seed"] < 0:
            raise ArgumentError("seed", a["seed"], "0 or more",
                                f"seed: must be 0 or more, got {a['seed']}")
        s.seed = a["seed"]
    return _with_sweep(pb.JobSpec(device=a.get("device", ""), attention=s), a)



def precision_spec(given: Mapping[str, object]) -> pb.JobSpec:
    a = check("precision", PRECISION_CHECKS, given)
    s = pb.PrecisionSpec(experiments=a.get("experiments", []),
                         autocast_dtypes=a.get("autocast_dtypes", []))
    for name in ("count", "addend"):
        if name in a:
            setattr(s, name, a[name])
    if "seed" in a:
        if a["seed"] < 0:
            raise ArgumentError("seed", a["seed"], "0 or more",
                                f"seed: must be 0 or more, got {a['seed']}")
        s.seed = a["seed"]
    return _with_sweep(pb.JobSpec(device=a.get("device", ""), precision=s), a)

# ------------------------------------------------------------------ other calls

def job_id(value: object) -> str:
    """A job id: "12" or 12 (the daemon checks the rest)."""
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        raise _type_error("job_id", value, "a job id (str or int)")
    return str(value)


def list_filters(state: object, kind: object, device: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if state is not None:
        out["state"] = E.JOB_STATE.parse("state", state)
    if kind is not None:
        out["kind"] = E.JOB_KIND.parse("kind", kind)
    if device is not None:
        out["device"] = as_str("device", device)
    return out


def create_group_request(devices: object, backend: object,
                         group_timeout: object) -> pb.CreateGroupRequest:
    if devices is None:
        raise ArgumentError("devices", None, "2 or more devices, e.g. ['cpu:0', 'cpu:1']",
                            "devices: required, rank order, e.g. ['cpu:0', 'cpu:1']")
    r = pb.CreateGroupRequest(devices=as_list("devices", devices, as_str))
    if backend is not None:
        r.backend = cast(Any, E.BACKEND.parse("backend", backend))
    if group_timeout is not None:
        r.timeout_seconds = as_float("group_timeout", group_timeout)
    return r


def evict_request(key: object, device: object, all: object) -> pb.EvictModelRequest:
    given = [n for n, v in (("key", key), ("device", device), ("all", all or None)) if v is not None]
    if len(given) != 1:
        raise ArgumentError("key", key, ["key", "device", "all=True"],
                            "evict: give exactly one of a model key, device=D or all=True"
                            + (f" (got {', '.join(given)})" if given else ""))
    if all is not None:
        as_bool("all", all)
    r = pb.EvictModelRequest()
    if key is not None:
        r.key = as_str("key", key)
    if device is not None:
        r.device = as_str("device", device)
    return r
