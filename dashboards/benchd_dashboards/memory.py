"""Memory: device memory in use, resident models, peaks per job kind."""
from .common import NODE_DEVICE, base, row, timeseries

LEGEND = "{{node}} {{device}}"


def build():
    return (
        base("benchd-memory", "benchd / Memory",
             "Device memory in use, resident models, and the peak memory of jobs.")
        .with_row(row("Devices"))
        .with_panel(timeseries(
            "Device memory in use", "bytes",
            "Memory in use on each device by any process (total - free), and its total.",
            (f"benchd_device_memory_used_bytes{{{NODE_DEVICE}}}", LEGEND + " used"),
            (f"benchd_device_memory_total_bytes{{{NODE_DEVICE}}}", LEGEND + " total")))
        .with_panel(timeseries(
            "Device memory in use (share)", "percentunit",
            "Used / total per device.",
            (f"node_device:benchd_device_memory_used:ratio{{{NODE_DEVICE}}}", LEGEND),
            thresholds=[(None, "green"), (0.9, "orange"), (0.97, "red")]))
        .with_row(row("Resident models"))
        .with_panel(timeseries(
            "Resident model bytes", "bytes",
            "Parameters and optimizer state of the models kept in each worker.",
            (f"benchd_resident_model_bytes{{{NODE_DEVICE}}}", LEGEND)))
        .with_panel(timeseries(
            "Resident models", "none", "Models kept in each worker.",
            (f"benchd_resident_models{{{NODE_DEVICE}}}", LEGEND)))
        .with_row(row("Peaks"))
        .with_panel(timeseries(
            "Peak memory per job kind (last job)", "bytes",
            "Peak memory of the last finished job of each kind (benchmark, profile: measured "
            "steps; memory: its largest cell's allocated peak).",
            (f"benchd_job_last_peak_memory_bytes{{{NODE_DEVICE}}}", "{{kind}} " + LEGEND)))
        .with_panel(timeseries(
            "Peak memory per benchmark", "bytes",
            "Peak memory over the measured steps of the last benchmark of each workload "
            "(model, mode, precision, batch x context, options).",
            (f"benchd_benchmark_last_peak_memory_bytes{{{NODE_DEVICE}}}",
             "{{model}} {{mode}} {{precision}} {{batch_size}}x{{context_length}} " + LEGEND)))
    )
