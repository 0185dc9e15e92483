"""Every dashboard panel's query, every template variable and every recording
rule returns data from Debian's real Prometheus scraping a real daemon with
deploy/prometheus's own scrape config and rules, after benchmark, collective
and failed jobs; dashboards/render.py draws every dashboard from it with data
in every panel. Panels only a GPU can fill are listed in GPU_ONLY and series
only a GPU can fill in GPU_SERIES: empty on the CPU (so the lists stay true),
required on a GPU daemon.

Environment:
  BENCHD_PROM_DEVICES          the daemon's devices (default cpu:0,cpu:1; on a GPU
                               machine e.g. cuda:0,cuda:1,cpu:0,cpu:1). cpu:0 and cpu:1
                               carry the CPU jobs; with cuda:0 a bf16 benchmark and a
                               memory request run there, with cuda:1 too an NCCL
                               all-reduce.
  BENCHD_PROMETHEUS            the prometheus binary (default: prometheus on PATH)
  BENCHD_DASHBOARD_RENDER_DIR  keep the rendered PNGs there (default: a temporary
                               folder, removed)
  BENCHD_PROM_ROUNDS           rounds of jobs, scrapes between (default 2; more make
                               longer curves for the pictures; only the first two
                               kill a worker, so the alerts stay below their thresholds)
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from conftest import SRC, bench_pb2, cpu_daemon, wait_for_state

PROM_DIR = os.path.join(SRC, "deploy", "prometheus")
DASHBOARDS = sorted(glob.glob(os.path.join(SRC, "dashboards", "json", "*.json")))
sys.path.insert(0, os.path.join(SRC, "dashboards"))
from benchd_render.canvas import canvas_size  # noqa: E402
from benchd_render.dashboard import png_size, render_dashboard  # noqa: E402
from benchd_render.query import Prometheus as RenderPrometheus, PrometheusError  # noqa: E402
import render  # noqa: E402  (dashboards/render.py)

DEVICES = os.environ.get("BENCHD_PROM_DEVICES", "cpu:0,cpu:1").split(",")
GPUS = [d for d in DEVICES if d.startswith("cuda:")]
PROMETHEUS = os.environ.get("BENCHD_PROMETHEUS", "prometheus")
ROUNDS = int(os.environ.get("BENCHD_PROM_ROUNDS", "2"))

# (dashboard uid, panel title): what fills it on a GPU and not on a CPU.
GPU_ONLY = {}
# Series behind the panels that only a GPU daemon fills: (what, query, GPUs it
# needs). Each must be empty on a CPU daemon and have data on one with that
# many GPUs (run_jobs runs what fills them).
GPU_SERIES = [
    ("CUDA workers up", 'benchd_worker_up{device=~"cuda:.*"} == 1', 1),
    ("CUDA device names and versions", 'benchd_worker_info{device=~"cuda:.*", device_name!=""}', 1),
    # dcgm-exporter's spelling of both, to join its series on.
    ("CUDA GPU UUIDs and PCI bus ids",
     'benchd_worker_info{device=~"cuda:.*", UUID=~"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", '
     'pci_bus_id=~"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}[.]0"}', 1),
    ("CUDA device memory total", 'benchd_device_memory_total_bytes{device=~"cuda:.*"} > 0', 1),
    ("CUDA device memory in use", 'benchd_device_memory_used_bytes{device=~"cuda:.*"} > 0', 1),
    ("its share", 'node_device:benchd_device_memory_used:ratio{device=~"cuda:.*"} > 0', 1),
    ("bf16 step time on a GPU",
     'benchd_benchmark_last_step_seconds{device=~"cuda:.*", precision="bf16"} > 0', 1),
    ("bf16 FLOP/s on a GPU",
     'benchd_benchmark_last_flops_per_second{device=~"cuda:.*", precision="bf16"} > 0', 1),
    ("bf16 fraction of roofline on a GPU",
     'benchd_benchmark_last_roofline_fraction{device=~"cuda:.*", precision="bf16"} > 0', 1),
    ("peak memory of a GPU benchmark",
     'benchd_benchmark_last_peak_memory_bytes{device=~"cuda:.*"} > 0', 1),
    ("the memory request's peak (CUDA only)",
     'benchd_job_last_peak_memory_bytes{kind="memory"} > 0', 1),
    ("NCCL bus bandwidth",
     'benchd_collective_bus_bandwidth_bytes_per_second{backend="nccl"} > 0', 2),
    ("NCCL iteration median",
     'node_op_backend_world_size:benchd_collective_duration_seconds:p50_5m{backend="nccl"} > 0', 2),
]

# Fast enough to see two scrapes and rule evaluations within seconds.
INTERVAL = "1s"
# $__rate_interval for the panels: several scrapes at INTERVAL.
RATE_INTERVAL = "1m"

SHORT = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--warmup-steps", "1",
         "--steps", "3", "--device", "cpu:0"]
LONG = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--mode", "train_step",
        "--warmup-steps", "0", "--steps", "100000", "--device", "cpu:0"]
# On cuda:0: a bf16 train step and a memory request (CUDA only) on the small model.
GPU_BENCHMARK = ["--preset", "small", "--mode", "train_step", "--precision", "bf16",
                 "--batch-size", "4", "--context-length", "128", "--warmup-steps", "2",
                 "--steps", "5", "--device", "cuda:0"]
GPU_MEMORY = ["--preset", "small", "--mode", "train_step", "--precision", "bf16",
              "--batch-size", "4", "--context-length", "128", "--warmup-steps", "1",
              "--record-steps", "1", "--device", "cuda:0"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace_once(text, old, new, what):
    assert text.count(old) == 1, f"{what}: expected one {old!r}"
    return text.replace(old, new)


def write_config(work, metrics_address):
    """deploy/prometheus as shipped, made fast, with one target list naming
    this daemon (as a user lists theirs): the intervals change, nothing else."""
    os.makedirs(os.path.join(work, "rules"))
    for name in ("benchd-recording.yml", "benchd-alerts.yml"):
        with open(os.path.join(PROM_DIR, "rules", name)) as f:
            text = f.read()
        text = re.sub(r"^(\s+)interval: \S+$", rf"\1interval: {INTERVAL}", text, flags=re.M)
        with open(os.path.join(work, "rules", name), "w") as f:
            f.write(text)
    with open(os.path.join(PROM_DIR, "prometheus.yml")) as f:
        text = f.read()
    text = replace_once(text, "scrape_interval: 15s", f"scrape_interval: {INTERVAL}", "scrape")
    text = replace_once(text, "evaluation_interval: 30s", f"evaluation_interval: {INTERVAL}",
                        "evaluation")
    path = os.path.join(work, "prometheus.yml")
    with open(path, "w") as f:
        f.write(text)
    os.makedirs(os.path.join(work, "targets"))
    with open(os.path.join(work, "targets", "benchd.json"), "w") as f:
        json.dump([{"targets": [metrics_address]}], f)
    return path


class Prometheus:
    def __init__(self, config, work):
        self.port = free_port()
        self.log = open(os.path.join(work, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work}/db",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def get(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/{path}?{query}",
                                    timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr):
        return self.get("query", query=expr)["result"]

    def wait(self, what, predicate, timeout=90):
        deadline = time.time() + timeout
        while True:
            try:
                if predicate():
                    return
            except OSError:
                pass  # not listening yet
            assert time.time() < deadline, f"Prometheus: {what} within {timeout} s"
            time.sleep(0.5)

    def scrapes(self):
        got = self.query('count_over_time(benchd_build_info{job="benchd"}[10m])')
        return int(float(got[0]["value"][1])) if got else 0

    def wait_scrapes(self, n):
        start = self.scrapes()
        self.wait(f"{n} more scrapes", lambda: self.scrapes() >= start + n)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


def panels(dashboard):
    for p in dashboard["panels"]:
        yield p
        yield from p.get("panels", [])  # inside a collapsed row


def fill(expr):
    """A panel's query as Grafana sends it with every variable on "All"."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    expr = re.sub(r"\$\{?(\w+)\}?", ".*", expr)
    assert "$" not in expr, expr
    return expr


