"""The memory request against the real daemon on a CPU-only node: it is refused
cleanly (FAILED_PRECONDITION, nothing queued), bad input is named before that,
and the parts that need no GPU are checked: the snapshot fixture that the C++
parser, analysis and timeline are unit-tested on is reproducible and is read by
PyTorch's own memory_viz (stats and trace_plot) as a real snapshot is."""
import json
import os
import subprocess
import sys

import grpc
import pytest

from conftest import SRC, bench_pb2

FIXTURE = os.path.join(SRC, "tests/fixtures/memory")


def memory_spec(**kw):
    step = bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny"))
    return bench_pb2.JobSpec(memory=bench_pb2.MemorySpec(step=step, **kw))


def test_refused_on_cpu_with_failed_precondition(daemon):
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=memory_spec()), timeout=10)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "memory: needs a CUDA device" in e.value.details()
    assert "cpu:0" in e.value.details()
    # Refused, not queued: no job was stored.
    jobs = daemon.stub.ListJobs(bench_pb2.ListJobsRequest(), timeout=10).jobs
    assert [j for j in jobs if j.kind == bench_pb2.JOB_KIND_MEMORY] == []
    # The daemon and its worker still serve.
    assert daemon.wait_worker_up().worker_state == bench_pb2.WORKER_STATE_UP


def test_benchctl_memory_on_cpu(daemon):
    r = daemon.benchctl("submit", "memory", "--preset", "tiny", "--mode", "train_step",
                        "--contexts", "64,128", "--precisions", "fp32,bf16", check=4)
    assert "FAILED_PRECONDITION: memory: needs a CUDA device" in r.stderr, r.stderr
    assert "cpu:0" in r.stderr


@pytest.mark.parametrize("args,expected", [
    (["--record-steps", "0"], "memory.record_steps: expected 1..100, got 0"),
    (["--max-entries", "5"], "memory.max_entries"),
    (["--top", "0"], "memory.top_allocations"),
    (["--stacks", "python"], "no Python interpreter"),
    (["--stacks", "java"], "--stacks: unknown value 'java'"),
    (["--contexts", "128,x"], "--contexts"),
    (["--contexts", "0"], "--contexts"),
    (["--modes", "forward,sideways"], "--modes: unknown mode 'sideways'"),
    (["--precisions", "fp8"], "--precisions"),
    (["--steps", "3"], "--steps"),
    (["--cuda-graph"], "--cuda-graph"),
    (["--batch-size", "0"], "memory.step.batch_size"),
    (["--preset", "huge"], "memory.step.model.preset"),
    (["--mode", "forward", "--optimizer", "fused"], "memory.step.optimizer_impl"),
    (["--mode", "train_step", "--optimizer", "fused", "--modes", "train_step,forward"],
     "memory (run ctx128-forward-fp32): benchmark.optimizer_impl"),
])
def test_bad_input_is_named_before_the_device_check(daemon, args, expected):
    base = [] if "--preset" in args else ["--preset", "tiny"]
    r = daemon.benchctl("submit", "memory", *base, *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert expected in r.stderr, r.stderr


def test_grpc_bad_sweep_values(daemon):
    for kw, field in [({"modes": [9]}, "memory.modes[0]"),
                      ({"precisions": [0]}, "memory.precisions[0]"),
                      ({"context_lengths": [128, -1]}, "memory.context_lengths[1]"),
                      ({"context_lengths": list(range(16, 16 * 23, 16)), "modes": [1, 3],
                        "precisions": [1, 2]}, "at most 64")]:
        with pytest.raises(grpc.RpcError) as e:
            daemon.stub.Submit(bench_pb2.SubmitRequest(spec=memory_spec(**kw)), timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, kw
        assert field in e.value.details(), e.value.details()


def test_fixture_is_reproducible(tmp_path):
    subprocess.run([sys.executable, os.path.join(FIXTURE, "make_snapshot.py"), "--out",
                    str(tmp_path)], check=True, capture_output=True)
    for name in ("snapshot.pickle", "expected.json"):
        with open(os.path.join(FIXTURE, name), "rb") as a, open(tmp_path / name, "rb") as b:
            assert a.read() == b.read(), f"{name} differs from what make_snapshot.py writes"


def test_memory_viz_reads_the_fixture(tmp_path):
    pytest.importorskip("torch")
    path = os.path.join(FIXTURE, "snapshot.pickle")
    with open(os.path.join(FIXTURE, "expected.json")) as f:
        expected = json.load(f)
    stats = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", path],
                           capture_output=True, text=True)
    assert stats.returncode == 0, stats.stderr
    # Its accounting agrees with ours: the segments never shrink in the fixture,
    # so what they reserve at the end is the peak reserved.
    mib = expected["peak_reserved"] / (1 << 20)
    assert f"total_reserved: {mib:.1f}MiB" in stats.stdout, stats.stdout
    html = tmp_path / "timeline.html"
    plot = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", path,
                           "-o", str(html)], capture_output=True, text=True)
    assert plot.returncode == 0, plot.stderr
    assert "Active Memory Timeline" in html.read_text()


