"""Parity with the reference: a real daemon exports a bundle (--export-parity),
bench/reference/parity.py replays it in plain PyTorch and compares logits and
losses; a perturbed bundle must fail, and the refusals say why."""
import json
import os
import subprocess
import sys
import tempfile
import time

import grpc
import pytest
import torch

from conftest import SRC, BIN, Daemon, bench_pb2, wait_for_state

PARITY = os.path.join(SRC, "bench", "reference", "parity.py")
# tiny (V 1000, d 64, 2 layers) on a 2 x 16 batch: four train steps, so the last
# loss compared is the loss after three AdamW updates.
TINY = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--mode", "train_step",
        "--warmup-steps", "0", "--steps", "4", "--seed", "3"]


@pytest.fixture(scope="module")
def daemon():
    data = tempfile.mkdtemp(prefix="benchd-it-parity-")
    d = Daemon(data).start()
    d.wait_worker_up()
    yield d
    d.stop()
    subprocess.run(["rm", "-rf", data])


def export(daemon, precision):
    """Runs an export job; returns (job, path of its `get --json`)."""
    r = daemon.benchctl("submit", "benchmark", *TINY, "--precision", precision, "--export-parity",
                        "--json", check=0)
    job_id = json.loads(r.stdout)["id"]
    job = wait_for_state(daemon.stub, job_id, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED], timeout=120)
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    result_json = os.path.join(daemon.data_dir, f"job-{job_id}.json")
    with open(result_json, "w") as f:
        f.write(daemon.benchctl("get", job_id, "--json", check=0).stdout)
    return job, result_json


def parity(bundle, result_json, *extra):
    out = tempfile.mktemp(suffix=".json")
    r = subprocess.run([sys.executable, PARITY, bundle, "--result", result_json, "--steps", "4",
                        "--json", out, *extra], capture_output=True, text=True, timeout=120)
    report = None
    if os.path.exists(out):
        with open(out) as f:
            report = json.load(f)
        os.remove(out)
    return r, report


def perturbed_copy(bundle, name, factor, tmp_path):
    b = torch.load(bundle, weights_only=True)
    b["params"][name] = b["params"][name] * factor
    path = str(tmp_path / f"perturbed-{name}.pt")
    torch.save(b, path)
    return path


@pytest.fixture(scope="module")
def fp32_export(daemon):
    # A model of the same key trained first: the export must not start from it.
    r = daemon.benchctl("submit", "benchmark", *TINY, "--json", check=0)
    wait_for_state(daemon.stub, json.loads(r.stdout)["id"], [bench_pb2.JOB_STATE_SUCCEEDED], timeout=120)
    return export(daemon, "fp32")


@pytest.fixture(scope="module")
def bf16_export(daemon):
    return export(daemon, "bf16")


def test_fp32_bundle_matches_reference_within_1e_4(daemon, fp32_export):
    job, result_json = fp32_export
    res = job.result.benchmark
    assert res.parity_bundle == os.path.join(daemon.data_dir, "artifacts", job.id, "parity.pt")
    V, d, dff, L = 1000, 64, 256, 2
    tiny_params = 2 * V * d + L * (4 * d * d + 3 * d * dff + 2 * d) + d
    assert os.path.getsize(res.parity_bundle) > 4 * tiny_params  # every weight, in fp32
    assert not res.model_was_resident  # rebuilt from the seed although one was resident
    assert "parity.pt" in daemon.benchctl("get", job.id, check=0).stdout

    r, report = parity(res.parity_bundle, result_json)
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["passed"] and report["tolerance"] == 1e-4
    names = [c["name"] for c in report["checks"]]
    assert names == ["logits, first forward"] + [f"loss, step {i}" for i in range(4)]
    for c in report["checks"]:
        assert c["error"] < 1e-4, c
    # The losses checked are the job's, and they moved: the updates were compared.
    losses = [s.loss for s in res.steps]
    assert [c["benchd"] for c in report["checks"][1:]] == pytest.approx(losses, rel=1e-12)
    assert losses[3] < losses[0]


def test_fp32_perturbed_bundle_fails(fp32_export, tmp_path):
    job, result_json = fp32_export
    bad = perturbed_copy(job.result.benchmark.parity_bundle, "layers.0.attn.q_proj.weight", 1.01,
                         tmp_path)
    r, report = parity(bad, result_json)
    assert r.returncode == 1, r.stdout + r.stderr
    assert not report["passed"]
    assert report["checks"][0]["error"] > 1e-3  # the logits moved by far more than 1e-4
    assert "FAIL" in r.stdout


def test_bf16_bundle_matches_reference_within_its_tolerance(bf16_export):
    job, result_json = bf16_export
    r, report = parity(job.result.benchmark.parity_bundle, result_json)
    assert r.returncode == 0, r.stdout + r.stderr
    assert report["precision"] == "bf16" and report["tolerance"] == 2e-2
    assert len(report["checks"]) == 5
    for c in report["checks"]:
        assert c["error"] <= 2e-2, c
    # The logits are the bf16 forward's: widened bf16 values.
    logits = torch.load(job.result.benchmark.parity_bundle, weights_only=True)["logits"]
    assert logits.dtype == torch.float32
    assert torch.equal(logits, logits.bfloat16().float())


def test_bf16_perturbed_bundle_fails(bf16_export, tmp_path):
    job, result_json = bf16_export
    bad = perturbed_copy(job.result.benchmark.parity_bundle, "lm_head.weight", 1.1, tmp_path)
    r, report = parity(bad, result_json)
    assert r.returncode == 1, r.stdout + r.stderr
    assert report["checks"][0]["error"] > 2e-2


def test_bundle_and_result_of_different_runs_are_refused(fp32_export, bf16_export):
    r, _ = parity(fp32_export[0].result.benchmark.parity_bundle, bf16_export[1])
    assert r.returncode == 2 and "different runs" in r.stderr


def test_export_refused_above_the_parameter_limit(daemon):
    spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="2.7B"), export_parity=True))
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "benchmark.export_parity" in e.value.details()
    assert "2000000000" in e.value.details()
    r = daemon.benchctl("submit", "benchmark", "--preset", "2.7B", "--export-parity", check=2)
    assert "export_parity" in r.stderr


def test_worker_without_artifacts_dir_refuses_export(tmp_path):
    from benchd.internal import worker_pb2, worker_pb2_grpc
    sock = str(tmp_path / "w.sock")
    proc = subprocess.Popen([os.path.join(BIN, "benchd-worker"), "--socket", sock, "--device",
                             "cpu:0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not os.path.exists(sock):
            assert proc.poll() is None and time.time() < deadline, "benchd-worker did not start"
            time.sleep(0.05)
        with grpc.insecure_channel("unix:" + sock) as channel:
            stub = worker_pb2_grpc.WorkerStub(channel)
            spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
                model=bench_pb2.ModelConfig(preset="tiny"), export_parity=True))
            events = list(stub.Run(worker_pb2.RunRequest(job_id="1", spec=spec), timeout=60))
        assert len(events) == 1 and events[0].HasField("failure")
        assert events[0].failure.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "--artifacts-dir" in events[0].failure.message
    finally:
        proc.terminate()
        proc.wait(timeout=30)
