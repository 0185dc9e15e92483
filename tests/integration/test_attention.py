"""The attention request (CS336 pytorch_attention) through a real CPU daemon
and benchctl: one cell's table and exact figures, refusals naming the field,
and a cell that really runs out of memory failing with RESOURCE_EXHAUSTED
while the worker goes on."""
import json
import os

import pytest

from conftest import BIN, bench_pb2, load_bench_script

SMALL = ["--device", "cpu:0", "--batch-size", "2", "--seq-len", "64", "--head-dim", "16",
         "--warmup", "1", "--passes", "3"]


def kernel_refuses(nbytes):
    """Whether the kernel refuses one allocation of nbytes outright (heuristic
    or strict overcommit, past RAM + swap), as worker/host_memory_test_util.h."""
    with open("/proc/sys/vm/overcommit_memory") as f:
        mode = int(f.read())
    if mode not in (0, 2):
        return False
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            name, kb = line.split()[:2]
            if name in ("MemTotal:", "SwapTotal:"):
                total += int(kb) * 1024
    return total < nbytes


def test_the_tiled_algorithm_through_benchctl(daemon):
    """FlashAttention-2's tiled algorithm (ATen ops) runs as an implementation
    of the request, causal on a length that is not a multiple of its tiles."""
    args = ["--device", "cpu:0", "--batch-size", "2", "--seq-len", "100", "--head-dim", "16",
            "--heads", "2", "--warmup", "1", "--passes", "2", "--causal"]
    r = daemon.benchctl("submit", "attention", *args, "--impl", "flash_attention_2", "--watch",
                        "--json", check=0)
    job = json.loads(r.stdout)
    assert job["state"] == "JOB_STATE_SUCCEEDED", r.stdout
    res = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job["id"])).result.attention
    assert res.spec.implementation == bench_pb2.ATTENTION_IMPL_TILED and res.spec.causal
    assert res.forward.count == 2 and res.backward.count == 2 and res.backward.median > 0
    r = daemon.benchctl("submit", "attention", *args, "--impl", "tiles", check=2)
    assert "--impl: unknown value 'tiles'" in r.stderr and "tiled or fused" in r.stderr, r.stderr


def test_a_cell_through_benchctl(daemon):
    r = daemon.benchctl("submit", "attention", *SMALL, "--causal", "--impl", "faithful",
                        "--watch", check=0)
    for column in ("forward ms", "backward ms", "saved MiB", "peak MiB", "score MiB (formula)",
                   "fwd TFLOP/s", "bwd TFLOP/s"):
        assert column in r.stdout, r.stdout
    assert "faithful causal" in r.stdout and "not measured (unavailable on cpu)" in r.stdout

    r = daemon.benchctl("submit", "attention", *SMALL, "--impl", "math", "--precision", "bf16",
                        "--heads", "2", "--watch", "--json", check=0)
    job = json.loads(r.stdout)
    assert job["kind"] == "JOB_KIND_ATTENTION" and job["state"] == "JOB_STATE_SUCCEEDED"
    got = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job["id"]))
    res = got.result.attention
    # The spec as it ran, defaults written out.
    assert res.spec.implementation == bench_pb2.ATTENTION_IMPL_SDPA_MATH
    assert res.spec.precision == bench_pb2.PRECISION_BF16 and res.spec.num_heads == 2
    assert res.spec.passes == 3 and res.spec.warmup_passes == 1 and not res.spec.causal
    assert [p.warmup for p in res.passes] == [True, False, False, False]
    assert res.forward.count == 3 and res.backward.count == 3
    assert all(p.forward_seconds > 0 and p.backward_seconds > 0 for p in res.passes)
    measured = sorted(p.forward_seconds for p in res.passes if not p.warmup)
    assert res.forward.median == measured[1]
    flops = 4 * 2 * 2 * 64 * 64 * 16
    assert res.forward_flops == flops and res.backward_flops == 2 * flops
    assert abs(res.forward_tflops_per_second - flops / res.forward.median / 1e12) < 1e-12
    assert res.score_matrix_bytes == 2 * 2 * 64 * 64 * 2
    assert res.memory_source == "unavailable on cpu" and res.peak_pass_bytes == 0
    assert res.timer == "host_steady_clock" and res.device == "cpu:0"

    # get --csv: one row per pass.
    r = daemon.benchctl("get", job["id"], "--csv", check=0)
    assert len(r.stdout.strip().splitlines()) == 1 + 4

    # list --kind attention finds both.
    r = daemon.benchctl("list", "--kind", "attention", "--json", check=0)
    assert len(json.loads(r.stdout)["jobs"]) == 2


