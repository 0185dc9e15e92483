"""Collectives: bus bandwidth vs size per backend and world size."""
from grafana_foundation_sdk.builders import barchart as barchart_builder
from grafana_foundation_sdk.models import dashboard as dash_model

from .common import DATASOURCE, NODE, base, query_variable, row, target, timeseries

SELECT = f'{NODE}, op=~"$op", backend=~"$backend", world_size=~"$world_size"'


def bus_bandwidth_by_size():
    """Bars per message size (x) for each op, backend and world size: the
    nccl-tests curve as of now."""
    expr = (f"max by (size_bytes, op, backend, world_size) "
            f"(benchd_collective_bus_bandwidth_bytes_per_second{{{SELECT}}})")
    return (barchart_builder.Panel()
            .title("Bus bandwidth by message size (now)")
            .description("The last bus bandwidth (nccl-tests definition) of each size class, "
                         "op, backend and world size; pick one op, backend and world size to "
                         "read one curve.")
            .unit("Bps")
            .datasource(DATASOURCE)
            .span(24)
            .height(9)
            .x_field("size_bytes")
            .with_target(target(expr, "{{op}} {{backend}} n={{world_size}}", instant=True,
                                table=True).ref_id("A"))
            # Label values are strings: sort the sizes as numbers, then make
            # them strings again, which the bar chart takes for its x axis.
            .with_transformation(_convert("number"))
            .with_transformation(dash_model.DataTransformerConfig(
                id_val="sortBy", options={"sort": [{"field": "size_bytes"}]}))
            .with_transformation(_convert("string")))


def _convert(destination):
    return dash_model.DataTransformerConfig(
        id_val="convertFieldType",
        options={"conversions": [{"targetField": "size_bytes", "destinationType": destination}]})


def build():
    variables = [
        query_variable("op", "Op", 'label_values(benchd_collective_bus_bandwidth_bytes_per_second'
                                   '{node=~"$node"}, op)'),
        query_variable("backend", "Backend",
                       'label_values(benchd_collective_bus_bandwidth_bytes_per_second'
                       '{node=~"$node"}, backend)'),
        query_variable("world_size", "World size",
                       'label_values(benchd_collective_bus_bandwidth_bytes_per_second'
                       '{node=~"$node"}, world_size)'),
    ]
    return (
        base("benchd-collectives", "benchd / Collectives",
             "Collective bus bandwidth by message size, backend and world size, and iteration "
             "times.", variables)
        .with_row(row("Bus bandwidth"))
        .with_panel(bus_bandwidth_by_size())
        .with_panel(timeseries(
            "Bus bandwidth over time", "Bps",
            "The last bus bandwidth of each op, backend, world size and size class.",
            (f"benchd_collective_bus_bandwidth_bytes_per_second{{{SELECT}}}",
             "{{op}} {{backend}} n={{world_size}} {{size_bytes}} B {{node}}"), width=24,
            points=True))
        .with_row(row("Iterations and groups"))
        .with_panel(timeseries(
            "Iteration time (median, 5 m)", "s",
            "Median collective iteration time (the slowest rank's), all sizes.",
            ("node_op_backend_world_size:benchd_collective_duration_seconds:p50_5m"
             f"{{{SELECT}}}", "{{op}} {{backend}} n={{world_size}} {{node}}")))
        .with_panel(timeseries(
            "Process groups", "none", "Resident process groups by backend and state.",
            (f'benchd_process_groups{{{NODE}, backend=~"$backend"}}',
             "{{node}} {{backend}} {{state}}")))
    )
