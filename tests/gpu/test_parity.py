"""A benchd train_step against the Python reference on the GPU
(scripts/gpu-check.sh, GPU_CHECK_PARITY): the job runs 4 steps with
--export-parity, its bundle is fetched with benchctl, and
bench/reference/parity.py (the reference on cuda, the same weights, batch and
autocast) must find the first forward's logits and every step's loss within
its tolerance for the precision. BENCHD_GPU_PARITY picks the rows, as
PRESET:PRECISION words (default: small:fp32 small:bf16)."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

PARITY = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "reference", "parity.py")
ROWS = os.environ.get("BENCHD_GPU_PARITY", "small:fp32 small:bf16").split()


@pytest.mark.parametrize("row", ROWS)
def test_a_train_step_matches_the_reference(ctl, out_dir, tmp_path, row):
    preset, _, precision = row.partition(":")
    assert preset and precision, f"BENCHD_GPU_PARITY: {row!r} is not PRESET:PRECISION"
    ctl.wait_up("cuda:0")
    job_id = ctl.json("submit", "benchmark", "--device", "cuda:0", "--preset", preset,
                      "--mode", "train_step", "--precision", precision, "--warmup-steps", "0",
                      "--steps", "4", "--export-parity")["id"]
    ctl.run("watch", job_id, rpc_timeout=120)
    job = ctl.json("get", job_id)
    result = os.path.join(out_dir, f"parity-{preset}-{precision}-job.json")
    with open(result, "w") as f:
        json.dump(job, f, indent=1)
    assert job.get("state") == "JOB_STATE_SUCCEEDED", (job.get("state"), job.get("errorMessage"))
    bundle = tmp_path / "parity.pt"
    got = ctl.run("artifacts", "get", job_id, "parity.pt", "-o", bundle, rpc_timeout=120)
    assert got.returncode == 0, got.stderr
    if ctl.data_dir:  # the bundle holds the weights: large, and read once
        try:
            os.remove(os.path.join(ctl.data_dir, "artifacts", job_id, "parity.pt"))
        except OSError:
            pass
    report = os.path.join(out_dir, f"parity-{preset}-{precision}.json")
    r = subprocess.run([sys.executable, PARITY, str(bundle), "--result", result, "--steps", "4",
                        "--device", "cuda", "--json", report],
                       capture_output=True, text=True, timeout=600)
    with open(os.path.join(out_dir, f"parity-{preset}-{precision}.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
