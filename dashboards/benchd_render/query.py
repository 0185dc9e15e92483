"""A panel's queries as Grafana sends them to Prometheus, and their answers.

Grafana's rules, kept to what benchd's dashboards use: template variables
(`$name`, `${name}`) on "All" become the variable's allValue, else the
regex-escaped values Prometheus has, joined as `(a|b)`; `$__interval` is the
query step and `$__rate_interval` max(step + scrape interval, 4 × scrape
interval); legends replace `{{label}}` with the series' label.
"""
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request

VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
LEGEND_LABEL = re.compile(r"\{\{\s*(.+?)\s*\}\}")
LABEL_VALUES = re.compile(r"label_values\((?:(.+),\s*)?(\w+)\)")
REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")


class PrometheusError(RuntimeError):
    pass


class Prometheus:
    """Prometheus' HTTP API (/api/v1) at `url`, e.g. http://127.0.0.1:9090."""

    def __init__(self, url, timeout=30):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        address = f"{self.url}/api/v1/{path}?{query}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:  # a bad query: 400 with Prometheus' reason
            try:
                body = json.load(e)
            except ValueError:
                raise PrometheusError(f"{address}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {e}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query_range(self, expr, start, end, step):
        data = self.get("query_range", query=expr, start=start, end=end, step=step)
        if data["resultType"] != "matrix":
            raise PrometheusError(f"query_range {expr}: a {data['resultType']}, not a matrix")
        return data["result"]

    def query(self, expr, time):
        data = self.get("query", query=expr, time=time)
        if data["resultType"] != "vector":
            raise PrometheusError(f"query {expr}: a {data['resultType']}, not a vector "
                                  "(a table or bar panel needs one row per series)")
        return data["result"]

    def label_values(self, label, match, start, end):
        params = {"start": start, "end": end}
        if match:
            params["match[]"] = match
        return self.get(f"label/{label}/values", **params)


def regex_escape(value):
    return REGEX_SPECIAL.sub(r"\\\1", value)


def interpolate(text, values, builtins):
    """`text` with every $variable replaced: `values` maps a template variable
    to what Grafana puts in its place, `builtins` the $__ variables."""
    def one(m):
        name = m.group(1) or m.group(2)
        if name in builtins:
            return builtins[name]
        if name in values:
            return values[name]
        raise KeyError(f"${name} in {text!r}: not a template variable of this dashboard")
    return VARIABLE.sub(one, text)


def substitute_all(variable, options):
    """What Grafana sends for a query variable with "All" selected."""
    if variable.get("allValue"):
        return variable["allValue"]
    if len(options) == 1:
        return regex_escape(options[0])
    return "(" + "|".join(regex_escape(o) for o in options) + ")"


def resolve_variables(dashboard, prom, start, end):
    """{name: (substitution, [the values Prometheus has])} for every query
    variable, in the dashboard's order (a variable may use earlier ones), each
    on "All" as the committed dashboards are."""
    resolved, values = {}, {}
    for v in dashboard.get("templating", {}).get("list", []):
        if v["type"] == "datasource":
            continue
        if v["type"] != "query":
            raise ValueError(f"variable ${v['name']}: type {v['type']!r}; only query variables "
                             "are drawn")
        query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = LABEL_VALUES.fullmatch(query.strip())
        if not m:
            raise ValueError(f"variable ${v['name']}: {query!r} is not label_values(...)")
        match = interpolate(m.group(1), values, {}) if m.group(1) else None
        options = sorted(prom.label_values(m.group(2), match, start, end))
        values[v["name"]] = substitute_all(v, options)
        resolved[v["name"]] = (values[v["name"]], options)
    return resolved


def rate_interval(step, scrape_interval):
    return max(step + scrape_interval, 4 * scrape_interval)


def builtins(step, scrape_interval, start, end):
    return {"__interval": f"{step}s", "__rate_interval": f"{rate_interval(step, scrape_interval)}s",
            "__range": f"{int(end - start)}s"}


def panel_step(start, end, width_px, scrape_interval):
    """Grafana's step: the range over the panel's width in pixels (its
    maxDataPoints), never below the scrape interval; whole seconds."""
    return max(int(scrape_interval), int(math.ceil((end - start) / max(width_px, 1))))


def legend(fmt, labels, expr):
    """A series' name as Grafana shows it: the legend format with labels filled
    in, else metric{labels}, else the query itself."""
    if fmt:
        return LEGEND_LABEL.sub(lambda m: labels.get(m.group(1), ""), fmt).strip()
    name = labels.get("__name__", "")
    rest = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    if name or rest:
        return f"{name}{{{rest}}}" if rest else name
    return expr
