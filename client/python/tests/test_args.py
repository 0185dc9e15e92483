"""Bad input is refused before any RPC, naming the argument and what it
accepts; good input makes the JobSpec benchctl's flags would. No daemon: the
client points at a closed port, so any call that reached the network would
raise benchd.Unavailable instead."""
from __future__ import annotations

import typing

import pytest

import benchd
from benchd import _args as A
from benchd import _enums as E
from benchd.v1 import bench_pb2 as pb

NOWHERE = "127.0.0.1:1"


@pytest.fixture
def offline() -> typing.Iterator[benchd.Client]:
    with benchd.Client(NOWHERE, connect_timeout=1) as c:
        yield c


@pytest.mark.parametrize("typed, checks", [
    (A.BenchmarkArgs, A.BENCHMARK_CHECKS), (A.ProfileArgs, A.PROFILE_CHECKS),
    (A.MemoryArgs, A.MEMORY_CHECKS), (A.CollectiveArgs, A.COLLECTIVE_CHECKS),
    (A.AttentionArgs, A.ATTENTION_CHECKS), (A.PrecisionArgs, A.PRECISION_CHECKS),
    (A.DdpArgs, A.DDP_CHECKS)])
def test_typed_dicts_and_runtime_checks_agree(typed: type, checks: dict[str, object]) -> None:
    assert set(typing.get_type_hints(typed)) == set(checks)


def test_unknown_keyword_names_it_suggests_and_lists(offline: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentTypeError) as e:
        offline.benchmark(preset="tiny", stpes=3)  # type: ignore[call-arg]
    assert e.value.argument == "stpes"
    assert "did you mean 'steps'" in str(e.value)
    assert "context_length" in str(e.value) and "accepted" in str(e.value)
    assert isinstance(e.value, TypeError)


def test_keyword_of_another_kind_says_what_instead(offline: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="record_steps"):
        offline.memory(preset="tiny", steps=3)  # type: ignore[call-arg]


def test_positional_arguments_refused(offline: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="keyword arguments only"):
        offline.benchmark("tiny")


@pytest.mark.parametrize("kwargs, argument, expected", [
    (dict(steps="3"), "steps", "an int"),
    (dict(steps=3.0), "steps", "an int"),
    (dict(batch_size=True), "batch_size", "an int"),
    (dict(tf32=1), "tf32", "True or False"),
    (dict(preset=7), "preset", "a string"),
    (dict(rope_theta="1e4"), "rope_theta", "a number"),
    (dict(mode=["forward"]), "mode", "forward"),
])
def test_wrong_type(offline: benchd.Client, kwargs: dict[str, object], argument: str,
                    expected: str) -> None:
    with pytest.raises(benchd.ArgumentTypeError) as e:
        offline.benchmark(**kwargs)  # type: ignore[arg-type]
    assert e.value.argument == argument
    assert str(e.value).startswith(f"{argument}:") and expected in str(e.value)


@pytest.mark.parametrize("call, kwargs, argument, accepted", [
    ("benchmark", dict(mode="train"), None, None),  # an alias: accepted
    ("benchmark", dict(mode="trainstep"), "mode", ["forward", "forward_backward", "train_step"]),
    ("benchmark", dict(precision="fp8"), "precision", ["fp32", "bf16", "fp16"]),
    ("benchmark", dict(attention="flashy"), "attention",
     ["faithful", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math",
      "tiled", "fused"]),
    ("benchmark", dict(optimizer="sgd"), "optimizer", ["faithful", "foreach", "fused"]),
    ("profile", dict(activities=["cpu", "tpu"]), "activities[1]", ["cpu", "cuda"]),
    ("memory", dict(stacks="python3"), "stacks", ["none", "python", "cpp", "all"]),
    ("memory", dict(precisions="fp32,fp64"), "precisions[1]", ["fp32", "bf16", "fp16"]),
    ("collective", dict(op="allsum"), "op",
     ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]),
    ("collective", dict(backend="mpi"), "backend", ["nccl", "gloo"]),
    ("collective", dict(dtype="int8"), "dtype", ["fp32", "fp16", "bf16", "fp64", "int32"]),
    ("attention", dict(impl="fastest"), "impl",
     ["faithful", "sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math",
      "tiled", "fused"]),
    ("attention", dict(impl="flash", precision="bf16"), None, None),
])
def test_unknown_enum_value_lists_the_descriptors_values(
        offline: benchd.Client, call: str, kwargs: dict[str, object], argument: str | None,
        accepted: list[str] | None) -> None:
    if argument is None:
        with pytest.raises(benchd.Unavailable):  # well-formed: it got as far as connecting
            getattr(offline, call)(**kwargs)
        return
    with pytest.raises(benchd.ArgumentError) as e:
        getattr(offline, call)(**kwargs)
    assert not isinstance(e.value, benchd.RpcError)
    assert e.value.argument == argument
    assert e.value.accepted == accepted
    for value in accepted or []:
        assert value in str(e.value)


