"""One drawer per Grafana panel type benchd's dashboards use, each filling a
panel's box on the Canvas the way Grafana shows that type:

- timeseries: lines over the time range (fill and points as the panel sets
  them), threshold lines, the legend below (a table with its calcs, or a list);
- stat: the last non-null value, big, coloured by the thresholds, over an area
  sparkline;
- table: an instant query, one row per series, its labels as columns and the
  value last (Grafana's Time and __name__ columns are left out: no room);
- barchart: an instant query's value per x field (the panel's xField), one
  bar per series in each group, in order of the x field as a number.

Each returns how many series (or rows, or bars) it drew with a value, so a
caller can require data in every panel.
"""
import datetime
import math

import numpy as np
from matplotlib import dates as mdates
from matplotlib.ticker import FuncFormatter, MaxNLocator

from . import canvas as cv
from .units import format_value, scale

TITLE_PX = 30
# Room left of a plot for the value axis' labels ("41.2 TFLOP/s").
AXIS_PX = 96
LEGEND_ROW_PX = 18
CALC_NAMES = {"lastNotNull": "Last *", "last": "Last", "max": "Max", "min": "Min",
              "mean": "Mean"}


class Series:
    """A range query's series on the panel's time grid (NaN where no sample)."""

    def __init__(self, name, times, values):
        self.name, self.times, self.values = name, times, values

    def present(self):
        return self.values[~np.isnan(self.values)]


def calc(name, values):
    v = values[~np.isnan(values)]
    if v.size == 0:
        return math.nan
    if name in ("lastNotNull", "last"):
        return float(v[-1])
    if name == "max":
        return float(v.max())
    if name == "min":
        return float(v.min())
    if name == "mean":
        return float(v.mean())
    raise ValueError(f"legend calc {name!r}: not drawn here; known: {sorted(CALC_NAMES)}")


def unit_of(panel):
    return panel["fieldConfig"]["defaults"].get("unit", "none")


def thresholds_of(panel):
    t = panel["fieldConfig"]["defaults"].get("thresholds")
    return t["steps"] if t else cv.DEFAULT_THRESHOLDS


def _time_axis(ax, start, end):
    ax.set_xlim(mdates.date2num(_utc(start)), mdates.date2num(_utc(end)))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=datetime.timezone.utc))


def _utc(t):
    return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc)


class ScaledLocator(MaxNLocator):
    """Round ticks in the unit the labels show (GiB, ms, MB/s), not in raw units."""

    def __init__(self, divisor, **kw):
        super().__init__(**kw)
        self.divisor = divisor

    def tick_values(self, vmin, vmax):
        return super().tick_values(vmin / self.divisor, vmax / self.divisor) * self.divisor


def _value_axis(ax, unit, height_px, largest):
    """Ticks and labels in `unit`, scaled as the `largest` value's label is."""
    ax.yaxis.set_major_locator(ScaledLocator(scale(unit, largest),
                                             nbins=max(2, int(height_px / 40)), min_n_ticks=2))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(unit, v)))


