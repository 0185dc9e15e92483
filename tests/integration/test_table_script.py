"""bench/table.py, the CS336 table's one command: a whole run on the CPU
against a real daemon (both engines), and its cells for jobs that did not
succeed."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import BIN, SRC, load_bench_script

SCRIPT = os.path.join(SRC, "bench", "table.py")
MS = r"\d+\.\d\d ± \d+\.\d\d"


@pytest.fixture(scope="module")
def table():
    return load_bench_script("table")


def test_cells_of_jobs_that_did_not_succeed(table):
    assert table.cell({"state": "JOB_STATE_FAILED", "errorCode": 8}) == "OOM"  # RESOURCE_EXHAUSTED
    assert table.cell({"state": "JOB_STATE_FAILED", "errorCode": 13}) == "failed"
    assert table.cell({"state": "JOB_STATE_CANCELLED"}) == "cancelled"
    ok = {"state": "JOB_STATE_SUCCEEDED", "result": {"benchmark": {"step": {"median": 0.0123, "std": 0.0004}}}}
    assert table.cell(ok) == "12.30 ± 0.40"


def section(lines, title):
    """The table rows under the heading `title` (or `title` and more words)."""
    start = next(i for i, line in enumerate(lines) if line == "## " + title or line.startswith(f"## {title} "))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("| tiny"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


@pytest.mark.parametrize("autograd", [False, True])
def test_cpu_run(daemon, tmp_path, autograd):
    daemon.wait_worker_up()
    out, raw = tmp_path / "table.md", tmp_path / "jobs.json"
    r = subprocess.run(
        [sys.executable, SCRIPT, "--benchctl", os.path.join(BIN, "benchctl"), "--device", "cpu:0",
         "--presets", "tiny", "--contexts", "16", "32", "--precisions", "fp32", "--steps", "2",
         "--warmup-steps", "1", "--out", str(out), "--json", str(raw)]
        + (["--benchd-flags=--autograd", "--regenerate", "scripts/gpu-table.sh"] if autograd else []),
        capture_output=True, text=True, timeout=600, env={**os.environ, "BENCHD_ADDRESS": daemon.address})
    assert r.returncode == 0, (r.stdout, r.stderr, daemon.log())
    text = out.read_text()
    assert r.stdout.endswith(text + "\n")  # the table is also printed
    lines = text.splitlines()
    header = lines[2]
    assert "Batch 4, 1 warm-up and 2 measured steps" in header
    assert ("through LibTorch's autograd engine" in header) == autograd
    assert ("explicit backward (benchd's own" in header) == (not autograd)
    # The command that made it: as run, or as the wrapper script names it.
    regenerate = [line for line in lines if line.startswith("Regenerate: ")]
    assert regenerate == (["Regenerate: `scripts/gpu-table.sh`"] if autograd else regenerate[:1])
    assert autograd or regenerate[0].startswith("Regenerate: `bench/table.py --benchctl ")
    truth = next(line for line in lines if line.startswith("CUDA events vs host clock"))
    assert re.search(r": \d of 6 benchmarks agree within 2%", truth)  # 2 contexts x 3 modes
    # The row with the largest gap, named as a reader names it.
    assert re.search(r"the largest gap is \d+\.\d\d% \(tiny (forward|forward_backward|train_step) fp32, "
                     r"context (16|32)\)\.$", truth), truth
    for mode in ("forward", "forward_backward", "train_step"):
        rows = section(lines, mode)
        assert [row[:2] for row in rows] == [["tiny", "16"], ["tiny", "32"]], mode
        assert all(re.fullmatch(MS, row[2]) for row in rows), rows
    phases = section(lines, "train_step phases")
    assert len(phases) == 2 and all(re.fullmatch(r"\d+\.\d\d / \d+\.\d\d / \d+\.\d\d", row[2]) for row in phases)
    throughput = section(lines, "Throughput")
    assert len(throughput) == 2
    assert all(re.fullmatch(r"[\d,]+ tok/s, \d+\.\d TF/s, \d+\.\d GiB", row[2]) for row in throughput)
    jobs = json.loads(raw.read_text())
    assert len(jobs) == 6 and all(j["state"] == "JOB_STATE_SUCCEEDED" for j in jobs)
    assert all(j["kind"] == "JOB_KIND_BENCHMARK" and j["devices"] == ["cpu:0"] for j in jobs)
    # The spec each job ran, resolved: which engine ran its steps.
    assert all(j["result"]["benchmark"]["spec"]["autograd"] == autograd for j in jobs)
