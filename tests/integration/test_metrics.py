"""/metrics passes promtool, and a real Prometheus server scrapes it."""
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from conftest import bench_pb2, cpu_daemon, wait_for_state


def scrape(daemon):
    with urllib.request.urlopen(f"http://{daemon.metrics_address}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text, name, **labels):
    """The value of one sample, matched by name and a subset of labels."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, value = line.rsplit(" ", 1)
        if head.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return None


def test_metrics_pass_promtool_and_count_jobs(daemon):
    job = json.loads(daemon.benchctl("submit", "benchmark", "--preset", "tiny", "--batch-size", "2",
                                     "--context-length", "16", "--warmup-steps", "1", "--steps", "3",
                                     "--json", check=0).stdout)["id"]
    res = wait_for_state(daemon.stub, job, [bench_pb2.JOB_STATE_SUCCEEDED]).result.benchmark
    text = scrape(daemon)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr

    assert sample(text, "benchd_jobs_submitted_total", kind="benchmark") == 1
    assert sample(text, "benchd_jobs_finished_total", kind="benchmark", outcome="succeeded") == 1
    assert sample(text, "benchd_worker_up", device="cpu:0") == 1
    assert sample(text, "benchd_queue_depth", device="cpu:0") == 0
    assert sample(text, "benchd_benchmark_step_duration_seconds_count", model="tiny",
                  mode="forward", precision="fp32") == 3
    assert sample(text, "benchd_benchmark_last_step_seconds", model="tiny") == res.step.median
    assert abs(sample(text, "benchd_benchmark_last_tokens_per_second", model="tiny")
               - res.tokens_per_second) / res.tokens_per_second < 1e-9
    assert sample(text, "benchd_build_info") == 1
    # Build and worker versions as info metrics.
    assert sample(text, "benchd_build_info", version=res.versions.benchd) == 1
    assert 'grpc_version="1.' in text and 'protobuf_version="3.' in text
    assert sample(text, "benchd_worker_info", device="cpu:0",
                  torch_version=res.versions.torch) == 1
    # Per-device memory as the worker reported it (host memory for a CPU).
    info = daemon.wait_worker_up()
    assert sample(text, "benchd_device_memory_total_bytes", device="cpu:0") == \
        info.total_memory_bytes > 0
    used = sample(text, "benchd_device_memory_used_bytes", device="cpu:0")
    assert 0 < used <= info.total_memory_bytes
    # Duration by kind and outcome; the last figures carry the device too.
    assert sample(text, "benchd_job_duration_seconds_count", kind="benchmark",
                  outcome="succeeded") == 1
    assert sample(text, "benchd_benchmark_last_step_seconds", model="tiny", mode="forward",
                  precision="fp32", device="cpu:0") == res.step.median
    assert close(sample(text, "benchd_benchmark_last_flops_per_second", model="tiny",
                        device="cpu:0"), res.tflops_per_second * 1e12)
    if not res.roofline.unavailable:
        assert close(sample(text, "benchd_benchmark_last_roofline_fraction", model="tiny",
                            device="cpu:0"), res.roofline.fraction_of_floor)
    assert sample(text, "benchd_job_last_peak_memory_bytes", kind="benchmark",
                  device="cpu:0") == res.peak_memory_bytes
    # Step buckets reach down to ~122 us and job buckets up to the 1-day limit.
    assert 'benchd_benchmark_step_duration_seconds_bucket{' in text
    assert 'le="0.0001220703125"' in text and 'le="86400"' in text
    # The resident-model figures follow the worker (asked after each job and
    # each eviction, without waiting): the model stays after the job, and an
    # eviction takes it off.
    assert eventually(daemon, "benchd_resident_models", 1, device="cpu:0")
    daemon.benchctl("evict", "--all", check=0)
    assert eventually(daemon, "benchd_resident_models", 0, device="cpu:0")
    assert eventually(daemon, "benchd_resident_model_bytes", 0, device="cpu:0")


def test_collective_series_stay_bounded():
    """Bus bandwidth by size class (a power of two, whatever sizes a sweep
    asks for) and every iteration in a duration histogram fine enough for
    microsecond collectives."""
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-metrics-") as d:
        spec = bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
            devices=["cpu:0", "cpu:1"], sizes_bytes=[3000, 4096], iters=4))
        job = wait_for_state(d.stub, d.stub.Submit(bench_pb2.SubmitRequest(spec=spec),
                                                   timeout=30).id,
                             [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED])
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, job.error_message
        text = scrape(d)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    sizes = {l.split('size_bytes="')[1].split('"')[0] for l in text.splitlines()
             if l.startswith("benchd_collective_bus_bandwidth_bytes_per_second{")}
    assert sizes == {"2048", "4096"}, sizes
    labels = dict(op="all_reduce", backend="gloo", world_size="2")
    # 4 iterations of each of the 2 sizes.
    assert sample(text, "benchd_collective_duration_seconds_count", **labels) == 8
    assert sample(text, "benchd_collective_duration_seconds_bucket", le="9.5367431640625e-07",
                  **labels) is not None
    assert sample(text, "benchd_process_groups", backend="gloo", state="ready") == 0


def labelled(text, name):
    """Each sample of `name`: its labels as a dict."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            out.append(dict(re.findall(r'(\w+)="([^"]*)"', line.rsplit(" ", 1)[0])))
    return out


def test_each_workload_is_a_series_of_its_own(daemon):
    """Runs of one model that differ only in batch size or attention are
    series of their own, told apart by `workload` (so the regression alert
    compares each with its own median); failed-job counters read 0 before any
    job failed."""
    text = scrape(daemon)
    assert sample(text, "benchd_jobs_finished_total", kind="collective", outcome="failed") == 0
    # The third runs through autograd whatever was asked (SDPA attention):
    # the worker's echo says so, and it is still one workload.
    for batch, extra in (("3", []), ("5", []), ("3", ["--attention", "sdpa"])):
        job = json.loads(daemon.benchctl(
            "submit", "benchmark", "--preset", "tiny", "--batch-size", batch, "--context-length",
            "24", "--warmup-steps", "1", "--steps", "2", *extra, "--json", check=0).stdout)["id"]
        done = wait_for_state(daemon.stub, job, [bench_pb2.JOB_STATE_SUCCEEDED])
        assert done.result.benchmark.spec.autograd == bool(extra), done.result.benchmark.spec
    text = scrape(daemon)
    series = [s for s in labelled(text, "benchd_benchmark_last_step_seconds")
              if s["context_length"] == "24"]
    assert sorted(s["batch_size"] for s in series) == ["3", "3", "5"], series
    assert all(re.fullmatch(r"[0-9a-f]{16}", s["workload"]) for s in series), series
    assert len({s["workload"] for s in series}) == 3, series
    # The step histogram (from the request) names each workload as the last
    # run's figures (from the worker's echo of the spec) do.
    steps = [s for s in labelled(text, "benchd_benchmark_step_duration_seconds_count")
             if s["context_length"] == "24"]
    assert sorted((s["batch_size"], s["workload"]) for s in steps) == \
        sorted((s["batch_size"], s["workload"]) for s in series), (steps, series)


def close(got, want):
    """/metrics prints doubles to about 15 significant digits."""
    return got is not None and abs(got - want) <= 1e-12 * abs(want)


def eventually(daemon, name, value, timeout=10, **labels):
    deadline = time.time() + timeout
    while True:
        got = sample(scrape(daemon), name, **labels)
        if got == value or time.time() > deadline:
            assert got == value, f"{name}{labels} = {got}, expected {value}"
            return True
        time.sleep(0.1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_server_scrapes_daemon(daemon):
    daemon.wait_worker_up()
    work = tempfile.mkdtemp(prefix="benchd-prom-")
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global: {scrape_interval: 1s}\n"
                "scrape_configs:\n"
                f"  - job_name: benchd\n    static_configs: [{{targets: ['{daemon.metrics_address}']}}]\n")
    port = free_port()
    prom = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work}/db",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        query = urllib.parse.quote('benchd_worker_up{device="cpu:0"}')
        deadline = time.time() + 60
        result = []
        while time.time() < deadline and not result:
            time.sleep(1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?query={query}",
                                            timeout=5) as r:
                    result = json.load(r)["data"]["result"]
            except OSError:
                continue
        assert result, "Prometheus never scraped benchd_worker_up"
        assert result[0]["value"][1] == "1"
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        subprocess.run(["rm", "-rf", work])
