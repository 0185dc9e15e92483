"""bench/profile_aftereffect.py on the CPU against a real daemon: benchmarks
around two profile requests on one worker, each row with its ratio to the
first (the GPU's numbers are in docs/results/h100-profile.md)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BIN, SRC

SCRIPT = os.path.join(SRC, "bench", "profile_aftereffect.py")


def test_cpu_run(daemon):
    daemon.wait_worker_up()
    r = subprocess.run(
        [sys.executable, SCRIPT, "--benchctl", os.path.join(BIN, "benchctl"), "--preset", "tiny",
         "--precision", "fp32", "--context-length", "16", "--warmup-steps", "1", "--steps", "3"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "BENCHD_ADDRESS": daemon.address})
    assert r.returncode == 0, (r.stdout, r.stderr, daemon.log())
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in r.stdout.splitlines()
            if re.match(r"\| \d", line)]
    assert [row[1].split(":")[0] for row in rows] == [
        "benchmark", "profile 1", "benchmark after profile 1", "profile 2", "benchmark after profile 2"]
    assert rows[0][3] == "1.000"
    for row in rows:
        # The ratio is of the unrounded times: within the 2-decimal ms's rounding.
        assert float(row[2]) > 0 and float(row[3]) == pytest.approx(float(row[2]) / float(rows[0][2]), rel=5e-3), row
    assert re.search(r"\(\d+ kernels or operators in 2 profiled steps\)", rows[1][1]), rows[1]
