"""Submit's memory check on a GPU (scripts/gpu-estimate.sh): a step whose
estimate (Bench.Estimate) exceeds the GPU's memory is refused at Submit,
naming both figures; with --force it is queued and really runs out of memory
on the device (RESOURCE_EXHAUSTED); a step that fits runs."""
import os
import re

import pytest

pytestmark = pytest.mark.gpu

BIG = ["--device", "cuda:0", "--preset", "2.7B", "--mode", "train_step", "--precision", "bf16",
       "--batch-size", "64", "--context-length", "1024", "--warmup-steps", "1", "--steps", "2"]
FITS = ["--device", "cuda:0", "--preset", "small", "--mode", "train_step", "--precision", "bf16",
        "--batch-size", "4", "--context-length", "256", "--warmup-steps", "2", "--steps", "5"]
RESOURCE_EXHAUSTED = re.compile(r'"errorCode": ?8[,}\s]')


@pytest.fixture(scope="module")
def cuda0(ctl, out_dir):
    """cuda:0 UP with its memory known (the check needs the worker's figure);
    the big step's estimate saved beside the results."""
    ctl.wait_up("cuda:0")
    estimate = BIG[2:12]  # the model and the shape: no device, no step counts
    with open(os.path.join(out_dir, "estimate-big.json"), "w") as f:
        f.write(ctl.run("estimate", *estimate, "--json").stdout)
    with open(os.path.join(out_dir, "estimate-big.txt"), "w") as f:
        f.write(ctl.run("estimate", *estimate).stdout)
    return ctl


def test_a_step_over_the_gpus_memory_is_refused_at_submit(cuda0):
    r = cuda0.run("submit", "benchmark", *BIG)
    out = r.stdout + r.stderr
    assert r.returncode != 0, f"it was queued: {out}"
    assert "memory estimate exceeds cuda:0's memory" in out, out


def test_forced_it_is_queued_and_runs_out_of_memory_on_the_device(cuda0):
    r = cuda0.run("submit", "benchmark", *BIG, "--force", "--watch", "--json", rpc_timeout=300)
    out = r.stdout + r.stderr
    assert RESOURCE_EXHAUSTED.search(out), out[-600:]


def test_a_step_that_fits_runs(cuda0, out_dir):
    r = cuda0.run("submit", "benchmark", *FITS, "--watch", rpc_timeout=300)
    with open(os.path.join(out_dir, "fits.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-600:]
    assert "succeeded:" in r.stdout + r.stderr, r.stdout[-600:]
