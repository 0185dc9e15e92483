"""What every benchd dashboard shares: template variables, panel kinds, queries.

Every query filters on the node and device variables the same way, and every
panel names its unit, so the four dashboards read alike.
"""
from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat as stat_builder
from grafana_foundation_sdk.builders import table as table_builder
from grafana_foundation_sdk.builders import timeseries as ts_builder
from grafana_foundation_sdk.models import common as common_model
from grafana_foundation_sdk.models import dashboard as dash_model
from grafana_foundation_sdk.models import prometheus as prometheus_model

DATASOURCE = dash_model.DataSourceRef(type_val="prometheus", uid="${datasource}")
# Label matchers for the template variables; "All" stands for ".*".
NODE = 'node=~"$node"'
NODE_DEVICE = 'node=~"$node", device=~"$device"'


def query_variable(name, label, query, hide=False):
    v = (dash.QueryVariable(name)
         .label(label)
         .datasource(DATASOURCE)
         .query({"query": query, "refId": f"{name}-variable"})
         .refresh(dash_model.VariableRefresh.ON_TIME_RANGE_CHANGED)
         .sort(dash_model.VariableSort.ALPHABETICAL_ASC)
         .multi(True)
         .include_all(True)
         .all_value(".*")
         .current(dash_model.VariableOption(selected=True, text="All", value="$__all")))
    if hide:
        v = v.hide(dash_model.VariableHide.HIDE_VARIABLE)
    return v


def base(uid, title, description, extra_variables=()):
    """A dashboard with the datasource, node and device variables."""
    d = (dash.Dashboard(title)
         .uid(uid)
         .description(description)
         .tags(["benchd"])
         .editable()
         .tooltip(dash_model.DashboardCursorSync.CROSSHAIR)
         .refresh("30s")
         .time("now-6h", "now")
         .timezone("browser")
         .with_variable(dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
         .with_variable(query_variable("node", "Node", "label_values(benchd_build_info, node)"))
         .with_variable(query_variable(
             "device", "Device", 'label_values(benchd_worker_up{node=~"$node"}, device)')))
    for v in extra_variables:
        d = d.with_variable(v)
    return d


def target(expr, legend, instant=False, table=False):
    t = (prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DATASOURCE))
    if instant:
        t = t.instant()
    else:
        t = t.range()
    if table:
        t = t.format(prometheus_model.PromQueryFormat.TABLE)
    return t


def _targets(panel, queries):
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(target(expr, legend).ref_id(chr(ord("A") + i)))
    return panel


def timeseries(title, unit, description, *queries, width=12, height=8, thresholds=None,
               points=False):
    """A time series; `queries` are (expr, legend) pairs."""
    p = (ts_builder.Panel()
         .title(title)
         .description(description)
         .unit(unit)
         .datasource(DATASOURCE)
         .span(width)
         .height(height)
         .line_width(1)
         .fill_opacity(10)
         .legend(common_builder.VizLegendOptions()
                 .display_mode(common_model.LegendDisplayMode.TABLE)
                 .placement(common_model.LegendPlacement.BOTTOM)
                 .show_legend(True)
                 .calcs(["lastNotNull", "max"])))
    if points:
        p = p.show_points(common_model.VisibilityMode.ALWAYS)
    if thresholds:
        p = (p.thresholds(_thresholds(thresholds))
             .thresholds_style(common_builder.GraphThresholdsStyleConfig()
                               .mode(common_model.GraphThresholdsStyleMode.LINE)))
    return _targets(p, queries)


def stat(title, unit, description, expr, legend="", width=6, height=4, thresholds=None):
    p = (stat_builder.Panel()
         .title(title)
         .description(description)
         .unit(unit)
         .datasource(DATASOURCE)
         .span(width)
         .height(height)
         .graph_mode(common_model.BigValueGraphMode.AREA)
         .color_mode(common_model.BigValueColorMode.VALUE)
         .reduce_options(common_builder.ReduceDataOptions().calcs(["lastNotNull"])))
    if thresholds:
        p = p.thresholds(_thresholds(thresholds))
    return _targets(p, [(expr, legend)])


def table(title, unit, description, expr, width=24, height=6):
    """An instant query as a table: one row per series, its labels as columns."""
    p = (table_builder.Panel()
         .title(title)
         .description(description)
         .unit(unit)
         .datasource(DATASOURCE)
         .span(width)
         .height(height)
         .with_transformation(dash_model.DataTransformerConfig(id_val="labelsToFields",
                                                               options={"mode": "columns"})))
    return p.with_target(target(expr, "", instant=True, table=True).ref_id("A"))


def _thresholds(steps):
    """steps: [(value or None, color)], the first value None (the base)."""
    return (dash.ThresholdsConfig()
            .mode(dash_model.ThresholdsMode.ABSOLUTE)
            .steps([dash_model.Threshold(value=v, color=c) for v, c in steps]))


def row(title):
    return dash.Row(title)
