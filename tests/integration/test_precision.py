"""The precision request (CS336 mixed_precision) through a real CPU daemon and
benchctl: both tables, the figures as the worker's device gave them, the CSV,
list --kind, a sweep over it, and refusals naming the field."""
import json

import pytest

from conftest import bench_pb2


def test_both_tables_through_benchctl(daemon):
    r = daemon.benchctl("submit", "precision", "--device", "cpu:0", "--watch", check=0)
    for text in ("Accumulation: 0.01 added 1000 times (exact 10)", "abs error", "rel error",
                 "9.953125", "10.0021362", "float16 -> float32",
                 "Autocast (cpu autocast): the ToyModel's dtypes", "autocast bf16",
                 "autocast fp16", "fc1.weight.grad", "cpu:0 ("):
        assert text in r.stdout, r.stdout
    assert "fp16 9.95312" in r.stderr, r.stderr  # the final state line

    r = daemon.benchctl("submit", "precision", "--device", "cpu:0", "--autocast-dtypes", "fp16",
                        "--count", "2000", "--watch", "--json", check=0)
    job = json.loads(r.stdout)
    assert job["kind"] == "JOB_KIND_PRECISION" and job["state"] == "JOB_STATE_SUCCEEDED"
    res = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job["id"])).result.precision
    # The spec as it ran, defaults written out.
    assert list(res.spec.experiments) == [bench_pb2.PRECISION_EXPERIMENT_ACCUMULATION,
                                          bench_pb2.PRECISION_EXPERIMENT_AUTOCAST]
    assert list(res.spec.autocast_dtypes) == [bench_pb2.PRECISION_FP16]
    assert res.spec.count == 2000 and res.spec.addend == 0.01
    rows = {row.name: row for row in res.accumulation}
    assert list(rows) == ["fp32", "fp16", "mixed", "mixed_cast"]
    assert all(row.exact == 20.0 for row in res.accumulation)
    # As PyTorch 2.11 gives them (the same loops in Python, on the CPU).
    assert rows["fp16"].result == 19.53125 and rows["fp16"].relative_error == 0.0234375
    assert rows["fp32"].result == pytest.approx(20.000362396240234)
    assert rows["mixed"].result == rows["mixed_cast"].result == pytest.approx(20.0042724609375)
    assert rows["fp16"].addend_value == 0.01000213623046875
    assert (rows["mixed"].accumulator_dtype, rows["mixed"].addend_dtype) == ("float32", "float16")
    (run,) = res.autocast
    assert run.autocast_dtype == bench_pb2.PRECISION_FP16 and run.autocast_device_type == "cpu"
    dtypes = {t.tensor: t.dtype for t in run.tensors}
    assert dtypes["fc1.weight"] == "float32" and dtypes["fc1"] == "float16"
    assert dtypes["ln"] == "float16"  # CPU autocast runs layer_norm low (CUDA's keeps fp32)
    assert dtypes["fc2"] == "float16" and dtypes["loss"] == "float32"
    assert dtypes["fc2.weight.grad"] == "float32"
    assert res.device == "cpu:0" and res.versions.torch

    # get --csv: the accumulation rows, a blank line, a row per tensor.
    r = daemon.benchctl("get", job["id"], "--csv", check=0)
    first, second = r.stdout.strip().split("\n\n")
    assert first.splitlines()[0].startswith("job_id,name,accumulator_dtype,addend_dtype")
    assert len(first.splitlines()) == 1 + 4
    assert second.splitlines()[0] == "job_id,autocast_dtype,autocast_device_type,tensor,role,dtype"
    assert f"{job['id']},fp16,cpu,ln,activation,float16" in second.splitlines()

    # list --kind precision finds both.
    r = daemon.benchctl("list", "--kind", "precision", "--json", check=0)
    assert len(json.loads(r.stdout)["jobs"]) == 2


def test_a_sweep_over_count(daemon):
    r = daemon.benchctl("submit", "precision", "--device", "cpu:0", "--experiments",
                        "accumulation", "--sweep", "count=10,100", "--watch", "--json", check=0)
    job = json.loads(r.stdout)
    cells = job["result"]["sweep"]["cells"]
    assert [c["values"] for c in cells] == [["10"], ["100"]]
    assert all(c["outcome"] == "SWEEP_CELL_OUTCOME_OK" for c in cells)
    assert [c["result"]["precision"]["spec"]["count"] for c in cells] == ["10", "100"]


@pytest.mark.parametrize("flags, message", [
    (["--count", "0"], "precision.count: expected 1..1000000, got 0"),
    (["--addend", "0"], "precision.addend: expected a number other than 0"),
    (["--addend", "1e6"], "precision.addend: expected a number other than 0 with |addend| <= "
                          "65504 (fp16's largest finite value), got 1e+06"),
    (["--autocast-dtypes", "fp32"], "precision.autocast_dtypes[0]: fp32 is not an autocast dtype"),
    (["--autocast-dtypes", "bf16,bf16"], "precision.autocast_dtypes[1]: bf16 is given twice"),
    (["--experiments", "speed"], "--experiments: unknown experiment 'speed'"),
])
def test_bad_input_names_the_field(daemon, flags, message):
    r = daemon.benchctl("submit", "precision", "--device", "cpu:0", *flags, check=2)
    assert message in r.stderr, r.stderr
