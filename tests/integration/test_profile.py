"""The profile request on a CPU worker: named ranges with CPU operators as rows,
tables that add up, a Chrome trace served as an artifact."""
import json
import os

import grpc
import pytest

from conftest import bench_pb2

TINY = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16"]
PARTS = ["attention.scores", "attention.mask", "attention.softmax", "attention.weighted_sum"]


def profile(daemon, *args):
    r = daemon.benchctl("submit", "profile", *TINY, "--json", *args, check=0)
    job_id = json.loads(r.stdout)["id"]
    w = daemon.benchctl("watch", job_id, check=0)
    job = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (w.stdout, w.stderr, job.error_message)
    return job


def test_train_step_ranges_add_up(daemon):
    job = profile(daemon, "--mode", "train_step", "--warmup-steps", "1", "--steps", "3",
                  "--profile-steps", "2")
    r = job.result.profile
    assert r.kernel_source == "cpu_operator_self_time"
    # The request as it ran: the activities written out for a CPU worker.
    assert list(r.spec.activities) == [bench_pb2.PROFILER_ACTIVITY_CPU]
    assert r.spec.profile_steps == 2 and r.device == "cpu:0"
    assert r.spec.step.mode == bench_pb2.BENCHMARK_MODE_TRAIN_STEP and r.spec.step.batch_size == 2
    assert r.spec.step.autograd == r.unprofiled.spec.autograd
    ranges = {x.name: x for x in r.ranges}
    assert r.ranges[0].name == "step"
    for name in ["step", "forward", "backward", "optimizer_step", "attention"] + PARTS:
        assert name in ranges, (name, list(ranges))
    # Where each range sits, and how often it ran: 2 steps, 2 layers.
    assert ranges["forward"].parent == "step" and ranges["attention"].parent == "forward"
    assert all(ranges[p].parent == "attention" for p in PARTS)
    assert ranges["step"].instances == 2 and ranges["forward"].instances == 2
    assert ranges["attention"].instances == 4 and ranges["attention.softmax"].instances == 4

    for x in r.ranges:
        assert x.kernels, x.name
        total = sum(k.total_seconds for k in x.kernels)
        assert abs(sum(k.time_percent for k in x.kernels) - 100) < 1e-6, x.name
        assert abs(total - x.kernel_seconds) <= 1e-9 + 1e-9 * total, x.name
        assert x.kernel_count == sum(k.instances for k in x.kernels)
        # Operators' self times never exceed the range's host time.
        assert 0 < x.kernel_seconds <= x.wall_seconds * 1.0001, x.name
        assert abs(x.idle_seconds - (x.wall_seconds - x.kernel_seconds)) < 1e-9
        assert abs(x.kernel_seconds_per_step * 2 - x.kernel_seconds) < 1e-12
        for k in x.kernels:
            assert k.min_seconds <= k.med_seconds <= k.max_seconds
            assert abs(k.total_seconds_per_step * 2 - k.total_seconds) < 1e-12
    # A range holds what its inner ranges hold.
    assert ranges["step"].kernel_seconds >= (ranges["forward"].kernel_seconds +
                                             ranges["backward"].kernel_seconds +
                                             ranges["optimizer_step"].kernel_seconds) * 0.9999
    assert ranges["attention"].kernel_seconds >= sum(ranges[p].kernel_seconds for p in PARTS) * 0.9999

    # GEMMs are the matmul operators; softmax has none.
    fwd_rows = {k.name: k for k in ranges["forward"].kernels}
    assert fwd_rows["aten::mm"].gemm and not fwd_rows["aten::exp"].gemm
    assert 0 < ranges["forward"].gemm_fraction < 1
    assert ranges["attention.softmax"].gemm_seconds == 0
    assert {"aten::exp", "aten::sum", "aten::div"} <= {k.name for k in ranges["attention.softmax"].kernels}
    assert ranges["attention.scores"].gemm_fraction > 0
    # The backward ran through the autograd engine, its functions in the range.
    assert any(k.gemm for k in ranges["backward"].kernels)

    # FLOPs: batch 2, context 16, d_model 64, 4 heads, 2 layers.
    B, T, d, H, L = 2, 16, 64, 4, 2
    assert ranges["attention.softmax"].flops_per_step == 5 * B * H * T * T * L
    assert ranges["attention.weighted_sum"].flops_per_step == 2 * B * T * T * d * L
    assert ranges["backward"].flops_per_step == 2 * ranges["forward"].flops_per_step
    assert ranges["optimizer_step"].flops_per_step == 0

    # The same step without the profiler, next to the profiled one.
    assert r.unprofiled_step.count == 3 and r.profiled_step.count == 2
    assert r.unprofiled.step.median == r.unprofiled_step.median
    assert abs(r.profiler_overhead - r.profiled_step.median / r.unprofiled_step.median) < 1e-9


