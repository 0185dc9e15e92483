"""Grafana's interpolation, steps and legends (pytest; no Prometheus needed)."""
import pytest

from benchd_render import query as q


class FakeLabels:
    """Stands in for Prometheus' label values endpoint only: records the match[] it gets."""

    def __init__(self, values):
        self.values, self.asked = values, []

    def label_values(self, label, match, start, end):
        self.asked.append((label, match))
        return self.values[label]


def variable(name, query, all_value=None):
    v = {"name": name, "type": "query", "query": {"query": query}, "includeAll": True}
    if all_value:
        v["allValue"] = all_value
    return v


def test_all_is_the_all_value_else_the_escaped_values():
    assert q.substitute_all(variable("n", "x", ".*"), ["a"]) == ".*"
    assert q.substitute_all(variable("n", "x"), ["127.0.0.1"]) == r"127\.0\.0\.1"
    assert q.substitute_all(variable("d", "x"), ["cpu:0", "cuda:0"]) == "(cpu:0|cuda:0)"


def test_variables_resolve_in_order_and_use_earlier_ones():
    dash = {"templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        variable("node", "label_values(benchd_build_info, node)"),
        variable("device", 'label_values(benchd_worker_up{node=~"$node"}, device)', ".*")]}}
    prom = FakeLabels({"node": ["h1", "h2"], "device": ["cpu:0"]})
    got = q.resolve_variables(dash, prom, 0, 60)
    assert got == {"node": ("(h1|h2)", ["h1", "h2"]), "device": (".*", ["cpu:0"])}
    assert prom.asked == [("node", "benchd_build_info"),
                          ("device", 'benchd_worker_up{node=~"(h1|h2)"}')]


def test_a_variable_that_is_not_label_values_is_refused():
    dash = {"templating": {"list": [variable("x", "query_result(up)")]}}
    with pytest.raises(ValueError, match=r"\$x: 'query_result\(up\)' is not label_values"):
        q.resolve_variables(dash, FakeLabels({}), 0, 1)


def test_interpolation_and_rate_interval():
    names = q.builtins(step=2, scrape_interval=15, start=0, end=3600)
    assert names["__rate_interval"] == "60s"  # 4 scrapes beat step + scrape
    assert q.builtins(120, 15, 0, 1)["__rate_interval"] == "135s"
    expr = 'increase(x{node=~"$node", device=~"${device}"}[$__rate_interval])'
    assert q.interpolate(expr, {"node": ".*", "device": "cpu:0"}, names) == \
        'increase(x{node=~".*", device=~"cpu:0"}[60s])'
    with pytest.raises(KeyError, match=r"\$model"):
        q.interpolate("x{model=~\"$model\"}", {}, names)


def test_step_follows_the_panel_width_and_never_undercuts_the_scrape():
    assert q.panel_step(0, 3600, 900, 1) == 4
    assert q.panel_step(0, 120, 900, 1) == 1
    assert q.panel_step(0, 120, 900, 15) == 15


def test_legends():
    labels = {"__name__": "benchd_worker_up", "node": "h1", "device": "cpu:0"}
    assert q.legend("{{node}} {{ device }}", labels, "e") == "h1 cpu:0"
    assert q.legend("{{kind}} x", labels, "e") == "x"
    assert q.legend("", labels, "e") == 'benchd_worker_up{device="cpu:0", node="h1"}'
    assert q.legend("", {}, "count(x)") == "count(x)"


def test_an_unreachable_prometheus_is_named():
    with pytest.raises(q.PrometheusError, match=r"cannot reach Prometheus at http://127.0.0.1:9"):
        q.Prometheus("http://127.0.0.1:9/", timeout=5).get("query", query="up")
