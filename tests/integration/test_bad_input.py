"""Bad input gets INVALID_ARGUMENT naming the field; benchctl exits 2 and says why."""
import time

import grpc
import pytest

from conftest import bench_pb2


@pytest.mark.parametrize("args,field", [
    (["--preset", "huge"], "preset"),
    (["--d-model", "100", "--num-heads", "3", "--d-ff", "64", "--num-layers", "1",
      "--vocab-size", "10"], "num_heads"),
    (["--preset", "tiny", "--batch-size", "-1"], "batch_size"),
    (["--preset", "tiny", "--steps", "-5"], "measure_steps"),
    (["--preset", "tiny", "--warmup-steps", "-1"], "warmup_steps"),
    (["--preset", "tiny", "--steps", "0"], "measure_steps"),
    (["--preset", "tiny", "--batch-size", "0"], "batch_size"),
    (["--preset", "tiny", "--context-length", "-3"], "context_length"),
    (["--preset", "tiny", "--device", "cuda:9"], "device"),
    (["--preset", "tiny", "--device", "gpu"], "device"),
    (["--num-layers", "2"], "vocab_size"),
])
def test_server_refuses_with_field_name(daemon, args, field):
    r = daemon.benchctl("submit", "benchmark", *args, check=2)
    assert field in r.stderr, r.stderr
    assert "benchctl:" in r.stderr


def test_client_refuses_bad_enum_values(daemon):
    r = daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--precision", "fp8", check=2)
    assert "fp8" in r.stderr and "bf16" in r.stderr
    r = daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--mode", "sideways", check=2)
    assert "sideways" in r.stderr


def test_grpc_status_codes(daemon):
    s = daemon.stub
    with pytest.raises(grpc.RpcError) as e:
        s.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec()))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == ("spec: no request kind set; expected one of benchmark, profile, "
                                 "memory, collective, attention, precision, ddp")
    with pytest.raises(grpc.RpcError) as e:
        spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
            model=bench_pb2.ModelConfig(preset="tiny"), precision=42))
        s.Submit(bench_pb2.SubmitRequest(spec=spec))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "precision" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        s.GetJob(bench_pb2.GetJobRequest(job_id="999999"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        s.GetJob(bench_pb2.GetJobRequest(job_id="abc"))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        list(s.Watch(bench_pb2.WatchRequest(job_id="999999")))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    # One job-id rule for every call that takes one, naming the field.
    calls = [lambda: s.GetJob(bench_pb2.GetJobRequest(job_id="j1")),
             lambda: s.CancelJob(bench_pb2.CancelJobRequest(job_id="01")),
             lambda: list(s.Watch(bench_pb2.WatchRequest(job_id="-3"))),
             lambda: s.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id="../1")),
             lambda: list(s.FetchArtifact(bench_pb2.FetchArtifactRequest(job_id="", name="x")))]
    for call in calls:
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.details().startswith("job_id: '") and "is not a job id" in e.value.details()
    # Nothing above hurt the daemon: it still serves.
    assert s.GetNodeInfo(bench_pb2.GetNodeInfoRequest()).devices[0].name == "cpu:0"


def test_unreachable_daemon_exit_code(daemon):
    import subprocess, os
    from conftest import BIN
    r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", "127.0.0.1:1", "--timeout", "2",
                        "list"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "127.0.0.1:1" in r.stderr


def test_health_and_reflection(daemon):
    # grpc.health.v1.Health/Check with an empty request: status SERVING (field 1 = 1)
    # once the worker is up; NOT_SERVING (2) before.
    check = daemon.channel.unary_unary("/grpc.health.v1.Health/Check",
                                       request_serializer=lambda _: b"",
                                       response_deserializer=lambda b: b)
    daemon.wait_worker_up()
    deadline = time.time() + 10
    while check(None, timeout=10) != b"\x08\x01" and time.time() < deadline:
        time.sleep(0.1)
    assert check(None, timeout=10) == b"\x08\x01"
    # Reflection (v1alpha): list_services (field 7, empty string) names our service.
    info = daemon.channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                        request_serializer=lambda _: b"\x3a\x00",
                                        response_deserializer=lambda b: b)
    reply = next(iter(info(iter([None]), timeout=10)))
    assert b"benchd.v1.Bench" in reply


@pytest.mark.parametrize("value,text", [(float("inf"), "inf"), (float("-inf"), "-inf"),
                                        (float("nan"), "nan")])
def test_non_finite_numbers_are_refused_at_submit(daemon, value, text):
    spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny", rope_theta=value)))
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == f"benchmark.model.rope_theta: expected a finite number, got {text}"


@pytest.mark.parametrize("options,field", [
    (dict(cuda_graph=True), "benchmark.cuda_graph: CUDA graphs need a CUDA device"),
    (dict(attention=bench_pb2.ATTENTION_IMPL_SDPA_EFFICIENT, precision=bench_pb2.PRECISION_BF16),
     "benchmark.attention: the"),
    (dict(attention=bench_pb2.ATTENTION_IMPL_SDPA_CUDNN, precision=bench_pb2.PRECISION_BF16),
     "benchmark.attention: the"),
    (dict(attention=bench_pb2.ATTENTION_IMPL_FUSED, precision=bench_pb2.PRECISION_BF16),
     "benchmark.attention: fused is benchd's FlashAttention-2 CUDA kernels"),
])
def test_cuda_only_options_are_refused_at_submit_on_a_cpu(daemon, options, field):
    spec = bench_pb2.JobSpec(device="cpu:0", benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), **options))
    jobs_before = len(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs)
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details().startswith(field), e.value.details()
    assert "cpu:0" in e.value.details()
    # Nothing was queued.
    assert len(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs) == jobs_before