def test_trace_is_an_artifact_with_the_ranges(daemon, tmp_path):
    job = profile(daemon, "--profile-steps", "1", "--record-shapes")
    r = job.result.profile
    assert r.trace_artifact == "trace.json" and list(r.artifacts) == ["trace.json"]
    assert r.spec.record_shapes

    listed = daemon.stub.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=job.id))
    assert [a.name for a in listed.artifacts] == ["trace.json"]
    size = listed.artifacts[0].size_bytes
    assert size > 0 and listed.artifacts_dir.endswith("/artifacts/" + job.id)

    # Streamed in order, the size in every chunk, and the same bytes as benchctl writes.
    chunks = list(daemon.stub.FetchArtifact(
        bench_pb2.FetchArtifactRequest(job_id=job.id, name="trace.json")))
    data = b"".join(c.data for c in chunks)
    assert len(data) == size and all(c.total_bytes == size for c in chunks)
    assert [c.offset for c in chunks] == [sum(len(x.data) for x in chunks[:i]) for i in range(len(chunks))]
    out = tmp_path / "t.json"
    daemon.benchctl("artifacts", "get", job.id, "trace.json", "-o", str(out), check=0)
    assert out.read_bytes() == data
    trace = json.loads(data)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"step", "forward", "attention.softmax", "aten::mm"} <= names
    annotations = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"forward", "attention.scores"} <= annotations

    lst = daemon.benchctl("artifacts", "list", job.id, check=0)
    assert "trace.json" in lst.stdout


def test_fetch_refusals(daemon):
    job = profile(daemon, "--profile-steps", "1")
    s = daemon.stub
    cases = [
        (dict(job_id=job.id, name="../benchd.sqlite3"), grpc.StatusCode.INVALID_ARGUMENT, "name"),
        (dict(job_id=job.id, name="nope.json"), grpc.StatusCode.NOT_FOUND, "has trace.json"),
        (dict(job_id="999999", name="trace.json"), grpc.StatusCode.NOT_FOUND, "999999"),
        (dict(job_id="", name="trace.json"), grpc.StatusCode.INVALID_ARGUMENT, "job_id"),
    ]
    for req, code, text in cases:
        with pytest.raises(grpc.RpcError) as e:
            list(s.FetchArtifact(bench_pb2.FetchArtifactRequest(**req)))
        assert e.value.code() == code and text in e.value.details(), (req, e.value.details())
    with pytest.raises(grpc.RpcError) as e:
        s.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id="999999"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    r = daemon.benchctl("artifacts", "get", job.id, "nope.json", check=4)
    assert "has trace.json" in r.stderr
    assert not os.path.exists("nope.json") and not os.path.exists("nope.json.part")


def test_profile_refusals(daemon):
    r = daemon.benchctl("submit", "profile", *TINY, "--activities", "cpu,cuda", check=None)
    assert r.returncode != 0 and "cuda needs a CUDA device" in r.stderr, r.stderr
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(profile=bench_pb2.ProfileSpec(
            step=bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny")), with_stack=True))))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "with_stack" in e.value.details()
    r = daemon.benchctl("submit", "profile", *TINY, "--cuda-graph", check=2)
    assert "--cuda-graph" in r.stderr


def test_benchctl_profile_prints_the_tables(daemon):
    r = daemon.benchctl("submit", "profile", "--watch", *TINY, "--profile-steps", "1", "--top", "3",
                        check=0)
    out = r.stdout
    assert "Ranges, per step" in out and "attention.softmax" in out
    assert "Attention parts in the forward pass" in out
    for col in ["Time %", "Total ms", "Instances", "Avg us", "Med us", "Min us", "Max us",
                "StdDev us", "Name"]:
        assert col in out, col
    assert "unprofiled median" in out and "trace.json" in out