def label_values(prom, query):
    m = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
    assert m, f"not a label_values query: {query}"
    return prom.get(f"label/{m.group(2)}/values", **{"match[]": fill(m.group(1))})


FINISHED = [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED]


def submit_and_finish(d, kind, args):
    """benchctl submit KIND ARGS, to success."""
    job = json.loads(d.benchctl("submit", kind, *args, "--json", check=0).stdout)["id"]
    done = wait_for_state(d.stub, job, FINISHED)
    assert done.state == bench_pb2.JOB_STATE_SUCCEEDED, f"{kind} {args}: {done.error_message}"


def all_reduce(d, devices, sizes):
    """A Gloo (cpu) or NCCL (cuda) all-reduce over `devices` at `sizes`, to success."""
    spec = bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
        devices=devices, sizes_bytes=sizes, iters=3))
    job = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    done = wait_for_state(d.stub, job.id, FINISHED)
    assert done.state == bench_pb2.JOB_STATE_SUCCEEDED, f"{devices}: {done.error_message}"


def run_jobs(d):
    """A benchmark and a 2-rank Gloo all-reduce at two sizes, to completion; on
    a GPU daemon also what fills GPU_SERIES."""
    submit_and_finish(d, "benchmark", SHORT)
    all_reduce(d, ["cpu:0", "cpu:1"], [1024, 65536])
    if GPUS:
        submit_and_finish(d, "benchmark", GPU_BENCHMARK)
        submit_and_finish(d, "memory", GPU_MEMORY)
    if len(GPUS) >= 2:
        all_reduce(d, GPUS[:2], [1 << 20, 64 << 20])


