"""Enum arguments: the accepted strings come from the proto's enum descriptors.

Each value VALUE of an enum whose zero value is PREFIX_UNSPECIFIED is accepted
as its short lowercase name ("train_step" for BENCHMARK_MODE_TRAIN_STEP), as
its full name in any case, with '-' for '_', as the enum's number, and under
the aliases benchctl accepts ("bfloat16", "flash", "c++", ...). A value added
to the proto is accepted without a change here.
"""
from __future__ import annotations

from google.protobuf.descriptor import EnumDescriptor

from ._errors import ArgumentError, ArgumentTypeError
from .v1 import bench_pb2 as pb

__all__ = ["EnumArg", "PRECISION", "MODE", "ATTENTION", "OPTIMIZER", "STACKS", "ACTIVITY",
           "BACKEND", "OP", "DTYPE", "EXPERIMENT", "DDP_VARIANT", "DDP_OPTIMIZER", "JOB_STATE",
           "JOB_KIND", "WORKER_STATE", "GROUP_STATE", "NODE_STATE"]


class EnumArg:
    """One proto enum as an argument: parse() turns a string into its number,
    name() a number into its short name."""

    def __init__(self, enum: str, aliases: dict[str, str] | None = None) -> None:
        d: EnumDescriptor = pb.DESCRIPTOR.enum_types_by_name[enum]
        self.enum_name = d.name
        zero = [v.name for v in d.values if v.number == 0]
        if not zero or not zero[0].endswith("_UNSPECIFIED"):
            raise AssertionError(f"{d.name}: no *_UNSPECIFIED zero value (AIP-126)")
        self.prefix = zero[0][: -len("UNSPECIFIED")]
        self._by_name: dict[str, int] = {}
        self._short: dict[int, str] = {}
        self.accepted: list[str] = []
        for v in d.values:
            short = v.name[len(self.prefix):].lower()
            self._short[v.number] = short
            if v.number == 0:
                continue
            self.accepted.append(short)
            self._by_name[short] = v.number
            self._by_name[v.name.lower()] = v.number
        for alias, target in (aliases or {}).items():
            if target in self._by_name:
                self._by_name.setdefault(alias, self._by_name[target])

    def parse(self, argument: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ArgumentTypeError(
                argument, value, self.accepted,
                f"{argument}: expected a string ({', '.join(self.accepted)}), got "
                f"{type(value).__name__} {value!r}")
        if isinstance(value, int):
            if value in self._short and value != 0:
                return value
            raise ArgumentError(argument, value, self.accepted,
                                f"{argument}: {value} is not a {self.enum_name} value; expected "
                                f"one of {', '.join(self.accepted)}")
        key = value.strip().lower().replace("-", "_")
        if key in self._by_name:
            return self._by_name[key]
        raise ArgumentError(argument, value, self.accepted,
                            f"{argument}: unknown value {value!r}; expected one of "
                            f"{', '.join(self.accepted)}")

    def name(self, number: int) -> str:
        """Short name of a number ("unspecified" for 0, "unknown(N)" for one
        this package's stubs do not know)."""
        return self._short.get(number, f"unknown({number})")


PRECISION = EnumArg("Precision", {"float32": "fp32", "f32": "fp32", "bfloat16": "bf16",
                                   "float16": "fp16", "half": "fp16"})
MODE = EnumArg("BenchmarkMode", {"fwd": "forward", "fwd_bwd": "forward_backward",
                                  "train": "train_step"})
ATTENTION = EnumArg("AttentionImpl", {"course": "faithful", "auto": "sdpa",
                                       "flash": "sdpa_flash", "flash_attention": "sdpa_flash",
                                       "efficient": "sdpa_efficient",
                                       "mem_efficient": "sdpa_efficient",
                                       "memory_efficient": "sdpa_efficient",
                                       "cudnn": "sdpa_cudnn", "math": "sdpa_math",
                                       "flash_attention_2": "tiled"})
OPTIMIZER = EnumArg("OptimizerImpl", {"course": "faithful"})
STACKS = EnumArg("MemoryStacks", {"c++": "cpp"})
ACTIVITY = EnumArg("ProfilerActivity", {"gpu": "cuda"})
BACKEND = EnumArg("CollectiveBackend")
OP = EnumArg("CollectiveOp", {"allreduce": "all_reduce", "allgather": "all_gather",
                               "reducescatter": "reduce_scatter", "alltoall": "all_to_all"})
DTYPE = EnumArg("CollectiveDtype", {"float32": "fp32", "float": "fp32", "float16": "fp16",
                                     "half": "fp16", "bfloat16": "bf16", "float64": "fp64",
                                     "double": "fp64", "int": "int32"})
EXPERIMENT = EnumArg("PrecisionExperiment")
DDP_VARIANT = EnumArg("DdpVariant")
DDP_OPTIMIZER = EnumArg("DdpOptimizer")
DDP_GRADIENT_COMPRESSION = EnumArg("DdpGradientCompression")


def ddp_takes_buckets(variant: int) -> bool:
    """bucketed and reducer run once per bucket size (common/ddp_spec.h
    DdpVariantTakesBuckets)."""
    return variant in (pb.DDP_VARIANT_BUCKETED, pb.DDP_VARIANT_REDUCER)
JOB_STATE = EnumArg("JobState")
JOB_KIND = EnumArg("JobKind")
WORKER_STATE = EnumArg("WorkerState")
GROUP_STATE = EnumArg("GroupState")
NODE_STATE = EnumArg("NodeState")
