"""Overview: nodes, devices, workers, queues, jobs by outcome, failures."""
from .common import NODE, NODE_DEVICE, base, row, stat, table, timeseries

UP_COLORS = [(None, "red"), (1, "green")]


def build():
    return (
        base("benchd-overview", "benchd / Overview",
             "Nodes, devices and their workers, queues, and jobs by outcome.")
        .with_row(row("Fleet"))
        .with_panel(stat("Nodes", "none", "Daemons that answered the last scrape.",
                         f"count(benchd_build_info{{{NODE}}})"))
        .with_panel(stat("Devices", "none", "Devices the selected daemons serve.",
                         f"count(benchd_worker_up{{{NODE_DEVICE}}})"))
        .with_panel(stat("Workers ready", "percentunit",
                         "Share of the selected devices whose worker is started and answering, "
                         "or parked (--worker-idle-exit: stopped on purpose while idle; the "
                         "next job starts it).",
                         "avg(clamp_max(sum by (node, device) ({__name__=~"
                         f"\"benchd_worker_up|benchd_worker_parked\", {NODE_DEVICE}}}), 1))",
                         thresholds=[(None, "red"), (0.99, "green")]))
        .with_panel(stat("Jobs waiting", "none", "Queued jobs on the selected devices.",
                         f"sum(benchd_queue_depth{{{NODE_DEVICE}}})"))
        .with_row(row("Workers"))
        .with_panel(timeseries(
            "Worker up", "bool_yes_no",
            "1 while the device's worker is started and answers its heartbeat; a parked "
            "worker (--worker-idle-exit, idle workers stopped on purpose) shows 0 here and 1 "
            "as parked.",
            (f"benchd_worker_up{{{NODE_DEVICE}}}", "{{node}} {{device}}"),
            (f"benchd_worker_parked{{{NODE_DEVICE}}}", "{{node}} {{device}} parked")))
        .with_panel(timeseries(
            "Worker restarts", "none",
            "Worker restarts in each interval (a crash, a kill by benchd, a hung worker).",
            (f"increase(benchd_worker_restarts_total{{{NODE_DEVICE}}}[$__rate_interval])",
             "{{node}} {{device}}")))
        .with_row(row("Queues"))
        .with_panel(timeseries(
            "Queue depth", "none", "Jobs waiting for each device.",
            (f"benchd_queue_depth{{{NODE_DEVICE}}}", "{{node}} {{device}}")))
        .with_panel(timeseries(
            "Jobs running", "none", "1 while a job runs on the device.",
            (f"benchd_jobs_running{{{NODE_DEVICE}}}", "{{node}} {{device}}")))
        .with_row(row("Jobs"))
        .with_panel(timeseries(
            "Jobs finished by outcome", "ops",
            "Jobs per second reaching a final state, by kind and outcome (5 m rate).",
            (f"sum by (kind, outcome) (node_kind_outcome:benchd_jobs_finished:rate5m{{{NODE}}})",
             "{{kind}} {{outcome}}")))
        .with_panel(timeseries(
            "Failed jobs", "none",
            "Jobs that failed in each interval, by node and kind.",
            (f'sum by (node, kind) (increase(benchd_jobs_finished_total{{{NODE}, outcome="failed"}}'
             "[$__rate_interval]))", "{{node}} {{kind}}"),
            thresholds=[(None, "green"), (1, "red")]))
        .with_panel(timeseries(
            "Job duration (p95)", "s",
            "95th percentile of job wall time over 5 minutes, by kind and outcome.",
            (f"max by (kind, outcome) "
             f"(node_kind_outcome:benchd_job_duration_seconds:p95_5m{{{NODE}}})",
             "{{kind}} {{outcome}}")))
        .with_panel(timeseries(
            "Results waiting for disk", "none",
            "Finished jobs whose record waits to be stored (a full data disk), and damaged "
            "stored records found.",
            (f"benchd_unstored_results{{{NODE}}}", "{{node}} unstored"),
            (f"benchd_store_bad_rows_total{{{NODE}}}", "{{node}} damaged rows")))
        .with_row(row("Versions"))
        .with_panel(table(
            "Workers", "none", "What each device's worker runs on.",
            f"benchd_worker_info{{{NODE_DEVICE}}}", width=16))
        .with_panel(table(
            "Daemons", "none", "The benchd build on each node.",
            f"benchd_build_info{{{NODE}}}", width=8))
    )