def _legend(c, panel, box_legend, series, unit):
    """Grafana's legend below the plot: rows of colour, name and calcs."""
    x, y, w, h = box_legend
    opts = panel.get("options", {}).get("legend", {})
    calcs = opts.get("calcs", []) if opts.get("displayMode") == "table" else []
    cells = [format_value(unit, calc(name, s.values)) for s in series for name in calcs]
    calc_px = max([70] + [len(t) * cv.points_to_px(cv.FONT) * cv.CHAR_EM + 18 for t in cells])
    name_chars = cv.fit_chars(w - 30 - calc_px * len(calcs), cv.FONT)
    rows = int(h // LEGEND_ROW_PX) - (1 if calcs else 0)
    top = y + LEGEND_ROW_PX / 2
    if calcs:
        for j, name in enumerate(calcs):
            c.text(x + w - calc_px * (len(calcs) - 1 - j) - 8, top, CALC_NAMES.get(name, name),
                   fontsize=cv.FONT, color=cv.TEXT_WEAK, ha="right")
        top += LEGEND_ROW_PX
    shown = series if len(series) <= rows else series[:max(rows - 1, 0)]
    for i, s in enumerate(shown):
        row_y = top + i * LEGEND_ROW_PX
        c.rect(x + 6, row_y - 1.5, 14, 3, facecolor=s.color, edgecolor="none")
        c.text(x + 26, row_y, cv.clip(s.name, name_chars), fontsize=cv.FONT)
        for j, name in enumerate(calcs):
            c.text(x + w - calc_px * (len(calcs) - 1 - j) - 8, row_y,
                   format_value(unit, calc(name, s.values)), fontsize=cv.FONT, ha="right")
    if len(shown) < len(series):
        c.text(x + 26, top + len(shown) * LEGEND_ROW_PX,
               f"… and {len(series) - len(shown)} more series", fontsize=cv.FONT,
               color=cv.TEXT_WEAK)


def timeseries(c, panel, box, series, start, end):
    x, y, w, h = box
    series = [s for s in series if s.present().size]
    if not series:
        c.no_data(box)
        return 0
    unit = unit_of(panel)
    defaults = panel["fieldConfig"]["defaults"]
    custom = defaults.get("custom", {})
    legend = panel.get("options", {}).get("legend", {"showLegend": True, "displayMode": "list"})
    legend_px = 0
    if legend.get("showLegend", True):
        wanted = (len(series) + (1 if legend.get("displayMode") == "table" else 0)) * LEGEND_ROW_PX
        legend_px = min(wanted + 6, int((h - TITLE_PX) * 0.45))
    plot = (x + AXIS_PX, y + TITLE_PX, w - AXIS_PX - 32, h - TITLE_PX - legend_px - 24)
    ax = c.axes(*plot)
    _time_axis(ax, start, end)
    points = custom.get("showPoints", "auto")
    for i, s in enumerate(series):
        s.color = cv.PALETTE[i % len(cv.PALETTE)]
        t = mdates.date2num([_utc(v) for v in s.times])
        few = s.present().size <= 12
        ax.plot(t, s.values, color=s.color, linewidth=custom.get("lineWidth", 1),
                marker="o" if points == "always" or (points == "auto" and few) else None,
                markersize=3)
    low = min(float(s.present().min()) for s in series)
    high = max(float(s.present().max()) for s in series)
    if unit == "bool_yes_no":
        ax.set_ylim(-0.1, 1.1)
        ax.set_yticks([0, 1])
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(unit, v)))
    elif low >= 0:
        # Counts, sizes and times start at zero, as Grafana's soft minimum
        # does for them; an all-zero series gets a unit range.
        ax.set_ylim(0, high * 1.1 if high > 0 else 1)
    if custom.get("thresholdsStyle", {}).get("mode") == "line":
        for step in thresholds_of(panel)[1:]:
            ax.axhline(step["value"], color=cv.color(step["color"]), linewidth=1,
                       linestyle=(0, (6, 4)))
    bottom, top = ax.get_ylim()
    if custom.get("fillOpacity", 0):
        for s in series:
            t = mdates.date2num([_utc(v) for v in s.times])
            ax.fill_between(t, s.values, bottom, color=s.color, alpha=custom["fillOpacity"] / 100,
                            linewidth=0)
    ax.set_ylim(bottom, top)
    if unit != "bool_yes_no":
        _value_axis(ax, unit, plot[3], max(abs(low), abs(high)))
    if legend_px:
        _legend(c, panel, (x, y + h - legend_px, w, legend_px), series, unit)
    return len(series)


def stat(c, panel, box, series, start, end):
    x, y, w, h = box
    series = [s for s in series if s.present().size]
    if not series:
        c.no_data(box)
        return 0
    unit = unit_of(panel)
    calcs = panel.get("options", {}).get("reduceOptions", {}).get("calcs", ["lastNotNull"])
    slot = w / len(series)
    for i, s in enumerate(series):
        value = calc(calcs[0], s.values)
        colour = cv.threshold_color(thresholds_of(panel), value)
        sx = x + i * slot
        if panel.get("options", {}).get("graphMode", "area") == "area":
            ax = c.axes(sx + 1, y + h * 0.62, slot - 2, h * 0.38 - 1)
            ax.grid(False)
            ax.set_xticks([])
            ax.set_yticks([])
            t = s.times[~np.isnan(s.values)]
            low, high = float(s.present().min()), float(s.present().max())
            pad = (high - low) * 0.1 or abs(high) * 0.5 or 1
            ax.fill_between(t, s.present(), low - pad, color=colour, alpha=0.12, linewidth=0)
            ax.plot(t, s.present(), color=colour, linewidth=1)
            ax.set_xlim(start, end)
            ax.set_ylim(low - pad, high + pad)
        text = format_value(unit, value)
        size_px = min(h * 0.42, (slot - 20) / (max(len(text), 2) * cv.CHAR_EM))
        c.text(sx + slot / 2, y + TITLE_PX + (h - TITLE_PX) * 0.36, text, ha="center",
               color=colour, fontsize=size_px * 72 / cv.DPI, fontweight="bold")
        if len(series) > 1:
            c.text(sx + slot / 2, y + h - 12, cv.clip(s.name, cv.fit_chars(slot, cv.FONT)),
                   fontsize=cv.FONT, ha="center", color=cv.TEXT_WEAK)
    return len(series)


