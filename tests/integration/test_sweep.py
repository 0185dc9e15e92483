"""Sweeps of any request (JobSpec.sweep) against a real daemon and a real CPU
worker: the product run in order as one job, a row per cell streamed as it
ends, a cell past its time limit as a TIMEOUT row, a cell too large for the
machine as an OUT_OF_MEMORY row (the worker's real allocation failure), the
derived columns checked against the cells' own results, and benchctl's pivot
and CSV; an attention sweep's table, CSV, pivot and Python to_pandas() with
the attention's own figures."""
import csv
import io
import json
import os
import re
import subprocess
import tempfile

import grpc
import pytest

from conftest import SRC, bench_pb2

TINY = ["--preset", "tiny", "--batch-size", "2", "--warmup-steps", "1", "--steps", "3"]


def get(daemon, job_id):
    return daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id), timeout=30)


def test_precision_by_context_sweep_streams_rows_and_pivots(daemon):
    r = daemon.benchctl("submit", "benchmark", *TINY, "--mode", "train_step",
                        "--sweep", "precision=fp32,bf16,fp16", "--sweep", "context_length=16,32",
                        "--watch", "--pivot", "context_length,precision", check=None)
    job_id = r.stderr.split("submitted benchmark job ")[1].split()[0]
    job = get(daemon, job_id)
    sweep = job.result.sweep
    assert list(sweep.fields) == ["precision", "context_length"]
    assert sweep.cells_total == 6 and len(sweep.cells) == 6
    values = [tuple(c.values) for c in sweep.cells]
    assert values == [("fp32", "16"), ("fp32", "32"), ("bf16", "16"), ("bf16", "32"),
                      ("fp16", "16"), ("fp16", "32")]
    # Each finished cell was a line of the watch, in order.
    lines = [l for l in r.stderr.splitlines() if l.startswith("cell ")]
    assert [l.split(":")[0] for l in lines] == [
        "cell 1/6 fp32 16", "cell 2/6 fp32 32", "cell 3/6 bf16 16", "cell 4/6 bf16 32",
        "cell 5/6 fp16 16", "cell 6/6 fp16 32"], r.stderr
    # fp32 and bf16 run on a CPU worker (bf16 under CPU autocast); fp16 runs
    # too with torch 2.11's CPU autocast (much slower than fp32 there), but
    # whatever a torch does with it, it is a row, never a lost job.
    fp32 = {c.values[1]: c for c in sweep.cells if c.values[0] == "fp32"}
    for c in sweep.cells:
        ctx = int(c.values[1])
        assert c.spec.benchmark.context_length == ctx
        assert c.spec.benchmark.precision == {"fp32": 1, "bf16": 2, "fp16": 3}[c.values[0]]
        assert not c.spec.HasField("sweep")
        if c.values[0] in ("fp32", "bf16"):
            assert c.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OK, c.error_message
        if c.outcome != bench_pb2.SWEEP_CELL_OUTCOME_OK:
            assert c.outcome == bench_pb2.SWEEP_CELL_OUTCOME_FAILED and c.error_message
            continue
        b = c.result.benchmark
        assert b.spec.context_length == ctx and b.spec.batch_size == 2  # resolved
        assert b.step.count == 3
        # The derived columns are the cell's own figures.
        assert c.median_step_seconds == b.step.median
        assert abs(c.tokens_per_second - 2 * ctx / b.step.median) / c.tokens_per_second < 1e-9
        assert abs(c.speedup_vs_fp32 - fp32[c.values[1]].median_step_seconds / b.step.median) < 1e-12
        assert abs(c.forward_share - b.forward.mean / b.step.mean) < 1e-12
        assert abs(c.backward_share - b.backward.mean / b.step.mean) < 1e-12
        assert abs(c.optimizer_share - b.optimizer.mean / b.step.mean) < 1e-12
        assert 0.5 < c.forward_share + c.backward_share + c.optimizer_share <= 1.0 + 1e-9
        # The daemon's clock around the cell holds every step the worker timed
        # (3 x the median need not: steps vary on a loaded CPU).
        assert c.wall_seconds > sum(st.step_seconds for st in b.steps)
    assert all(c.speedup_vs_fp32 == 1.0 for c in fp32.values())
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED and r.returncode == 0, r.stderr

    # The pivot: rows context, columns precision, median step ms.
    assert "median_step_ms by context_length and precision" in r.stdout, r.stdout
    g = daemon.benchctl("get", job_id, "--pivot", "context_length,precision", "--csv", check=0)
    rows = list(csv.reader(io.StringIO(g.stdout)))
    assert rows[0] == ["context_length\\precision", "fp32", "bf16", "fp16"]
    assert [row[0] for row in rows[1:]] == ["16", "32"]
    for row in rows[1:]:
        for precision, text in zip(rows[0][1:], row[1:]):
            cell = next(c for c in sweep.cells if list(c.values) == [precision, row[0]])
            if cell.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OK:
                assert float(text) == pytest.approx(cell.median_step_seconds * 1e3, rel=1e-12)
            else:
                assert text == "FAILED"
    # One CSV row per cell, and the view of `get` has the table.
    c = daemon.benchctl("get", job_id, "--csv", check=0)
    table = list(csv.DictReader(io.StringIO(c.stdout)))
    assert [(t["precision"], t["context_length"]) for t in table] == values
    assert float(table[2]["speedup_vs_fp32"]) == sweep.cells[2].speedup_vs_fp32
    v = daemon.benchctl("get", job_id, check=0)
    assert "precision=fp32,bf16,fp16 x context_length=16,32 (6 cells)" in v.stdout, v.stdout
    assert "6 of 6 cells ran" in v.stdout


