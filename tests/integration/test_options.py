"""The options through a real daemon and CPU worker: warm-up auto, SDPA (math),
the foreach AdamW; every option echoed in the result; CUDA-only options refused."""
import json
import subprocess
import tempfile

import grpc
import pytest

from conftest import Daemon, bench_pb2, wait_for_state

TINY = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16"]


@pytest.fixture(scope="module")
def daemon():
    data = tempfile.mkdtemp(prefix="benchd-it-options-")
    d = Daemon(data).start()
    d.wait_worker_up()
    yield d
    d.stop()
    subprocess.run(["rm", "-rf", data])


def converged(times):
    """The warm-up rule (common/warmup.cc), written again here."""
    if len(times) < 3:
        return False
    last = times[-3:]
    median = sorted(last)[1]
    return median > 0 and all(abs(t - median) <= 0.02 * median for t in last)


def submit(daemon, *args):
    r = daemon.benchctl("submit", "benchmark", *TINY, *args, "--json", check=0)
    job_id = json.loads(r.stdout)["id"]
    return wait_for_state(daemon.stub, job_id,
                          [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_CANCELLED], timeout=300)


def submit_fresh(daemon, *args):
    """submit() on a model built from the seed with a fresh AdamW state: the
    resident one (same key, whatever the seed) is evicted first."""
    daemon.benchctl("evict", "--all", check=0)
    return submit(daemon, *args)


def test_warmup_auto_sdpa_math_foreach_are_echoed(daemon):
    cap = 30
    job = submit(daemon, "--mode", "train_step", "--warmup", "auto", "--warmup-max-steps", str(cap),
                 "--attention", "math", "--optimizer", "foreach", "--steps", "3")
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message

    # The stored spec says what was asked: auto, no count, the cap written out.
    spec = job.spec.benchmark
    assert spec.warmup_auto and not spec.HasField("warmup_steps") and spec.warmup_max_steps == cap
    assert spec.attention == bench_pb2.ATTENTION_IMPL_SDPA_MATH
    assert spec.optimizer_impl == bench_pb2.OPTIMIZER_IMPL_FOREACH

    # The result's spec is the one that ran: the same options, and the engine.
    res = job.result.benchmark
    assert res.spec.warmup_auto and res.spec.warmup_max_steps == cap
    assert not res.spec.HasField("warmup_steps")
    assert res.spec.attention == bench_pb2.ATTENTION_IMPL_SDPA_MATH
    assert res.spec.optimizer_impl == bench_pb2.OPTIMIZER_IMPL_FOREACH
    assert res.spec.allow_tf32 is False and res.spec.cuda_graph is False and res.graph_eager_steps == 0
    assert res.spec.autograd  # SDPA is not the course's attention: the engine ran it
    n = res.warmup_steps_run
    assert 3 <= n <= cap
    assert [s.warmup for s in res.steps] == [True] * n + [False] * 3
    times = [s.step_seconds for s in res.steps[:n]]
    # It stopped at the first converged window, or at the cap.
    assert res.warmup_converged == converged(times)
    assert not any(converged(times[:k]) for k in range(3, n))
    if not res.warmup_converged:
        assert n == cap
    assert res.step.count == 3
    # Phases are measured on the eager path: all three present.
    assert res.forward.count == res.backward.count == res.optimizer.count == 3
    # It trained: the loss fell over the warm-up and measured steps.
    assert res.steps[-1].loss < res.steps[0].loss

    view = daemon.benchctl("get", job.id, check=0).stdout
    assert f"{n} warm-up (auto: " in view and f"cap {cap}) + 3 measured" in view
    assert "Options      attention sdpa (math only), optimizer foreach" in view
    assert f"warm-up auto (max {cap})" in view and "attention math, optimizer foreach" in view


def test_defaults_echo_the_faithful_path(daemon):
    job = submit(daemon, "--mode", "forward", "--warmup-steps", "1", "--steps", "1")
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    res = job.result.benchmark
    assert not res.spec.warmup_auto and not res.warmup_converged and res.warmup_steps_run == 1
    assert res.spec.attention == bench_pb2.ATTENTION_IMPL_FAITHFUL
    # Forward runs no optimizer step: none is named.
    assert res.spec.optimizer_impl == bench_pb2.OPTIMIZER_IMPL_UNSPECIFIED
    assert not res.spec.allow_tf32 and not res.spec.cuda_graph
    assert not res.spec.autograd  # the explicit backward
    assert "Options      faithful (course attention and AdamW, fp32 matmuls, eager, explicit backward)" \
        in daemon.benchctl("get", job.id, check=0).stdout


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_explicit_backward_trains_as_autograd_does(daemon, precision):
    # The same kernels as the engine's: the same losses step by step, bit for
    # bit on the CPU, through the whole daemon (AdamW after each backward).
    common = ["--mode", "train_step", "--precision", precision, "--warmup-steps", "1", "--steps", "3",
              "--seed", "6"]
    explicit = submit_fresh(daemon, *common)
    autograd = submit_fresh(daemon, *common, "--autograd")
    for job in (explicit, autograd):
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    assert not explicit.result.benchmark.spec.autograd
    assert autograd.spec.benchmark.autograd and autograd.result.benchmark.spec.autograd
    e = [s.loss for s in explicit.result.benchmark.steps]
    assert e == [s.loss for s in autograd.result.benchmark.steps]
    assert e[-1] < e[0]
    assert "autograd engine" in daemon.benchctl("get", autograd.id, check=0).stdout