def test_bad_sizes_and_warmup(offline: benchd.Client) -> None:
    with pytest.raises(benchd.ArgumentError, match=r"sizes\[1\]: '3 parsecs' is not a size"):
        offline.collective(devices="cpu:0,cpu:1", sizes=["4KiB", "3 parsecs"])
    with pytest.raises(benchd.ArgumentError, match="warmup: give warmup"):
        offline.benchmark(warmup="auto", warmup_steps=3)
    with pytest.raises(benchd.ArgumentError, match="group and devices"):
        offline.collective(group="g1", devices=["cpu:0", "cpu:1"])
    with pytest.raises(benchd.ArgumentError, match="exactly one"):
        offline.evict()
    with pytest.raises(benchd.ArgumentError, match="limit"):
        offline.jobs(limit=0)
    with pytest.raises(benchd.ArgumentError, match="state: unknown value 'done'"):
        offline.jobs(state="done")


@pytest.mark.parametrize("enum", [E.PRECISION, E.MODE, E.ATTENTION, E.OPTIMIZER, E.STACKS,
                                  E.ACTIVITY, E.BACKEND, E.OP, E.DTYPE, E.EXPERIMENT,
                                  E.DDP_VARIANT, E.DDP_OPTIMIZER, E.JOB_STATE, E.JOB_KIND])
def test_every_descriptor_value_parses_short_and_full(enum: E.EnumArg) -> None:
    d = pb.DESCRIPTOR.enum_types_by_name[enum.enum_name]
    values = [v for v in d.values if v.number != 0]
    assert values and len(enum.accepted) == len(values)
    for v in values:
        short = v.name[len(enum.prefix):].lower()
        assert enum.parse("x", short) == v.number
        assert enum.parse("x", v.name) == v.number
        assert enum.parse("x", short.upper().replace("_", "-")) == v.number
        assert enum.parse("x", v.number) == v.number
        assert enum.name(v.number) == short
    with pytest.raises(benchd.ArgumentError):
        enum.parse("x", "unspecified")
    with pytest.raises(benchd.ArgumentError):
        enum.parse("x", 0)


def test_benchmark_spec_mirrors_benchctl_flags() -> None:
    spec = A.benchmark_spec(dict(
        device="cpu:1", preset="small", d_model=128, mode="train_step", precision="bf16",
        batch_size=8, context_length=256, warmup_steps=0, seed=7, attention="flash",
        optimizer="fused", tf32=True, weight_copies=True, fused_ops=True, autograd=True, steps=20,
        cuda_graph=True, optimizer_overlap=True))
    b = spec.benchmark
    assert spec.device == "cpu:1"
    assert b.model.preset == "small" and b.model.d_model == 128
    assert b.mode == pb.BENCHMARK_MODE_TRAIN_STEP and b.precision == pb.PRECISION_BF16
    assert (b.batch_size, b.context_length, b.measure_steps, b.seed) == (8, 256, 20, 7)
    assert b.HasField("warmup_steps") and b.warmup_steps == 0  # an explicit 0 stays explicit
    assert not b.HasField("warmup_max_steps")
    assert b.attention == pb.ATTENTION_IMPL_SDPA_FLASH
    assert b.optimizer_impl == pb.OPTIMIZER_IMPL_FUSED
    assert b.allow_tf32 and b.weight_copies and b.fused_ops and b.autograd and b.cuda_graph
    assert b.optimizer_overlap and not A.benchmark_spec({}).benchmark.optimizer_overlap
    auto = A.benchmark_spec(dict(warmup="auto", warmup_max_steps=9)).benchmark
    assert auto.warmup_auto and auto.warmup_max_steps == 9 and not auto.HasField("warmup_steps")
    unset = A.benchmark_spec({}).benchmark
    for field in ("batch_size", "context_length", "warmup_steps", "measure_steps"):
        assert not unset.HasField(field)  # the daemon's defaults apply


