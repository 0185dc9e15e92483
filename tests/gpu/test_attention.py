"""The attention request's memory cap on a GPU (scripts/gpu-attention.sh): the
cap is the caching allocator's memory fraction, so a cell that needs more
really runs out of memory (RESOURCE_EXHAUSTED, the cap named), and the next
cell, uncapped, runs (the fraction was restored)."""
import os
import re

import pytest

pytestmark = pytest.mark.gpu

# A 512 MiB score matrix (8 x 4096 x 4096 fp32): over a 64 MiB cap.
CELL = ["--device", "cuda:0", "--batch-size", "8", "--head-dim", "64", "--seq-len", "4096",
        "--warmup", "1", "--passes", "3"]
RESOURCE_EXHAUSTED = re.compile(r'"errorCode": ?8[,}\s]')


def test_a_cell_over_the_memory_cap_runs_out_of_memory(ctl):
    ctl.wait_up("cuda:0")
    r = ctl.run("submit", "attention", *CELL, "--memory-cap", "64MiB", "--watch", "--json")
    out = r.stdout + r.stderr
    assert r.returncode != 0, f"a 512 MiB score matrix ran under a 64 MiB cap: {out[-600:]}"
    assert RESOURCE_EXHAUSTED.search(out) and "memory cap 0.06 GiB" in out, out[-600:]


def test_the_next_cell_uncapped_runs(ctl, out_dir):
    ctl.wait_up("cuda:0")
    r = ctl.run("submit", "attention", *CELL, "--watch")
    with open(os.path.join(out_dir, "uncapped.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-600:]
