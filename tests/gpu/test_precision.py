"""The precision request on a GPU (scripts/gpu-precision.sh): the CS336
mixed_precision experiments on cuda:0 against the write-up's figures: fp16
accumulation 9.953125, fp32 within 1e-3 of 10, mixed = mixed_cast =
10.00213623046875; under CUDA autocast (bf16 and fp16) parameters and
gradients fp32, fc1, relu, fc2 in the autocast dtype, the layer norm's output
and the loss fp32 (CUDA autocast's fp32 list). The Job is saved as
precision.json beside the results."""
import json
import os

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def job(ctl, out_dir):
    ctl.wait_up("cuda:0")
    r = ctl.run("submit", "precision", "--device", "cuda:0", "--watch", "--json", rpc_timeout=300)
    with open(os.path.join(out_dir, "precision.json"), "w") as f:
        f.write(r.stdout)
    try:
        return json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"benchctl printed no Job (exit {r.returncode}): {(r.stdout + r.stderr)[-600:]}")


@pytest.fixture(scope="module")
def result(job):
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (job.get("state"), job.get("errorMessage"))
    return job["result"]["precision"]


def accumulation(result, name):
    rows = {r["name"]: r for r in result.get("accumulation", [])}
    assert name in rows, f"no {name} row: {sorted(rows)}"
    return float(rows[name]["result"])


def test_the_job_succeeds(job):
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (job.get("state"), job.get("errorMessage"))


def test_fp16_accumulation(result):
    assert accumulation(result, "fp16") == 9.953125


def test_fp32_accumulation(result):
    assert abs(accumulation(result, "fp32") - 10) < 1e-3, accumulation(result, "fp32")


def test_mixed_accumulation(result):
    got = (accumulation(result, "mixed"), accumulation(result, "mixed_cast"))
    assert got == (10.00213623046875, 10.00213623046875), got


def test_two_autocast_runs(result):
    runs = result.get("autocast", [])
    assert sorted(r["autocastDtype"] for r in runs) == ["PRECISION_BF16", "PRECISION_FP16"], runs


@pytest.mark.parametrize("dtype", ["PRECISION_BF16", "PRECISION_FP16"])
def test_cuda_autocast_dtypes(result, dtype):
    runs = [r for r in result.get("autocast", []) if r["autocastDtype"] == dtype]
    assert len(runs) == 1, result.get("autocast")
    low = {"PRECISION_BF16": "bfloat16", "PRECISION_FP16": "float16"}[dtype]
    got = {t["tensor"]: t["dtype"] for t in runs[0]["tensors"]}
    want = {"fc1.weight": "float32", "ln.weight": "float32", "ln.bias": "float32",
            "fc2.weight": "float32", "fc1": low, "relu": low, "ln": "float32", "fc2": low,
            "loss": "float32", "fc1.weight.grad": "float32", "ln.weight.grad": "float32",
            "ln.bias.grad": "float32", "fc2.weight.grad": "float32"}
    assert runs[0]["autocastDeviceType"] == "cuda", runs[0]
    assert got == want, got