def test_profile_memory_collective_specs() -> None:
    p = A.profile_spec(dict(preset="tiny", steps=4, profile_steps=2, activities="cpu,gpu",
                            record_shapes=True)).profile
    assert p.step.measure_steps == 4 and p.profile_steps == 2 and p.record_shapes
    assert list(p.activities) == [pb.PROFILER_ACTIVITY_CPU, pb.PROFILER_ACTIVITY_CUDA]
    m = A.memory_spec(dict(preset="small", record_steps=3, stacks="c++", top=5,
                           contexts="128,256", modes=["forward", "train_step"],
                           precisions=("fp32", "bf16"))).memory
    assert (m.record_steps, m.top_allocations, m.stacks) == (3, 5, pb.MEMORY_STACKS_CPP)
    assert list(m.context_lengths) == [128, 256]
    assert list(m.modes) == [pb.BENCHMARK_MODE_FORWARD, pb.BENCHMARK_MODE_TRAIN_STEP]
    assert list(m.precisions) == [pb.PRECISION_FP32, pb.PRECISION_BF16]
    c = A.collective_spec(dict(devices="cpu:0, cpu:1", backends=["gloo", "nccl"],
                               world_sizes=[2], op="all_gather", dtype="bfloat16", min="1KiB",
                               max="1MB", factor=4, warmup=2, iters=9, in_place=True,
                               group_timeout=30)).collective
    assert list(c.devices) == ["cpu:0", "cpu:1"]
    assert list(c.backends) == [pb.COLLECTIVE_BACKEND_GLOO, pb.COLLECTIVE_BACKEND_NCCL]
    assert (c.op, c.dtype) == (pb.COLLECTIVE_OP_ALL_GATHER, pb.COLLECTIVE_DTYPE_BF16)
    assert (c.min_bytes, c.max_bytes, c.factor) == (1024, 1_000_000, 4)
    assert (c.warmup_iters, c.iters, c.in_place, c.timeout_seconds) == (2, 9, True, 30.0)
    s = A.collective_spec(dict(devices=["cpu:0", "cpu:1"], sizes=[4096, "64KiB", "1.5KiB"]))
    assert list(s.collective.sizes_bytes) == [4096, 65536, 1536]


def test_attention_spec_mirrors_benchctl_flags() -> None:
    spec = A.attention_spec(dict(device="cuda:0", head_dim=64, seq_len=1024, impl="flash",
                                 precision="bf16", causal=True, heads=4, passes=20, warmup=0,
                                 seed=3, memory_cap="2GiB"))
    a = spec.attention
    assert spec.device == "cuda:0"
    assert (a.head_dim, a.seq_len, a.num_heads, a.passes, a.seed) == (64, 1024, 4, 20, 3)
    assert a.HasField("warmup_passes") and a.warmup_passes == 0  # an explicit 0 stays explicit
    assert a.implementation == pb.ATTENTION_IMPL_SDPA_FLASH and a.precision == pb.PRECISION_BF16
    assert a.causal and a.memory_cap_bytes == 2 << 30
    unset = A.attention_spec({}).attention
    for field in ("batch_size", "num_heads", "head_dim", "seq_len", "warmup_passes", "passes",
                  "memory_cap_bytes"):
        assert not unset.HasField(field)  # the daemon's defaults apply
    with pytest.raises(benchd.ArgumentTypeError, match="give heads"):
        A.attention_spec(dict(num_heads=4))
    with pytest.raises(benchd.ArgumentError, match="memory_cap: 'lots' is not a size"):
        A.attention_spec(dict(memory_cap="lots"))
    board = A.attention_spec(dict(preset="leaderboard", impl="fused", flush_l2=True)).attention
    assert board.preset == "leaderboard" and board.flush_l2
    assert not board.HasField("seq_len")  # the daemon fills the preset's sizes
    with pytest.raises(benchd.ArgumentError, match="preset: unknown preset 'leaderbord'"):
        A.attention_spec(dict(preset="leaderbord"))


def test_every_request_kind_has_a_method_on_both_clients() -> None:
    """The JobKind enum is the one list of kinds: each has a Client and an
    AsyncClient method of its name (a kind added to the proto without one
    fails here)."""
    kinds = E.JOB_KIND.accepted
    assert kinds[0] == "benchmark" and kinds[-1] == "ddp"
    for kind in kinds:
        assert callable(getattr(benchd.Client, kind, None)), kind
        assert callable(getattr(benchd.AsyncClient, kind, None)), kind
        assert getattr(benchd.AsyncClient, kind).__doc__ == getattr(benchd.Client, kind).__doc__
