"""bench/ab_daemons.py: two real daemons against the reference on the CPU,
alternating, and its refusal of a malformed row."""
import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, SRC, Daemon

SCRIPT = os.path.join(SRC, "bench", "ab_daemons.py")


def run(*argv, env=None):
    return subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--benchctl", os.path.join(BIN, "benchctl"),
                           *argv], capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture
def second_daemon():
    d = tempfile.mkdtemp(prefix="benchd-it-b-")
    daemon = Daemon(d).start()
    yield daemon
    daemon.stop()
    subprocess.run(["rm", "-rf", d])


def test_two_daemons_alternate(daemon, second_daemon):
    daemon.wait_worker_up()
    second_daemon.wait_worker_up()
    r = run("--a", daemon.address, "--b", second_daemon.address, "--rows", "tiny/forward/fp32",
            "--rounds", "2", "--steps", "2", "--warmup-steps", "1", "--context-length", "32")
    assert r.returncode == 0, (r.stdout, r.stderr, daemon.log(), second_daemon.log())
    lines = r.stdout.splitlines()
    rounds = [line for line in lines if line.startswith("  tiny/forward/fp32 round ")]
    assert len(rounds) == 2
    for i, line in enumerate(rounds, 1):
        assert re.fullmatch(rf"  tiny/forward/fp32 round {i}: reference [\d.]+  A [\d.]+  B [\d.]+", line), line
    pooled = re.fullmatch(r"tiny/forward/fp32: reference ([\d.]+)  A ([\d.]+) \(([\d.]+), ([\d.]+)–([\d.]+)\)  "
                          r"B ([\d.]+) \(([\d.]+), ([\d.]+)–([\d.]+)\)  B / A ([\d.]+)", lines[-1])
    assert pooled, lines[-1]
    ref, a, ra, ra_lo, ra_hi, b, rb, rb_lo, rb_hi, b_over_a = map(float, pooled.groups())
    assert ref > 0 and a > 0 and b > 0
    assert ra_lo <= ra_hi and rb_lo <= rb_hi
    # The ratios come from the unrounded medians; the ms printed beside them are
    # rounded to 0.005, which bounds how far the ratios of the printed ms may stray.
    def slack(x, y):
        return x / y * (0.005 / x + 0.005 / y) + 1e-3
    assert ra == pytest.approx(a / ref, abs=slack(a, ref))
    assert rb == pytest.approx(b / ref, abs=slack(b, ref))
    assert b_over_a == pytest.approx(b / a, abs=slack(b, a))
    # Each daemon ran one job per round.
    for d in (daemon, second_daemon):
        jobs = subprocess.run([os.path.join(BIN, "benchctl"), "list", "--json"], capture_output=True, text=True,
                              env={**os.environ, "BENCHD_ADDRESS": d.address})
        assert jobs.stdout.count('"JOB_STATE_SUCCEEDED"') == 2, jobs.stdout


@pytest.mark.parametrize("row", ["tiny/forward", "huge/forward/fp32", "tiny/backward/fp32", "tiny/forward/int8"])
def test_malformed_row_is_refused(row):
    r = run("--a", "127.0.0.1:1", "--b", "127.0.0.1:2", "--rows", row)
    assert r.returncode == 2
    assert "expected preset/mode/precision" in r.stderr and f"got '{row}'" in r.stderr
