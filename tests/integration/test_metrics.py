"""/metrics passes promtool, and a real Prometheus server scrapes it."""
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from conftest import bench_pb2, wait_for_state


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
    # The resident-model figures follow the worker (asked after each job and
    # each eviction, without waiting): the model stays after the job, and an
    # eviction takes it off.
    assert eventually(daemon, "benchd_resident_models", 1, device="cpu:0")
    daemon.benchctl("evict", "--all", check=0)
    assert eventually(daemon, "benchd_resident_models", 0, device="cpu:0")
    assert eventually(daemon, "benchd_resident_model_bytes", 0, device="cpu:0")


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