def test_memory_table_markdown(tmp_path):
    from google.protobuf import json_format
    job = bench_pb2.Job(id="12", state=bench_pb2.JOB_STATE_SUCCEEDED)
    r = job.result.memory
    r.spec.step.model.preset = "small"
    r.parameter_count = 128625408
    r.device = "cuda:0"
    ok = r.runs.add(name="ctx128-train_step-bf16",
                    step=bench_pb2.BenchmarkSpec(mode=bench_pb2.BENCHMARK_MODE_TRAIN_STEP,
                                                 precision=bench_pb2.PRECISION_BF16, batch_size=4,
                                                 context_length=128),
                    peak_allocated_bytes=3 << 30, peak_reserved_bytes=4 << 30,
                    baseline_allocated_bytes=2 << 30, allocator_peak_allocated_bytes=3 << 30,
                    activation_bytes=4 * 128 * 768 * 2)
    ok.phases.add(name="forward", peak_allocated_bytes=5 << 29)
    ok.largest_allocations.add(size_bytes=150 << 20, phase="forward", count=2,
                               origin="transformer.cc:182:benchd::worker::TransformerLMImpl::forward")
    r.runs.add(name="ctx512-train_step-fp32",
               step=bench_pb2.BenchmarkSpec(mode=bench_pb2.BENCHMARK_MODE_TRAIN_STEP,
                                            precision=bench_pb2.PRECISION_FP32, context_length=512),
               out_of_memory=True,
               oom_allocated_bytes=79 << 30, oom_reserved_bytes=79 << 30,
               oom_device_total_bytes=80 << 30, oom_device_free_bytes=1 << 29)
    path = tmp_path / "job.json"
    # As benchctl get --json prints it: lowerCamelCase names, int64 as strings.
    path.write_text(json_format.MessageToJson(job))
    out = subprocess.run([sys.executable, os.path.join(SRC, "bench/memory_table.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout
    assert "| 128 | train_step | bf16 | 3.00 GiB | 4.00 GiB | 2.00 GiB | 2.50 GiB | - | - | 0.8 MiB |" in out, out
    assert "| 512 | train_step | fp32 | 79.00 GiB | 79.00 GiB | - |" in out, out
    assert "OOM: allocated 79.00 GiB, reserved 79.00 GiB, device free 512.0 MiB of 80.00 GiB" in out
    assert "150.0 MiB x2 in forward at transformer.cc:182" in out


def test_libtorch_pickler_bytes_and_our_svg_are_read_by_python_tools(tmp_path):
    """worker_test writes a snapshot pickled by LibTorch's own Pickler (as
    _memory_snapshot_pickled does) and the timeline SVG of the fixture:
    memory_viz must read the first, an XML parser the second."""
    pytest.importorskip("torch")
    from conftest import BIN
    worker_test = os.path.join(BIN, "worker_test")
    if not os.path.exists(worker_test):
        pytest.skip("worker_test not built")
    env = dict(os.environ, BENCHD_TEST_OUTPUT=str(tmp_path))
    r = subprocess.run([worker_test, "--gtest_filter=MemorySnapshotTest.ReadsWhatLibTorchsPicklerWrites:"
                        "MemorySnapshotTest.TimelineOfTheFixture"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    pickled = tmp_path / "torch-pickler-snapshot.pickle"
    stats = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(pickled)],
                           capture_output=True, text=True)
    assert stats.returncode == 0, stats.stderr
    assert "total_reserved: 20.0MiB" in stats.stdout, stats.stdout
    plot = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(pickled),
                           "-o", str(tmp_path / "p.html")], capture_output=True, text=True)
    assert plot.returncode == 0, plot.stderr
    import xml.etree.ElementTree as ET
    svg = ET.parse(tmp_path / "fixture-timeline.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    polygons = svg.findall("{http://www.w3.org/2000/svg}polygon")
    assert len(polygons) == 41  # 40 largest allocations + the summed band
    assert all(p.find("{http://www.w3.org/2000/svg}title") is not None for p in polygons)
