"""bench/compare.py: its GPU busy time (the union of kernel intervals), the
summary on the 0.6 target, and a whole run on the CPU against a real daemon."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from conftest import BIN, SRC, load_bench_script

SCRIPT = os.path.join(SRC, "bench", "compare.py")


@pytest.fixture(scope="module")
def compare():
    return load_bench_script("compare")


@pytest.mark.parametrize("intervals, busy", [
    ([], 0.0),
    ([(0, 1)], 1.0),
    ([(0, 1), (2, 5)], 4.0),                # disjoint
    ([(0, 3), (2, 5)], 5.0),                # overlapping
    ([(0, 10), (2, 3), (4, 6)], 10.0),      # nested
    ([(0, 2), (2, 4)], 4.0),                # touching
    ([(6, 8), (0, 3), (1, 2), (2.5, 4)], 6.0),  # unsorted, mixed
])
def test_busy_seconds(compare, intervals, busy):
    assert compare.busy_seconds(intervals) == pytest.approx(busy)
    assert compare.busy_seconds(iter(intervals)) == pytest.approx(busy)


def test_summary(compare):
    rows = [("small", "forward", "fp32", 0.5, "host", 0.3, 1.4),
            ("small", "forward", "bf16", 0.7, "host", 0.592, 1.1),
            ("small", "train_step", "fp32", 0.9, "GPU", 0.8, 1.05),
            ("small", "train_step", "bf16", None, "host", 0.2, None),
            ("medium", "forward", "fp32", 1.2, None, None, None),
            ("large", "forward", "fp32", 1.1, "GPU", 0.9, 1.0)]
    lines = compare.summary(rows)
    assert len(lines) == 3
    assert lines[0].startswith("- small: 3 of 4 rows host-bound, 1 of them at ratio ≤ 0.6;")
    # A miss says what bounds it: the reference's kernels and benchd's own.
    assert ("forward/bf16 0.700 (the reference's kernels alone 0.592 of its step; "
            "benchd's step 1.10 × its kernels)") in lines[0]
    assert "train_step/bf16 - (the reference's kernels alone 0.200 of its step)" in lines[0]
    assert "forward/fp32" not in lines[0] and "train_step/fp32" not in lines[0]
    assert lines[1].startswith("- medium: 0 of 1 rows host-bound") and "1 rows with no bound" in lines[1]
    assert lines[2] == ("- ratio above 1.0 (benchd slower than the reference): "
                        "medium/forward/fp32 1.200, large/forward/fp32 1.100")


def test_summary_skips_presets_not_run(compare):
    assert compare.summary([("tiny", "forward", "fp32", 0.4, None, None, None)]) == [
        "- ratio above 1.0 (benchd slower than the reference): none"]


def benchd_jobs(daemon):
    """Every job of the daemon, oldest first, as `benchctl list --json` gives it."""
    listed = subprocess.run([os.path.join(BIN, "benchctl"), "list", "--limit", "100", "--json"],
                            capture_output=True, text=True, check=True,
                            env={**os.environ, "BENCHD_ADDRESS": daemon.address}).stdout
    return sorted(json.loads(listed)["jobs"], key=lambda j: int(j["id"]))


@pytest.mark.parametrize("resident", [False, True])
def test_cpu_run(daemon, resident):
    """The whole script on the CPU: reference, benchd through benchctl, the table
    with its new columns ("-" without a GPU profile) and the summary. With
    --resident, benchd's model stays between a row's rounds."""
    daemon.wait_worker_up()
    r = subprocess.run(
        [sys.executable, SCRIPT, "--device", "cpu", "--presets", "tiny", "--modes", "forward", "train_step",
         "--precisions", "fp32", "--steps", "2", "--warmup-steps", "1", "--context-length", "32",
         "--rounds", "2", "--benchctl", os.path.join(BIN, "benchctl")] + (["--resident"] if resident else []),
        capture_output=True, text=True, timeout=600, env={**os.environ, "BENCHD_ADDRESS": daemon.address})
    assert r.returncode == 0, (r.stdout, r.stderr, daemon.log())
    lines = r.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| model"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[5:9] == ["ratio", "reference GPU busy ms", "benchd GPU busy ms", "bound by"]
    rows = [line for line in lines if line.startswith("| tiny")]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == len(cols)
        ratio, rounds = cells[5].split(" ", 1)  # the pooled ratio, then the 2 rounds' range
        float(ratio)  # both sides ran
        lo, hi = (float(v) for v in rounds.strip("()").split("–"))
        assert lo <= hi
        assert cells[6:9] == ["-", "-", "-"]  # busy times are measured on a GPU only
    assert lines[-1].startswith("- ratio above 1.0")
    assert ("on resident models" in lines[0]) == resident
    jobs = benchd_jobs(daemon)
    assert [j["state"] for j in jobs] == ["JOB_STATE_SUCCEEDED"] * 4  # 2 rows x 2 rounds
    # Each row's second round found the model resident only with --resident;
    # each row starts with nothing resident either way.
    was_resident = [j["result"]["benchmark"].get("modelWasResident", False) for j in jobs]
    assert was_resident == ([False, True, False, True] if resident else [False] * 4)


def test_benchd_busy(compare, daemon, monkeypatch):
    """benchd's side of the busy column: a real profile job of the step, read
    from its `step` range (on a CPU worker: operator self times, so this checks
    the job and the reading, not a GPU's numbers)."""
    daemon.wait_worker_up()
    monkeypatch.setenv("BENCHD_ADDRESS", daemon.address)
    args = argparse.Namespace(benchctl=os.path.join(BIN, "benchctl"), device="cpu", batch_size=2,
                              context_length=16, benchd_flags="")
    seconds, kernels = compare.benchd_busy(args, "tiny", "forward", "fp32")
    assert seconds > 0 and kernels >= 1, (seconds, kernels)
    job = benchd_jobs(daemon)[-1]
    assert job["state"] == "JOB_STATE_SUCCEEDED" and "profile" in job["result"]
    # A profile the daemon refuses is no busy time, not a crash: cuda_graph has no ranges.
    args.benchd_flags = "--cuda-graph"
    assert compare.benchd_busy(args, "tiny", "forward", "fp32") == (None, None)