def test_options_that_change_the_ops_run_through_autograd(daemon):
    job = submit(daemon, "--mode", "forward_backward", "--fused-ops", "--warmup-steps", "0", "--steps", "1")
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    assert not job.spec.benchmark.autograd and job.result.benchmark.spec.autograd
    assert "fused RMSNorm, SiLU and RoPE, autograd engine" in daemon.benchctl("get", job.id, check=0).stdout


def test_weight_copies_train_as_autocast_does(daemon):
    # The CPU worker runs the copies' update in ATen ops (the CUDA kernel is the
    # GPU's): the same losses as plain autocast with the fused AdamW, step by step.
    common = ["--mode", "train_step", "--precision", "bf16", "--optimizer", "fused",
              "--warmup-steps", "1", "--steps", "3", "--seed", "4"]
    plain = submit_fresh(daemon, *common)
    copies = submit_fresh(daemon, *common, "--weight-copies")
    for job in (plain, copies):
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    assert copies.spec.benchmark.weight_copies and copies.result.benchmark.spec.weight_copies
    assert not plain.result.benchmark.spec.weight_copies
    p = [s.loss for s in plain.result.benchmark.steps]
    c = [s.loss for s in copies.result.benchmark.steps]
    assert c == pytest.approx(p, rel=1e-3)
    assert c[-1] < c[0]  # it trained: the copies followed the updated weights
    view = daemon.benchctl("get", copies.id, check=0).stdout
    assert "optimizer fused, bf16 weight copies kept between steps" in view


def test_fused_ops_give_the_faithful_losses(daemon):
    common = ["--mode", "train_step", "--warmup-steps", "1", "--steps", "2", "--seed", "5"]
    faithful = submit_fresh(daemon, *common)
    fused = submit_fresh(daemon, *common, "--fused-ops")
    for job in (faithful, fused):
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
    assert fused.result.benchmark.spec.fused_ops and not faithful.result.benchmark.spec.fused_ops
    f = [s.loss for s in faithful.result.benchmark.steps]
    assert [s.loss for s in fused.result.benchmark.steps] == pytest.approx(f, rel=1e-5)
    assert "fused RMSNorm, SiLU and RoPE" in daemon.benchctl("get", fused.id, check=0).stdout


@pytest.mark.parametrize("args,field,text", [
    (["--cuda-graph"], "benchmark.cuda_graph", "CUDA graphs need a CUDA device"),
    (["--attention", "efficient"], "benchmark.attention", "is a CUDA kernel and cpu:0 is a CPU"),
    (["--attention", "cudnn"], "benchmark.attention", "is a CUDA kernel and cpu:0 is a CPU"),
])
def test_cuda_only_options_are_refused_at_submit_on_a_cpu(daemon, args, field, text):
    # Refused by the daemon (common/job_spec.cc CheckStepOptionsForDevice),
    # not queued to fail in the worker.
    before = len(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs)
    r = daemon.benchctl("submit", "benchmark", *TINY, "--warmup-steps", "2", "--steps", "1",
                        *args, check=2)
    assert field in r.stderr and text in r.stderr, r.stderr
    assert len(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs) == before


@pytest.mark.parametrize("args,text", [
    (["--warmup", "auto", "--warmup-steps", "3"],
     "--warmup-steps and --warmup: one flag given twice (--warmup-steps is the older spelling "
     "of --warmup)"),
    (["--warmup", "soon"], "--warmup: expected auto or a number of steps"),
    (["--attention", "fast"], "--attention: unknown attention 'fast'"),
    (["--optimizer", "sgd"], "--optimizer: unknown optimizer 'sgd'"),
    (["--warmup", "auto", "--warmup-max-steps", "2"], "benchmark.warmup_max_steps"),
    (["--warmup-max-steps", "9"], "benchmark.warmup_max_steps: applies only with warmup_auto"),
    (["--optimizer", "fused"], "benchmark.optimizer_impl: fused changes the AdamW step"),
    (["--mode", "train_step", "--cuda-graph", "--warmup-steps", "1"],
     "benchmark.warmup_steps: cuda_graph needs at least 2"),
    (["--weight-copies"], "benchmark.weight_copies: keeps the matmul weights in the autocast "
     "dtype, so it needs precision bf16 or fp16; precision is fp32"),
    (["--weight-copies", "--precision", "bf16", "--mode", "train_step"],
     "set optimizer_impl fused (got faithful)"),
])
def test_bad_option_flags_exit_2_naming_them(daemon, args, text):
    r = daemon.benchctl("submit", "benchmark", *TINY, *args, check=2)
    assert text in r.stderr, r.stderr


def test_grpc_contradiction_is_invalid_argument(daemon):
    spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), warmup_auto=True, warmup_steps=4))
    with pytest.raises(grpc.RpcError) as e:
        daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ("benchmark.warmup_auto: contradicts the explicit benchmark.warmup_steps 4"
            in e.value.details())