def streamed_cells(daemon, job_id):
    """The sweep_cell events of the job's Watch (benchctl watch --json), in order."""
    w = daemon.benchctl("watch", job_id, "--json")
    events = [json.loads(l) for l in w.stdout.splitlines() if l.strip()]
    return [e.get("sweepCell", e.get("sweep_cell")) for e in events
            if "sweepCell" in e or "sweep_cell" in e]


def test_a_cell_past_its_limit_is_a_timeout_row_and_the_sweep_goes_on(daemon):
    # Cell 0 would run 100,000 steps: cancelled after 5 s; cell 1 then runs
    # on the same worker (it stops the cancelled run at its next step). A
    # job first, so that the worker's roofline peaks (measured once, after
    # the first job's steps) are cached and cell 1 takes milliseconds.
    spec = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1, context_length=8,
        warmup_steps=0))
    first = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    daemon.benchctl("watch", first.id, check=0)
    spec.sweep.axes.add(field="measure_steps", values=["100000", "2"])
    spec.sweep.cell_timeout_seconds = 5
    job = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    streamed = streamed_cells(daemon, job.id)
    assert [s.get("index", 0) for s in streamed] == [0, 1]
    job = get(daemon, job.id)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    timed_out, ok = job.result.sweep.cells
    assert timed_out.outcome == bench_pb2.SWEEP_CELL_OUTCOME_TIMEOUT
    assert timed_out.error_code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert timed_out.error_message == ("still running after its time limit of 5 s "
                                       "(sweep.cell_timeout_seconds); cancelled")
    assert 5 <= timed_out.wall_seconds < 60 and not timed_out.HasField("result")
    assert ok.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OK, ok.error_message
    assert ok.result.benchmark.step.count == 2
    r = job.result.sweep
    assert (r.cells_ok, r.cells_out_of_memory, r.cells_timeout, r.cells_failed) == (1, 0, 1, 0)
    # The timed-out cell's worker answered, so it was kept.
    info = daemon.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
    assert info.devices[0].worker_restarts == 0


def host_memory_bytes():
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) * 1024
    return fields["MemTotal"] + fields.get("SwapTotal", 0)


def test_a_cell_too_large_for_the_machine_is_an_out_of_memory_row(daemon):
    # The d_model 262144 cell needs a 128 GiB embedding (vocab 2^17 x 2^18,
    # fp32) in one allocation, which the kernel refuses at once: the worker's
    # own out-of-memory answer (RESOURCE_EXHAUSTED with the host's figures),
    # the path a CUDA out-of-memory takes. No fake, no cap.
    if host_memory_bytes() > 96 << 30:
        pytest.skip("this machine might grant a 128 GiB allocation")
    spec = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(vocab_size=1 << 17, d_ff=64, num_layers=1, num_heads=4),
        batch_size=1, context_length=8, warmup_steps=0, measure_steps=2))
    spec.sweep.axes.add(field="model.d_model", values=["262144", "64"])
    job = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    assert len(streamed_cells(daemon, job.id)) == 2
    job = get(daemon, job.id)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    oom, ok = job.result.sweep.cells
    assert oom.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OUT_OF_MEMORY, oom.error_message
    assert oom.error_code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert oom.error_message.startswith(
        "out of memory on cpu:0 while building model cpu:0/V131072-d262144-ff64-L1-H4/fp32")
    assert "host memory total" in oom.error_message
    assert oom.spec.benchmark.model.d_model == 262144
    assert ok.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OK, ok.error_message
    assert ok.result.benchmark.spec.model.d_model == 64 and ok.result.benchmark.step.count == 2
    # The pivot shows the OOM cell as such.
    p = daemon.benchctl("get", job.id, "--pivot", "model.d_model,measure_steps", check=None)
    assert p.returncode == 2 and "'measure_steps' is not an axis of the sweep" in p.stderr
    info = daemon.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
    assert info.devices[0].worker_restarts == 0  # the worker served on


