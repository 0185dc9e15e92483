"""A whole dashboard: its variables resolved against Prometheus, each panel's
targets queried as Grafana would over [start, end], every panel drawn in its
gridPos, one PNG."""
import datetime
import math

import numpy as np

from . import canvas as cv
from . import panels as draw
from . import query as q

DRAWERS = {"timeseries", "stat", "table", "barchart"}


class PanelDrawn:
    """What one panel showed: `series` with data (rows for a table, bars for a bar chart)."""

    def __init__(self, title, kind, series, queries):
        self.title, self.kind, self.series, self.queries = title, kind, series, queries

    def __repr__(self):
        return f"{self.kind} {self.title!r}: {self.series} series"


class Rendered:
    def __init__(self, path, size, panels, variables):
        self.path, self.size, self.panels, self.variables = path, size, panels, variables


def _grid(start, end, step):
    return np.arange(start, end + step / 2, step, dtype=float)


def _range_series(prom, target, expr, start, end, step):
    times = _grid(start, end, step)
    out = []
    for r in prom.query_range(expr, start, end, step):
        values = np.full(times.size, np.nan)
        for t, v in r["values"]:
            i = int(round((float(t) - start) / step))
            if 0 <= i < times.size:
                values[i] = float(v)
        out.append(draw.Series(q.legend(target.get("legendFormat", ""), r["metric"], expr),
                               times, values))
    return out


def _instant_rows(prom, expr, end):
    return [(r["metric"], float(r["value"][1])) for r in prom.query(expr, end)]


def _header(c, dashboard, variables, start, end, prom_url, step_note):
    c.text(cv.PAD_PX + 4, 20, dashboard["title"], fontsize=16, fontweight="bold")
    parts = []
    for name, (_, options) in variables.items():
        shown = ", ".join(options) if options else "none"
        parts.append(f"{name}: All ({cv.clip(shown, 60)})")
    c.text(cv.PAD_PX + 4, 44, "   ".join(parts), fontsize=cv.FONT_TITLE, color=cv.TEXT_WEAK)
    def utc(t, fmt):
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(fmt)
    when = f"{utc(start, '%Y-%m-%d %H:%M:%S')} to {utc(end, '%H:%M:%S')} UTC"
    c.text(cv.PAD_PX + 4, 64,
           f"{when}, {step_note}. Drawn by dashboards/render.py from the Prometheus at {prom_url} "
           "(the panels' own queries); not a Grafana screenshot.",
           fontsize=cv.FONT, color=cv.TEXT_WEAK)


def render_dashboard(dashboard, prom, start, end, scrape_interval, path):
    """Draws `dashboard` (its JSON as a dict) from `prom` (query.Prometheus)
    over [start, end] (Unix seconds) into the PNG `path`; `scrape_interval`
    (seconds) is the datasource's, for $__rate_interval. Returns a Rendered
    with one PanelDrawn per panel (rows excluded)."""
    start, end = math.floor(start), math.floor(end)
    if end <= start:
        raise ValueError(f"time range: end {end} is not after start {start}")
    c = cv.Canvas(dashboard)
    variables = q.resolve_variables(dashboard, prom, start, end)
    substitutions = {name: sub for name, (sub, _) in variables.items()}
    drawn, steps = [], set()
    for panel in dashboard["panels"]:
        box = c.box(panel["gridPos"])
        if panel["type"] == "row":
            x, y, w, _ = box
            marker = "▸" if panel.get("collapsed") else "▾"
            c.text(x + 2, y + 15, f"{marker} {panel['title']}", fontsize=cv.FONT_TITLE + 1,
                   fontweight="bold")
            if panel.get("collapsed"):
                for hidden in panel.get("panels", []):
                    drawn.append(PanelDrawn(hidden["title"], hidden["type"], 0, []))
            continue
        if panel["type"] not in DRAWERS:
            raise ValueError(f"panel {panel['title']!r}: type {panel['type']!r} is not drawn; "
                             f"known: {sorted(DRAWERS)}")
        c.panel_frame(box, panel["title"])
        step = q.panel_step(start, end, box[2], scrape_interval)
        steps.add(step)
        names = q.builtins(step, scrape_interval, start, end)
        series, rows, legends, queries = [], [], [], []
        for target in panel["targets"]:
            expr = q.interpolate(target["expr"], substitutions, names)
            queries.append(expr)
            if target.get("instant"):
                got = _instant_rows(prom, expr, end)
                rows += got
                legends += [q.legend(target.get("legendFormat", ""), labels, expr)
                            for labels, _ in got]
            else:
                series += _range_series(prom, target, expr, start, end, step)
        kind = panel["type"]
        if kind == "timeseries":
            n = draw.timeseries(c, panel, box, series, start, end)
        elif kind == "stat":
            n = draw.stat(c, panel, box, series, start, end)
        elif kind == "table":
            n = draw.table(c, panel, box, rows)
        else:
            n = draw.barchart(c, panel, box, rows, legends)
        drawn.append(PanelDrawn(panel["title"], kind, n, queries))
    step_note = "step " + "/".join(f"{s} s" for s in sorted(steps))
    step_note += f", scrape interval {scrape_interval} s"
    _header(c, dashboard, variables, start, end, prom.url, step_note)
    c.save(path)
    return Rendered(path, (c.width, c.height), drawn, variables)


def png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
