"""The precision request through a real CPU daemon: the accumulation loops
and the ToyModel's dtypes under CPU autocast as typed results and DataFrames,
and refusals naming the field."""
from __future__ import annotations

import pytest

import benchd
from benchd import _args as A
from benchd.v1 import bench_pb2 as pb


def test_precision_gives_the_write_ups_tables(client: benchd.Client) -> None:
    job = client.precision(device="cpu:0")
    job.wait(timeout=120, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    r = job.result
    assert isinstance(r, benchd.PrecisionResult)
    assert r.spec.count == 1000 and r.spec.addend == pytest.approx(0.01)
    assert list(r.spec.autocast_dtypes) == [pb.PRECISION_BF16, pb.PRECISION_FP16]
    df = r.to_pandas()
    assert list(df.name) == ["fp32", "fp16", "mixed", "mixed_cast"]
    assert r.results["fp16"] == 9.953125  # visibly wrong
    assert r.results["fp32"] == pytest.approx(10.0, abs=1e-3)
    assert r.results["mixed"] == r.results["mixed_cast"] == 10.00213623046875
    assert (df.exact == 10.0).all()
    assert list(df.accumulator_dtype) == ["float32", "float16", "float32", "float32"]
    dt = r.autocast_dtypes()
    assert list(dt.columns) == ["tensor", "role", "bf16", "fp16"]
    row = dt.set_index("tensor")
    assert row.loc["fc1", "bf16"] == "bfloat16" and row.loc["fc1", "fp16"] == "float16"
    assert row.loc["loss", "fp16"] == "float32"
    assert row.loc["fc1.weight.grad", "bf16"] == "float32"
    assert r.dtypes("fp16")["fc2"] == "float16"
    with pytest.raises(KeyError):
        client.precision(device="cpu:0", experiments="autocast",
                         autocast_dtypes="bf16").wait(timeout=120, progress=False).result.dtypes(
                             "fp16")


def test_precision_refusals_name_the_field(client: benchd.Client) -> None:
    with pytest.raises(benchd.InvalidArgument, match="precision.count: expected 1..1000000"):
        client.precision(device="cpu:0", count=0)
    with pytest.raises(benchd.InvalidArgument, match="precision.autocast_dtypes.0.: fp32 is not"):
        client.precision(device="cpu:0", autocast_dtypes=["fp32"])
    with pytest.raises(benchd.ArgumentError) as e:
        client.precision(device="cpu:0", experiments="speed")
    assert e.value.argument == "experiments[0]"


def test_precision_spec_from_keywords() -> None:
    spec = A.precision_spec(dict(device="cuda:0", experiments="accumulation",
                                 autocast_dtypes=["fp16", "bf16"], count=10, addend=0.5, seed=3))
    p = spec.precision
    assert spec.device == "cuda:0"
    assert list(p.experiments) == [pb.PRECISION_EXPERIMENT_ACCUMULATION]
    assert list(p.autocast_dtypes) == [pb.PRECISION_FP16, pb.PRECISION_BF16]
    assert (p.count, p.addend, p.seed) == (10, 0.5, 3)
    bare = A.precision_spec({}).precision
    assert not bare.HasField("count") and not bare.HasField("addend")
    with pytest.raises(benchd.ArgumentTypeError, match="give autocast_dtypes"):
        A.precision_spec(dict(precision="bf16"))
