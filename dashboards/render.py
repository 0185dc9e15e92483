#!/usr/bin/env python3
"""Draws benchd's Grafana dashboards from a real Prometheus, one PNG each.

No Grafana server runs where benchd is built and tested, so this reads each
committed dashboard (dashboards/json/*.json), resolves its template variables
to "All" and the values Prometheus has, sends every panel's own queries to
Prometheus' HTTP API (query_range over the time range, instant queries at its
end) and draws the answers with matplotlib in Grafana's layout: the 24-column
grid, rows, panel titles, units on the axes, legends from legendFormat.
A picture says in its header that it is this rendering, not a screenshot.

    python3 dashboards/render.py --prometheus http://127.0.0.1:9090 --out shots \\
        [--last 1h | --start UNIX --end UNIX] [--scrape-interval 15] [dashboards/json/x.json ...]

Prints one line per dashboard and per panel (how many series it drew); exits
1 if a panel drew no data (--allow-empty to draw them anyway, "No data"), 2
if Prometheus cannot be reached or refuses a query, or a dashboard uses what
is not drawn here (the message names it).
"""
import argparse
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchd_render.dashboard import render_dashboard  # noqa: E402
from benchd_render.query import Prometheus, PrometheusError  # noqa: E402

DASHBOARDS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "json",
                                           "*.json")))


def seconds(text):
    m = re.fullmatch(r"(\d+)([smhd]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90, 90s, 15m, 6h or 1d")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def render_all(prom, paths, out, start, end, scrape_interval):
    """Renders each dashboard JSON in `paths` into out/<uid>.png; returns the Rendered list."""
    os.makedirs(out, exist_ok=True)
    done = []
    for path in paths:
        with open(path) as f:
            dashboard = json.load(f)
        png = os.path.join(out, dashboard["uid"] + ".png")
        done.append(render_dashboard(dashboard, prom, start, end, scrape_interval, png))
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus", required=True, help="its URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--out", required=True, help="folder for <dashboard uid>.png")
    ap.add_argument("--last", type=seconds, default=3600, help="the range up to now (default 1h)")
    ap.add_argument("--start", type=float, help="Unix seconds (with --end, instead of --last)")
    ap.add_argument("--end", type=float)
    ap.add_argument("--scrape-interval", type=seconds, default=15,
                    help="the datasource's scrape interval, for $__rate_interval (default 15 s, "
                    "as dashboards/provisioning sets it)")
    ap.add_argument("--allow-empty", action="store_true", help="exit 0 even if a panel has no data")
    ap.add_argument("dashboards", nargs="*", default=DASHBOARDS)
    args = ap.parse_args(argv)
    if (args.start is None) != (args.end is None):
        ap.error("--start and --end go together")
    end = args.end if args.end is not None else time.time()
    start = args.start if args.start is not None else end - args.last
    empty = []
    try:
        done = render_all(Prometheus(args.prometheus), args.dashboards, args.out, start, end,
                          args.scrape_interval)
    except (PrometheusError, ValueError, KeyError, OSError) as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 2
    for r in done:
        print(f"{r.path}: {r.size[0]}x{r.size[1]} px")
        for p in r.panels:
            print(f"  {p.kind:10} {p.series:3} series  {p.title}")
            if p.series == 0:
                empty.append(f"{os.path.basename(r.path)}: {p.title}")
    if empty and not args.allow_empty:
        print("panels without data:\n  " + "\n  ".join(empty), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
