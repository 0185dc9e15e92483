"""A user's path: submit a benchmark with benchctl, watch it, get exact numbers."""
import csv
import io
import json

from conftest import bench_pb2, wait_for_state

TINY = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16"]


def tiny_params():
    V, d, dff, L = 1000, 64, 256, 2
    return 2 * V * d + L * (4 * d * d + 3 * d * dff + 2 * d) + d


def test_submit_watch_get(daemon):
    r = daemon.benchctl("submit", "benchmark", *TINY, "--mode", "train_step",
                        "--warmup-steps", "2", "--steps", "4", "--json", check=0)
    job_id = json.loads(r.stdout)["id"]

    # NDJSON watch: queued, started, 2 warm-up steps, 4 steps, result, in order.
    w = daemon.benchctl("watch", job_id, "--json", check=0)
    events = [json.loads(line) for line in w.stdout.splitlines() if line.strip()]
    kinds = [next(k for k in ("queued", "started", "warmupStep", "warmup_step", "step", "result",
                              "failed", "log") if k in e) for e in events]
    kinds = [k.replace("warmupStep", "warmup_step") for k in kinds if k != "log"]
    assert kinds == ["queued", "started"] + ["warmup_step"] * 2 + ["step"] * 4 + ["result"], kinds

    job = daemon.stub.GetJob(bench_pb2.GetJobRequest(job_id=job_id))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED
    # Timestamps carry sub-second precision: the run is inside [started, finished].
    assert job.created.ToNanoseconds() <= job.started.ToNanoseconds() < job.finished.ToNanoseconds()
    res = job.result.benchmark
    assert res.parameter_count == tiny_params()
    # The result carries the spec as it ran: the preset expanded, the defaults written out.
    assert res.spec.model.preset == "tiny" and res.spec.model.d_model == 64
    assert res.spec.mode == bench_pb2.BENCHMARK_MODE_TRAIN_STEP
    assert res.spec.precision == bench_pb2.PRECISION_FP32
    assert res.spec.attention == bench_pb2.ATTENTION_IMPL_FAITHFUL
    assert res.spec.optimizer_impl == bench_pb2.OPTIMIZER_IMPL_FAITHFUL
    assert res.spec.warmup_steps == 2 and res.spec.measure_steps == 4 and res.warmup_steps_run == 2
    assert job.kind == bench_pb2.JOB_KIND_BENCHMARK and list(job.devices) == ["cpu:0"]
    assert res.timer == "host_steady_clock" and res.device == "cpu:0"
    assert [s.warmup for s in res.steps] == [True, True, False, False, False, False]
    measured = [s.step_seconds for s in res.steps if not s.warmup]
    assert all(t > 0 for t in measured)
    assert res.step.count == 4
    assert res.step.min == min(measured) and res.step.max == max(measured)
    assert abs(res.step.median - sorted(measured)[1:3][0] / 2 - sorted(measured)[1:3][1] / 2) < 1e-12
    for s in res.steps:
        if not s.warmup:
            # The phases are inside the step.
            assert 0 < s.forward_seconds and 0 < s.backward_seconds and 0 < s.optimizer_seconds
            assert s.forward_seconds + s.backward_seconds + s.optimizer_seconds <= s.step_seconds * 1.01
            assert s.loss > 0
    assert abs(res.tokens_per_second - 2 * 16 / res.step.median) / res.tokens_per_second < 1e-9
    V, d, dff, L, T = 1000, 64, 256, 2, 16
    fwd = 2 * 16 * (2 * (L * (4 * d * d + 3 * d * dff) + V * d) + 4 * L * T * d)
    assert abs(res.flops_per_step - 3 * fwd) < 1
    assert abs(res.tflops_per_second - res.flops_per_step / res.step.median / 1e12) < 1e-12
    assert res.peak_memory_bytes > 0 and res.peak_memory_source == "host_max_rss"
    assert res.versions.torch.startswith("2.11.0")
    assert res.model_was_resident is False and res.model_build_seconds > 0
    # The roofline floor: the model's FLOPs at the CPU's measured fp32 matmul
    # peak plus AdamW's 28 bytes per parameter at its measured copy bandwidth.
    roof = res.roofline
    assert roof.unavailable == "" and roof.measured_now and roof.measure_seconds > 0
    assert roof.matmul_dtype == "fp32" and roof.matmul_size > 0 and roof.copy_bytes > 0
    assert abs(roof.matmul_seconds - res.flops_per_step / roof.peak_matmul_flops_per_second) < 1e-15
    assert roof.optimizer_bytes == 28 * res.parameter_count
    assert abs(roof.floor_seconds - roof.matmul_seconds - roof.optimizer_seconds) < 1e-15
    assert abs(roof.fraction_of_floor - roof.floor_seconds / res.step.median) < 1e-12
    assert 0 < roof.fraction_of_floor < 1  # a real step is slower than its floor

    # The human table and the CSV agree with the stored result.
    table = daemon.benchctl("get", job_id, check=0).stdout
    assert "succeeded" in table.lower() and "median" in table.lower()
    assert "Roofline" in table and "measured by this job" in table
    rows = list(csv.DictReader(io.StringIO(daemon.benchctl("get", job_id, "--csv", check=0).stdout)))
    assert len(rows) == 6
    assert abs(float(rows[-1]["step_s"]) - res.steps[-1].step_seconds) < 1e-9


def test_second_request_finds_resident_model_and_evict_frees_it(daemon):
    args = ["submit", "benchmark", *TINY, "--mode", "forward", "--warmup-steps", "0", "--steps", "2",
            "--json"]
    first = json.loads(daemon.benchctl(*args, check=0).stdout)["id"]
    a = wait_for_state(daemon.stub, first, [bench_pb2.JOB_STATE_SUCCEEDED]).result.benchmark
    second = json.loads(daemon.benchctl(*args, check=0).stdout)["id"]
    b = wait_for_state(daemon.stub, second, [bench_pb2.JOB_STATE_SUCCEEDED]).result.benchmark
    assert not a.model_was_resident and a.model_build_seconds > 0
    assert b.model_was_resident and b.model_build_seconds == 0
    # The second job on the worker finds the peaks cached: no probe, same peaks.
    assert a.roofline.measured_now and not b.roofline.measured_now and b.roofline.measure_seconds == 0
    assert b.roofline.peak_matmul_flops_per_second == a.roofline.peak_matmul_flops_per_second

    models = daemon.stub.ListModels(bench_pb2.ListModelsRequest()).models
    assert len(models) == 1 and models[0].parameter_count == tiny_params()
    assert models[0].uses == 2
    assert models[0].bytes >= 4 * tiny_params()  # fp32 parameters at least
    daemon.benchctl("evict", models[0].key, check=0)
    assert len(daemon.stub.ListModels(bench_pb2.ListModelsRequest()).models) == 0
    # Evicting what is not there is a clear NOT_FOUND, exit code 4.
    r = daemon.benchctl("evict", models[0].key, check=4)
    assert "no resident model" in r.stderr


def test_list_shows_jobs_newest_first(daemon):
    ids = [json.loads(daemon.benchctl("submit", "benchmark", *TINY, "--steps", "1",
                                      "--warmup-steps", "0", "--json", check=0).stdout)["id"]
           for _ in range(2)]
    for i in ids:
        wait_for_state(daemon.stub, i, [bench_pb2.JOB_STATE_SUCCEEDED])
    listed = daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs
    assert [j.id for j in listed[:2]] == list(reversed(ids))
    out = daemon.benchctl("list", check=0).stdout
    assert ids[0] in out and ids[1] in out