def test_bad_sweeps_are_refused_naming_the_field(daemon):
    def refused(spec):
        with pytest.raises(grpc.RpcError) as e:
            daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        return e.value.details()

    base = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny")))
    s = bench_pb2.JobSpec(); s.CopyFrom(base)
    s.sweep.axes.add(field="precision", values=["fp32", "bf17"])
    assert refused(s).startswith(
        "sweep.axes[0].values[1]: 'bf17' is not a value of precision (benchd.v1.Precision); "
        "expected fp32, bf16, fp16")
    s = bench_pb2.JobSpec(); s.CopyFrom(base)
    s.sweep.axes.add(field="context_length", values=["16", "0"])
    assert refused(s) == ("sweep cell 1 (context_length=0): benchmark.context_length: "
                          "expected 1..1048576, got 0")
    s = bench_pb2.JobSpec(); s.CopyFrom(base)
    s.sweep.axes.add(field="attention", values=["cudnn"])
    assert refused(s).startswith("sweep cell 0 (attention=cudnn): benchmark.attention: the cudnn")
    c = bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(devices=["cpu:0", "cpu:1"]))
    c.sweep.axes.add(field="iters", values=["1"])
    assert refused(c).startswith("sweep: a collective request sweeps its own lists")
    # benchctl checks values before any RPC: a usage error naming the flag.
    r = daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--sweep", "mode=walk")
    assert r.returncode == 2, r
    assert "--sweep mode: 'walk' is not a value of mode" in r.stderr
    r = daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--sweep", "precision")
    assert "--sweep: expected FIELD=V1,V2,..." in r.stderr and r.returncode == 2
    assert daemon.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=30).jobs == []


# An attention grid small enough for a shared 2-core CPU (each cell ~10 ms).
ATTENTION = ["--device", "cpu:0", "--batch-size", "2", "--head-dim", "16", "--warmup", "1",
             "--passes", "3"]