@pytest.mark.parametrize("flags, message", [
    (["--impl", "efficient"], "attention.implementation: the efficient SDPA backend is a CUDA "
                              "kernel and cpu:0 is a CPU"),
    (["--impl", "fused", "--precision", "bf16"],
     "attention.implementation: fused is benchd's FlashAttention-2 CUDA kernels and cpu:0 is a CPU"),
    (["--memory-cap", "1GiB"], "attention.memory_cap_bytes: a cap is the CUDA caching allocator"),
    (["--seq-len", "0"], "attention.seq_len: expected 1..1048576, got 0"),
    (["--seq-len", "1048576", "--batch-size", "64"], "attention.seq_len: one score matrix"),
    (["--impl", "fastest"], "--impl: unknown value 'fastest'"),
])
def test_bad_input_names_the_field(daemon, flags, message):
    r = daemon.benchctl("submit", "attention", "--device", "cpu:0", *flags, check=2)
    assert message in r.stderr, r.stderr


def test_a_cell_that_does_not_fit_fails_and_the_worker_goes_on(daemon):
    # One 2^17 x 2^17 fp32 score matrix is 64 GiB (at the request limit): the
    # CPU allocator really fails, no simulation.
    if not kernel_refuses(64 << 30):
        pytest.skip("this kernel's overcommit policy would grant 64 GiB")
    r = daemon.benchctl("submit", "attention", "--device", "cpu:0", "--batch-size", "1",
                        "--seq-len", "131072", "--head-dim", "16", "--warmup", "0", "--passes",
                        "1", "--watch", "--json", check=1)
    job = json.loads(r.stdout)
    assert job["state"] == "JOB_STATE_FAILED" and job["errorCode"] == 8, job
    assert "out of memory on cpu:0" in job["errorMessage"]
    assert "one score matrix is 64.00 GiB" in job["errorMessage"]
    daemon.benchctl("submit", "attention", *SMALL, "--watch", check=0)


def test_the_grid_script_writes_one_row_per_cell(daemon, tmp_path):
    grid = load_bench_script("attention_grid")
    rc = grid.main(["--benchctl", os.path.join(BIN, "benchctl"), "--address", daemon.address,
                    "--device", "cpu:0", "--out", str(tmp_path), "--batch", "2", "--dims", "16",
                    "--seqs", "32,64", "--impls", "faithful,efficient", "--precisions", "fp32",
                    "--warmup", "1", "--passes", "2", "--big-seq", "64", "--big-warmup", "0",
                    "--big-passes", "1"])
    assert rc == 0
    lines = (tmp_path / "attention.md").read_text().splitlines()
    assert lines[0].startswith("| batch | d | seq | impl | precision | status | forward ms |")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [(r[2], r[3], r[5]) for r in rows] == [
        ("32", "faithful", "ok"), ("32", "efficient", "refused"),
        ("64", "faithful", "ok"), ("64", "efficient", "refused")]
    assert "efficient SDPA backend is a CUDA kernel" in rows[1][-1]
    assert rows[0][8] == "n/a"  # no allocator to ask on a CPU
    assert rows[0][11] == f"{2 * 32 * 32 * 4 / (1 << 20):.1f}"  # the score matrix by formula
    assert rows[0][-1].endswith("2 passes") and rows[2][-1].endswith("1 passes")
    jobs = json.loads((tmp_path / "attention-jobs.json").read_text())
    assert len(jobs) == 2 and all(j["kind"] == "JOB_KIND_ATTENTION" for j in jobs)