def fail_a_job(d):
    """A benchmark whose worker is killed mid-run: a failed job and a restart."""
    job = json.loads(d.benchctl("submit", "benchmark", *LONG, "--json", check=0).stdout)["id"]
    for event in d.stub.Watch(bench_pb2.WatchRequest(job_id=job), timeout=120):
        if event.HasField("step"):
            break
    os.kill(d.wait_worker_up().worker_pid, signal.SIGKILL)
    assert wait_for_state(d.stub, job, [bench_pb2.JOB_STATE_FAILED], timeout=60).state == \
        bench_pb2.JOB_STATE_FAILED
    d.wait_worker_up()


def render_cli(prom, end):
    """dashboards/render.py from the command line over everything scraped so
    far; its exit status and output."""
    out = tempfile.mkdtemp(prefix="benchd-render-cli-")
    try:
        return subprocess.run(
            [sys.executable, os.path.join(SRC, "dashboards", "render.py"), "--prometheus",
             f"http://127.0.0.1:{prom.port}", "--out", out, "--start", str(prom.started),
             "--end", str(end), "--scrape-interval", "1s"],
            capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def prom():
    assert len(DASHBOARDS) == 4, DASHBOARDS
    # The fixture's daemon always serves cpu:0; the CPU jobs use cpu:0 and cpu:1.
    assert {"cpu:0", "cpu:1"} <= set(DEVICES), f"BENCHD_PROM_DEVICES={DEVICES}: needs cpu:0,cpu:1"
    with cpu_daemon(DEVICES, "benchd-prom-") as d:
        work = tempfile.mkdtemp(prefix="benchd-prometheus-")
        p = Prometheus(write_config(work, d.metrics_address), work)
        p.started = time.time()
        p.metrics_address = d.metrics_address
        try:
            p.wait("a first scrape", lambda: p.scrapes() >= 1)
            # A healthy fleet: jobs run, none failed yet. render.py as a user
            # runs it must draw every panel (a zero where nothing failed).
            # Twice with scrapes between, so rates see the histograms grow.
            run_jobs(d)
            p.wait_scrapes(2)
            run_jobs(d)
            p.wait_scrapes(3)
            time.sleep(3)
            p.healthy_render = render_cli(p, time.time())
            # Histograms and counters appear at their first observation: run
            # the jobs at least twice with scrapes between, so rates see them grow.
            assert ROUNDS >= 2, f"BENCHD_PROM_ROUNDS={ROUNDS}: at least 2"
            for i in range(ROUNDS):
                run_jobs(d)
                if i < 2:
                    fail_a_job(d)
                p.wait_scrapes(2 if i < ROUNDS - 1 else 3)
            # Let every rule group evaluate after the last scrape.
            time.sleep(3)
            yield p
        finally:
            p.stop()
            subprocess.run(["rm", "-rf", work])


def test_scrapes_exactly_the_listed_targets(prom):
    """Only what targets/ lists is scraped (no built-in 127.0.0.1:9531, which
    would be down where only remote nodes are listed), and it is up."""
    active = prom.get("targets")["activeTargets"]
    assert [t["scrapeUrl"] for t in active] == \
        [f"http://{prom.metrics_address}/metrics"], active
    assert all(t["health"] == "up" for t in active), active
    assert not prom.query('up{job="benchd"} == 0')


def test_render_draws_a_healthy_fleet_with_data_in_every_panel(prom):
    """Before any job failed, render.py exits 0: "Failed jobs" draws zeros,
    not "No data"."""
    r = prom.healthy_render
    assert r.returncode == 0, r.stdout + r.stderr
    failed = [line for line in r.stdout.splitlines() if line.endswith("  Failed jobs")]
    assert failed and " 0 series" not in failed[0], r.stdout


def test_every_panel_query_returns_data(prom):
    empty, checked, gpu_filled = [], 0, []
    for path in DASHBOARDS:
        dashboard = json.load(open(path))
        for panel in panels(dashboard):
            if panel["type"] == "row":
                continue
            key = (dashboard["uid"], panel["title"])
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{key}: no unit"
            assert panel["datasource"]["uid"] == "${datasource}", key
            for t in panel["targets"]:
                result = prom.query(fill(t["expr"]))
                checked += 1
                if key in GPU_ONLY:
                    if result:
                        gpu_filled.append(key)
                elif not result:
                    empty.append(f"{key}: {fill(t['expr'])}")
    assert checked >= 30, checked
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert not gpu_filled, f"listed as GPU-only but filled on the CPU: {gpu_filled}"


def test_every_template_variable_has_values(prom):
    for path in DASHBOARDS:
        dashboard = json.load(open(path))
        for v in dashboard["templating"]["list"]:
            if v["type"] == "datasource":
                assert v["query"] == "prometheus"
                continue
            assert v["type"] == "query", v
            values = label_values(prom, v["query"]["query"])
            assert values, f"{dashboard['uid']} ${v['name']}: no values for {v['query']['query']}"
            if v["name"] == "node":
                # The scrape config's relabelling: the target's host.
                assert values == ["127.0.0.1"], values


def test_every_rule_is_healthy_and_every_recording_rule_has_data(prom):
    groups = prom.get("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {g["name"] for g in groups} == {"benchd-recording", "benchd-alerts"}
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad
    recording = [r["name"] for r in rules if r["type"] == "recording"]
    assert len(recording) == 7, recording
    empty = [name for name in recording if not prom.query(name)]
    assert not empty, f"recording rules without data: {empty}"


def test_alerts_see_the_failures_and_not_a_healthy_daemon(prom):
    """Two jobs failed and two worker restarts: below the thresholds, so
    quiet; the daemon is up and its workers too."""
    alerts = prom.get("alerts")["alerts"]
    names = {a["labels"]["alertname"] for a in alerts}
    assert not names & {"BenchdDaemonDown", "BenchdWorkerDown", "BenchdJobsFailing",
                        "BenchdResultsNotStored"}, alerts
    failed = prom.query('sum(increase(benchd_jobs_finished_total{outcome="failed"}[10m]))')
    assert failed and float(failed[0]["value"][1]) >= 1, failed


def test_gpu_series_fill_exactly_where_the_gpus_are(prom):
    """GPU_SERIES: data on a daemon with the GPUs each needs, none without."""
    wrong = []
    for what, expr, gpus in GPU_SERIES:
        has = bool(prom.query(expr))
        if has != (len(GPUS) >= gpus):
            wrong.append(f"{what}: {'data' if has else 'no data'} with {len(GPUS)} GPUs: {expr}")
    assert not wrong, "\n".join(wrong)


def test_render_draws_every_dashboard_with_data_in_every_panel(prom):
    """dashboards/render.py against this Prometheus: one PNG per dashboard, of
    the size its grid makes, every panel drawn with data (GPU_ONLY panels only
    on a GPU)."""
    keep = os.environ.get("BENCHD_DASHBOARD_RENDER_DIR")
    out = keep or tempfile.mkdtemp(prefix="benchd-render-")
    try:
        done = render.render_all(RenderPrometheus(f"http://127.0.0.1:{prom.port}"), DASHBOARDS, out,
                                 prom.started, time.time(), scrape_interval=1)
        empty = []
        for path, r in zip(DASHBOARDS, done):
            dashboard = json.load(open(path))
            assert os.path.basename(r.path) == dashboard["uid"] + ".png"
            assert png_size(r.path) == canvas_size(dashboard) == r.size, r.path
            expected = [p["title"] for p in panels(dashboard) if p["type"] != "row"]
            assert [p.title for p in r.panels] == expected, r.path
            for p in r.panels:
                gpu_only = (dashboard["uid"], p.title) in GPU_ONLY
                if p.series == 0 and (GPUS or not gpu_only):
                    empty.append(f"{dashboard['uid']}: {p.title}: {p.queries}")
                elif p.series and gpu_only and not GPUS:
                    empty.append(f"{dashboard['uid']}: {p.title}: GPU-only, drawn on the CPU")
        assert not empty, "panels drawn without data:\n" + "\n".join(empty)
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def test_render_names_what_it_cannot_draw(prom):
    """A query Prometheus refuses, a range vector where a table needs rows, a
    variable the dashboard lacks: errors that name them, no picture."""
    client = RenderPrometheus(f"http://127.0.0.1:{prom.port}")
    now = time.time()
    with pytest.raises(PrometheusError, match="parse error"):
        client.query_range("sum(", now - 60, now, 1)
    with pytest.raises(PrometheusError, match="a matrix, not a vector"):
        client.query("benchd_worker_up[1m]", now)
    dashboard = json.load(open(DASHBOARDS[0]))
    dashboard["panels"][1]["targets"][0]["expr"] += ' + on() group_left() vector($nope)'
    out = tempfile.mkdtemp(prefix="benchd-render-bad-")
    try:
        with pytest.raises(KeyError, match=r"\$nope"):
            render_dashboard(dashboard, client, prom.started, now, 1, os.path.join(out, "x.png"))
        assert os.listdir(out) == []
    finally:
        shutil.rmtree(out, ignore_errors=True)