def test_an_attention_sweep_shows_the_attentions_figures(daemon):
    r = daemon.benchctl("submit", "attention", *ATTENTION, "--sweep", "seq_len=64,128",
                        "--sweep", "implementation=faithful,math", "--watch",
                        "--pivot", "seq_len,implementation", check=0)
    job_id = re.search(r"submitted attention job (\S+)", r.stderr).group(1)
    job = get(daemon, job_id)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    cells = job.result.sweep.cells
    assert [tuple(c.values) for c in cells] == [("64", "faithful"), ("64", "math"),
                                                ("128", "faithful"), ("128", "math")]
    for c in cells:
        assert c.outcome == bench_pb2.SWEEP_CELL_OUTCOME_OK, c.error_message
        a = c.result.attention
        assert a.spec.seq_len == int(c.values[0]) and a.forward.count == 3
        assert a.forward.median > 0 and a.backward.median > 0 and a.step.median > 0
        assert a.flash_forward_tflops_per_second > 0
    by_values = {tuple(c.values): c.result.attention for c in cells}

    # Each finished cell's line has its forward and backward times and TFLOP/s.
    lines = [l for l in r.stderr.splitlines() if l.startswith("cell ")]
    assert len(lines) == 4, r.stderr
    for line in lines:
        assert re.search(r": ok, fwd [0-9.]+ ms, bwd [0-9.]+ ms, fwd\+bwd [0-9.]+ ms, "
                         r"fwd [0-9.,]+ TFLOP/s, bwd [0-9.,]+ TFLOP/s$", line), line

    # The pivot (default value: forward + backward ms), every entry a number.
    assert "median_step_ms by seq_len and implementation" in r.stdout, r.stdout
    text = r.stdout.split("median_step_ms by seq_len and implementation\n")[1].splitlines()
    assert text[0].split() == ["seq_len\\implementation", "faithful", "math"]
    for row in text[1:3]:
        seq, *values = row.split()
        for impl, v in zip(["faithful", "math"], values):
            ms = by_values[(seq, impl)].step.median * 1e3
            assert float(v) == pytest.approx(ms, rel=0.01, abs=0.006), (seq, impl, v)

    # The CSV: the attention's columns, the cells' own figures, exactly.
    c = daemon.benchctl("get", job_id, "--csv", check=0)
    reader = csv.DictReader(io.StringIO(c.stdout))
    assert reader.fieldnames == [
        "job_id", "index", "seq_len", "implementation", "outcome", "median_forward_s",
        "median_backward_s", "median_step_s", "flash_forward_tflops_per_second",
        "flash_backward_tflops_per_second", "flash_step_tflops_per_second",
        "saved_activation_bytes", "peak_pass_bytes", "saved_by_formula_bytes",
        "score_matrix_bytes", "wall_seconds", "error_code", "error_message"]
    rows = list(reader)
    assert len(rows) == 4
    for row in rows:
        a = by_values[(row["seq_len"], row["implementation"])]
        assert row["outcome"] == "ok"
        assert float(row["median_forward_s"]) == a.forward.median
        assert float(row["median_backward_s"]) == a.backward.median
        assert float(row["median_step_s"]) == a.step.median
        assert float(row["flash_forward_tflops_per_second"]) == a.flash_forward_tflops_per_second
        assert float(row["flash_backward_tflops_per_second"]) == a.flash_backward_tflops_per_second
        assert int(row["score_matrix_bytes"]) == a.score_matrix_bytes > 0
        # A CPU has no allocator to ask: not measured, so empty (not 0).
        assert row["saved_activation_bytes"] == "" and row["peak_pass_bytes"] == ""
        assert float(row["wall_seconds"]) > a.step.median * 3

    # Any of the attention's columns by --value; a benchmark's is refused, listing them.
    p = daemon.benchctl("get", job_id, "--pivot", "implementation,seq_len", "--value",
                        "median_backward_ms", "--csv", check=0)
    pivot = list(csv.reader(io.StringIO(p.stdout)))
    assert pivot[0] == ["implementation\\seq_len", "64", "128"]
    for row in pivot[1:]:
        for seq, v in zip(["64", "128"], row[1:]):
            assert float(v) == pytest.approx(by_values[(seq, row[0])].backward.median * 1e3,
                                             rel=1e-12)
    bad = daemon.benchctl("get", job_id, "--pivot", "seq_len,implementation", "--value",
                          "tokens_per_second", check=2)
    assert ("unknown value column 'tokens_per_second'; expected one of median_forward_ms, "
            "median_backward_ms, median_step_ms, flash_forward_tflops") in bad.stderr, bad.stderr
    v = daemon.benchctl("get", job_id, check=0)
    for header in ("fwd ms", "bwd ms", "fwd+bwd ms", "fwd TFLOP/s", "bwd TFLOP/s"):
        assert header in v.stdout, v.stdout
    assert "4 of 4 cells ran: 4 ok" in v.stdout


PY_CLIENT = os.environ.get("BENCHD_CLIENT_PYTHON",
                           os.path.join(SRC, ".venv-pyclient", "bin", "python"))
ATTENTION_SWEEP_SCRIPT = """
import json, sys
import benchd
with benchd.Client(sys.argv[1], timeout=30) as c:
    job = c.attention(device="cpu:0", batch_size=2, head_dim=16, warmup=1, passes=3,
                      sweep={"seq_len": [64, 128]})
    job.wait(timeout=240, progress=False)
    df = job.result.to_pandas()
    print(json.dumps({"id": job.id, "rows": df.to_dict(orient="records")}))
"""


def test_an_attention_sweep_through_the_python_client(daemon):
    # The package lives in its own venv (tests/CMakeLists.txt: installed
    # here its benchd.v1 stubs would shadow the ones these tests generate).
    if not os.access(PY_CLIENT, os.X_OK):
        pytest.skip(f"no Python client venv at {PY_CLIENT} (scripts/setup.sh makes it)")
    r = subprocess.run([PY_CLIENT, "-c", ATTENTION_SWEEP_SCRIPT, daemon.address],
                       capture_output=True, text=True, timeout=300, cwd=tempfile.gettempdir())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    job = get(daemon, out["id"])
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    rows = out["rows"]
    assert [row["seq_len"] for row in rows] == ["64", "128"]
    for row, cell in zip(rows, job.result.sweep.cells):
        a = cell.result.attention
        assert row["outcome"] == "ok"
        assert row["median_forward_ms"] == pytest.approx(a.forward.median * 1e3, rel=1e-12)
        assert row["median_backward_ms"] == pytest.approx(a.backward.median * 1e3, rel=1e-12)
        assert row["median_step_ms"] == pytest.approx(a.step.median * 1e3, rel=1e-12)
        assert row["flash_forward_tflops"] == pytest.approx(a.flash_forward_tflops_per_second)
        assert row["flash_backward_tflops"] > 0 and row["flash_step_tflops"] > 0
        assert row["wall_seconds"] > 0
