"""Benchmarks: step time, tokens/s, FLOP/s, roofline, and regressions."""
from .common import NODE, NODE_DEVICE, base, query_variable, row, timeseries

# The benchmark series' labels besides node and device: each series is one
# workload (`workload`, the hash of everything that sets its step time);
# model ... context_length are its readable parts.
WORKLOAD = ('model=~"$model", mode=~"$mode", precision=~"$precision", '
            'batch_size=~"$batch_size", context_length=~"$context_length"')
SELECT = f"{NODE_DEVICE}, {WORKLOAD}"
LEGEND = ("{{model}} {{mode}} {{precision}} {{batch_size}}x{{context_length}} "
          "{{workload}} {{node}} {{device}}")


def build():
    variables = [
        query_variable("model", "Model",
                       'label_values(benchd_benchmark_last_step_seconds{node=~"$node"}, model)'),
        query_variable("mode", "Mode",
                       'label_values(benchd_benchmark_last_step_seconds{node=~"$node"}, mode)'),
        query_variable("precision", "Precision",
                       'label_values(benchd_benchmark_last_step_seconds{node=~"$node"}, '
                       'precision)'),
        query_variable("batch_size", "Batch size",
                       'label_values(benchd_benchmark_last_step_seconds{node=~"$node"}, '
                       'batch_size)'),
        query_variable("context_length", "Context length",
                       'label_values(benchd_benchmark_last_step_seconds{node=~"$node"}, '
                       'context_length)'),
    ]
    return (
        base("benchd-benchmarks", "benchd / Benchmarks",
             "The last benchmark of each workload (model, mode, precision, batch size, "
             "context length, options) and device over time; regressions against its own "
             "median over the last day.", variables)
        .with_row(row("Regressions"))
        .with_panel(timeseries(
            "Step time vs its median over the last day", "percentunit",
            "Last step time / its median over the last day, per workload and device (another "
            "batch size or context length is another series). Above 110% the "
            "BenchdBenchmarkRegression alert fires.",
            ("node_device_workload:benchd_benchmark_last_step_seconds:"
             f"ratio_median1d{{{SELECT}}}", LEGEND),
            width=24, thresholds=[(None, "green"), (1.1, "red")]))
        .with_row(row("Speed"))
        .with_panel(timeseries(
            "Step time (median of the last run)", "s",
            "Median measured step time of the last benchmark.",
            (f"benchd_benchmark_last_step_seconds{{{SELECT}}}", LEGEND)))
        .with_panel(timeseries(
            "Step time (median of measured steps, 5 m)", "s",
            "Median of every measured step in the last 5 minutes, from the step histogram "
            "(all devices of a node).",
            ("node_workload:benchd_benchmark_step_duration_seconds:p50_5m"
             f"{{{NODE}, {WORKLOAD}}}",
             "{{model}} {{mode}} {{precision}} {{batch_size}}x{{context_length}} {{workload}} "
             "{{node}}")))
        .with_panel(timeseries(
            "Tokens per second", "short",
            "batch x context / median step of the last benchmark.",
            (f"benchd_benchmark_last_tokens_per_second{{{SELECT}}}", LEGEND)))
        .with_panel(timeseries(
            "Model FLOP/s", "flops",
            "Achieved model FLOP/s of the last benchmark (the FLOPs formula in "
            "docs/architecture.md).",
            (f"benchd_benchmark_last_flops_per_second{{{SELECT}}}", LEGEND)))
        .with_panel(timeseries(
            "Fraction of roofline", "percentunit",
            "Roofline floor / median step: 100% = as fast as the device's measured peaks "
            "allow.",
            (f"benchd_benchmark_last_roofline_fraction{{{SELECT}}}", LEGEND), width=24))
    )

