"""Bench.Estimate on a real daemon (CPU): answered by the daemon itself (no
job, no device time), through gRPC, benchctl and the docs' check script."""
import json
import os
import subprocess
import sys

import grpc
import pytest

from conftest import BIN, SRC, bench_pb2


def estimate(daemon, **fields):
    sharding = fields.pop("sharding", None)
    req = bench_pb2.EstimateRequest(**fields)
    if sharding:
        req.sharding.CopyFrom(bench_pb2.Sharding(**sharding))
    return daemon.stub.Estimate(req, timeout=10)


def test_rpc_answers_the_write_ups_numbers(daemon):
    e = estimate(daemon, model=bench_pb2.ModelConfig(preset="2.7B"), batch_size=4,
                 context_length=256, precision=bench_pb2.PRECISION_BF16,
                 mode=bench_pb2.BENCHMARK_MODE_TRAIN_STEP)
    # CS336 memory_profiling (d): 4 x 256 x 2560 x 4 B = 10.0 MiB.
    assert e.residual_stream.bytes == 10_485_760
    assert e.request.model.d_model == 2560 and e.request.sharding.data_parallel == 1
    assert e.parameter_count == 3_406_809_600
    state = {t.name: t.bytes for t in e.model_state}
    assert state["parameters"] == state["gradients"] == 4 * 3_406_809_600
    assert state["adamw_state"] == 8 * 3_406_809_600
    assert e.total_bytes == max(p.peak_bytes for p in e.phases)
    assert [p.name for p in e.phases] == ["forward", "backward", "optimizer_step"]
    assert all(t.formula for t in list(e.model_state) + list(e.activations))
    assert e.devices == 1 and e.per_device_bytes == e.total_bytes


def test_rpc_shards_the_xxl_model(daemon):
    e = estimate(daemon, model=bench_pb2.ModelConfig(preset="xxl"),
                 mode=bench_pb2.BENCHMARK_MODE_TRAIN_STEP, precision=bench_pb2.PRECISION_BF16,
                 sharding={"data_parallel": 64, "fsdp": True})
    assert e.parameter_count == 465_396_252_672
    state = {t.name: t for t in e.model_state}
    assert sum(state[n].bytes for n in ("parameters", "gradients", "adamw_state")) == \
        16 * 465_396_252_672
    assert state["adamw_state"].per_device_bytes == 8 * 465_396_252_672 // 64
    assert e.devices == 64 and e.per_device_bytes < e.total_bytes // 30


@pytest.mark.parametrize("fields,message", [
    ({"batch_size": 0}, "batch_size: expected 1..65536, got 0"),
    ({"sharding": {"zero_stage": 7}}, "sharding.zero_stage: expected 0..3, got 7"),
    ({"sharding": {"tensor_parallel": 5}}, "sharding.tensor_parallel: 5 does not divide"),
    ({"sharding": {"pipeline_stages": 99}}, "sharding.pipeline_stages: expected 1..32, got 99"),
    ({"sharding": {"fsdp": True, "zero_stage": 1}}, "sharding.fsdp:"),
    ({"model": bench_pb2.ModelConfig(preset="huge")}, "model.preset: unknown preset"),
])
def test_rpc_refuses_bad_input_naming_the_field(daemon, fields, message):
    fields.setdefault("model", bench_pb2.ModelConfig(preset="2.7B"))
    with pytest.raises(grpc.RpcError) as e:
        estimate(daemon, **fields)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in e.value.details()


def test_benchctl_estimate_table_and_json(daemon):
    r = daemon.benchctl("estimate", "--preset", "small", "--mode", "train_step",
                        "--data-parallel", "4", "--zero-stage", "3", check=0)
    assert "Peak:" in r.stdout and "per device" in r.stdout
    assert "layer.ffn_hidden" in r.stdout and "optimizer_step" in r.stdout
    j = json.loads(daemon.benchctl("estimate", "--preset", "small", "--json", check=0).stdout)
    assert j["request"]["batchSize"] == "4" and j["peakPhase"] == "forward"
    r = daemon.benchctl("estimate", "--preset", "small", "--zero-stage", "9", check=2)
    assert "sharding.zero_stage: expected 0..3, got 9" in r.stderr


def test_benchctl_offline_gives_the_daemons_answer(daemon):
    args = ["estimate", "--preset", "2.7B", "--mode", "train_step", "--precision", "bf16",
            "--context-length", "512", "--tensor-parallel", "2", "--json"]
    online = json.loads(daemon.benchctl(*args, check=0).stdout)
    # No daemon at all: an address nothing listens on.
    r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", "127.0.0.1:1", *args,
                        "--offline"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == online
    r = subprocess.run([os.path.join(BIN, "benchctl"), "--address", "127.0.0.1:1", "estimate",
                        "--preset", "2.7B", "--tensor-parallel", "3", "--offline"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "sharding.tensor_parallel: 3 does not divide" in r.stderr


def test_submit_force_is_stored(daemon):
    r = daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--force", "--json", check=0)
    job = json.loads(r.stdout)
    assert job["spec"]["force"] is True


def test_estimates_agree_with_the_h100_measurements(daemon):
    """docs/results/memory-estimate.md: every measured peak within 10%."""
    env = dict(os.environ, BENCHD_ADDRESS=daemon.address)
    r = subprocess.run([sys.executable, os.path.join(SRC, "bench", "estimate_check.py"),
                        "--bin", BIN, "--measured",
                        os.path.join(SRC, "docs", "results", "h100-memory.md")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| 2.7B") or
            line.startswith("| small")]
    assert len(rows) == 24, r.stdout