def table(c, panel, box, rows):
    """rows: [(labels, value)] of an instant query."""
    x, y, w, h = box
    if not rows:
        c.no_data(box)
        return 0
    unit = unit_of(panel)
    columns = sorted({k for labels, _ in rows for k in labels if k != "__name__"}) + ["Value"]
    cells = [[labels.get(k, "") for k in columns[:-1]] + [format_value(unit, value)]
             for labels, value in sorted(rows, key=lambda r: sorted(r[0].items()))]
    # Headers are bold (wider): a column is its longest text plus three characters.
    widths = [max(len(col), *(len(r[i]) for r in cells)) + 3 for i, col in enumerate(columns)]
    font = min(cv.FONT, (w - 16) / (sum(widths) * cv.CHAR_EM) * 72 / cv.DPI)
    char_px = cv.points_to_px(font) * cv.CHAR_EM
    row_px = max(15, cv.points_to_px(font) * 1.7)
    fit = int((h - TITLE_PX - row_px) // row_px)
    shown = cells if len(cells) <= fit else cells[:max(fit - 1, 0)]
    top = y + TITLE_PX + row_px / 2
    cx = x + 8
    for i, col in enumerate(columns):
        c.text(cx, top, col, fontsize=font, color=cv.TEXT_WEAK, fontweight="bold")
        for r, row in enumerate(shown):
            c.text(cx, top + (r + 1) * row_px, row[i], fontsize=font)
        cx += widths[i] * char_px
    c.rect(x + 4, top + row_px / 2, w - 8, 1, facecolor=cv.BORDER, edgecolor="none")
    if len(shown) < len(cells):
        c.text(x + 8, top + (len(shown) + 1) * row_px,
               f"… and {len(cells) - len(shown)} more rows",
               fontsize=font, color=cv.TEXT_WEAK)
    return len(cells)


def _as_number(text):
    try:
        return float(text)
    except ValueError:
        return math.inf


def barchart(c, panel, box, rows, names):
    """rows: [(labels, value)] of an instant query; names: each row's legend."""
    x, y, w, h = box
    if not rows:
        c.no_data(box)
        return 0
    unit = unit_of(panel)
    field = panel.get("options", {}).get("xField")
    if not field or any(field not in labels for labels, _ in rows):
        raise ValueError(f"bar chart {panel['title']!r}: xField {field!r} is not a label of "
                         "every row")
    categories = sorted({labels[field] for labels, _ in rows}, key=lambda v: (_as_number(v), v))
    groups = sorted(set(names))
    values = {(name, labels[field]): value for (labels, value), name in zip(rows, names)}
    legend_px = LEGEND_ROW_PX + 4 if len(groups) > 1 else 0
    plot = (x + AXIS_PX, y + TITLE_PX, w - AXIS_PX - 32, h - TITLE_PX - 28 - legend_px)
    ax = c.axes(*plot)
    ax.grid(axis="x", visible=False)
    opts = panel.get("options", {})
    slot = opts.get("groupWidth", 0.7) / len(groups)
    index = np.arange(len(categories))
    drawn = 0
    top = max((v for v in values.values() if not math.isnan(v)), default=0)
    label_values = len(categories) * len(groups) <= 32 and opts.get("showValue", "auto") != "never"
    for g, name in enumerate(groups):
        heights = [values.get((name, cat), math.nan) for cat in categories]
        drawn += sum(not math.isnan(v) for v in heights)
        centres = index - opts.get("groupWidth", 0.7) / 2 + (g + 0.5) * slot
        ax.bar(centres, heights, width=slot * opts.get("barWidth", 0.97),
               color=cv.PALETTE[g % len(cv.PALETTE)])
        if label_values:  # Grafana's showValue "auto": each bar's value above it
            for cx, v in zip(centres, heights):
                if not math.isnan(v):
                    ax.text(cx, v + top * 0.01, format_value(unit, v), ha="center", va="bottom",
                            color=cv.TEXT, fontsize=cv.FONT - 1)
    ax.set_xticks(index)
    ax.set_xticklabels(categories)
    ax.set_xlim(-0.5, len(categories) - 0.5)
    ax.set_ylim(0, top * 1.12 if top > 0 else 1)
    _value_axis(ax, unit, plot[3], top)
    if legend_px:
        # The dashboard hides the legend; with several series the colours need one.
        lx = x + AXIS_PX
        for g, name in enumerate(groups):
            c.rect(lx, y + h - legend_px / 2 - 4, 14, 3, facecolor=cv.PALETTE[g % len(cv.PALETTE)],
                   edgecolor="none")
            c.text(lx + 20, y + h - legend_px / 2 - 3, name, fontsize=cv.FONT)
            lx += 40 + len(name) * cv.points_to_px(cv.FONT) * cv.CHAR_EM
    return drawn
