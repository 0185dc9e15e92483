"""Every dashboard panel's query, every template variable and every recording
rule returns data from Debian's real Prometheus scraping a real CPU daemon
with deploy/prometheus's own scrape config and rules, after benchmark,
collective and failed jobs. Panels only a GPU can fill are listed in GPU_ONLY
and must stay empty here (so the list stays true)."""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from conftest import SRC, bench_pb2, cpu_daemon, wait_for_state

PROM_DIR = os.path.join(SRC, "deploy", "prometheus")
DASHBOARDS = sorted(glob.glob(os.path.join(SRC, "dashboards", "json", "*.json")))

# (dashboard uid, panel title): what fills it on a GPU and not on a CPU.
GPU_ONLY = {}

# Fast enough to see two scrapes and rule evaluations within seconds.
INTERVAL = "1s"
# $__rate_interval for the panels: several scrapes at INTERVAL.
RATE_INTERVAL = "1m"

SHORT = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--warmup-steps", "1",
         "--steps", "3"]
LONG = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16", "--mode", "train_step",
        "--warmup-steps", "0", "--steps", "100000"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace_once(text, old, new, what):
    assert text.count(old) == 1, f"{what}: expected one {old!r}"
    return text.replace(old, new)


def write_config(work, metrics_address):
    """deploy/prometheus as shipped, pointed at this daemon and made fast:
    the static target, the intervals and the rule files' paths change, nothing else."""
    os.makedirs(os.path.join(work, "rules"))
    for name in ("benchd-recording.yml", "benchd-alerts.yml"):
        with open(os.path.join(PROM_DIR, "rules", name)) as f:
            text = f.read()
        text = re.sub(r"^(\s+)interval: \S+$", rf"\1interval: {INTERVAL}", text, flags=re.M)
        with open(os.path.join(work, "rules", name), "w") as f:
            f.write(text)
    with open(os.path.join(PROM_DIR, "prometheus.yml")) as f:
        text = f.read()
    text = replace_once(text, '"127.0.0.1:9531"', f'"{metrics_address}"', "static target")
    text = replace_once(text, "scrape_interval: 15s", f"scrape_interval: {INTERVAL}", "scrape")
    text = replace_once(text, "evaluation_interval: 30s", f"evaluation_interval: {INTERVAL}",
                        "evaluation")
    path = os.path.join(work, "prometheus.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


class Prometheus:
    def __init__(self, config, work):
        self.port = free_port()
        self.log = open(os.path.join(work, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work}/db",
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


def run_jobs(d):
    """A benchmark and a 2-rank Gloo all-reduce at two sizes, to completion."""
    job = json.loads(d.benchctl("submit", "benchmark", *SHORT, "--json", check=0).stdout)["id"]
    assert wait_for_state(d.stub, job, [bench_pb2.JOB_STATE_SUCCEEDED]).state == \
        bench_pb2.JOB_STATE_SUCCEEDED
    spec = bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
        devices=["cpu:0", "cpu:1"], sizes_bytes=[1024, 65536], iters=3))
    job = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    done = wait_for_state(d.stub, job.id, [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED])
    assert done.state == bench_pb2.JOB_STATE_SUCCEEDED, done.error_message


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


@pytest.fixture(scope="module")
def prom():
    assert len(DASHBOARDS) == 4, DASHBOARDS
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-prom-") as d:
        work = tempfile.mkdtemp(prefix="benchd-prometheus-")
        p = Prometheus(write_config(work, d.metrics_address), work)
        try:
            p.wait("a first scrape", lambda: p.scrapes() >= 1)
            # Histograms and counters appear at their first observation: run
            # the jobs twice with scrapes between, so rates see them grow.
            run_jobs(d)
            fail_a_job(d)
            p.wait_scrapes(2)
            run_jobs(d)
            fail_a_job(d)
            p.wait_scrapes(3)
            # Let every rule group evaluate after the last scrape.
            time.sleep(3)
            yield p
        finally:
            p.stop()
            subprocess.run(["rm", "-rf", work])


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
