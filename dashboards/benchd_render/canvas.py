"""Grafana's grid on a matplotlib figure, in its dark theme.

A dashboard is 24 columns wide; a grid row is 30 px with 8 px between panels
(Grafana's GRID_CELL_HEIGHT and GRID_CELL_VMARGIN). Everything here is in
pixels from the top left, as gridPos is, and turned into figure fractions at
the last moment, so the PNG is exactly canvas_size() pixels.
"""
import matplotlib

matplotlib.use("Agg")  # no display on CI or the GPU machines
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

WIDTH_PX = 1600
DPI = 100
COLUMNS = 24
CELL_PX = 30
MARGIN_PX = 8
PAD_PX = 8
HEADER_PX = 76

# Grafana's dark theme and its classic palette (the order series get colours).
BACKGROUND = "#111217"
PANEL = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
TEXT_WEAK = "#8e8e9b"
GRID = "#2c3235"
PALETTE = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9",
           "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17", "#890F02", "#0A437C",
           "#6D1F62", "#584477"]
NAMED_COLORS = {"green": "#73BF69", "red": "#F2495C", "orange": "#FF9830", "yellow": "#FADE2A",
                "blue": "#5794F2", "purple": "#B877D9", "text": TEXT}
# Grafana's thresholds when a panel sets none.
DEFAULT_THRESHOLDS = [{"value": None, "color": "green"}, {"value": 80, "color": "red"}]
# Text sizes in points: legends and axes, panel titles.
FONT = 9
FONT_TITLE = 11
# Average width of a character of DejaVu Sans, in em, to fit text to a box.
CHAR_EM = 0.58


def grid_rows(panels):
    return max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels), default=0)


def canvas_size(dashboard):
    """(width, height) in pixels of the picture of `dashboard`."""
    rows = grid_rows(dashboard["panels"])
    return WIDTH_PX, HEADER_PX + rows * (CELL_PX + MARGIN_PX) - MARGIN_PX + PAD_PX


def color(name):
    return NAMED_COLORS.get(name, name)


def threshold_color(steps, value):
    """The colour of the last step at or below `value` (the first step is the base)."""
    chosen = steps[0]["color"]
    for s in steps[1:]:
        if s["value"] is not None and value >= s["value"]:
            chosen = s["color"]
    return color(chosen)


def points_to_px(pt):
    return pt * DPI / 72


def fit_chars(width_px, font_pt):
    """How many characters of `font_pt` fit in `width_px`."""
    return max(1, int(width_px / (points_to_px(font_pt) * CHAR_EM)))


def clip(text, chars):
    return text if len(text) <= chars else text[:max(chars - 1, 0)] + "…"


class Canvas:
    """One figure: panels are boxes in pixels; axes and text go inside them."""

    def __init__(self, dashboard):
        self.width, self.height = canvas_size(dashboard)
        self.figure = Figure(figsize=(self.width / DPI, self.height / DPI), dpi=DPI,
                             facecolor=BACKGROUND)

    def box(self, grid_pos):
        """(x, y, w, h) in pixels of a gridPos."""
        col = (self.width - 2 * PAD_PX + MARGIN_PX) / COLUMNS
        x = PAD_PX + grid_pos["x"] * col
        y = HEADER_PX + grid_pos["y"] * (CELL_PX + MARGIN_PX)
        return (x, y, grid_pos["w"] * col - MARGIN_PX,
                grid_pos["h"] * CELL_PX + (grid_pos["h"] - 1) * MARGIN_PX)

    def fraction(self, x, y, w, h):
        """A pixel box as matplotlib's [left, bottom, width, height] of the figure."""
        return [x / self.width, 1 - (y + h) / self.height, w / self.width, h / self.height]

    def text(self, x, y, s, **kw):
        kw.setdefault("color", TEXT)
        kw.setdefault("fontsize", FONT)
        kw.setdefault("va", "center")
        return self.figure.text(x / self.width, 1 - y / self.height, s, **kw)

    def rect(self, x, y, w, h, **kw):
        self.figure.add_artist(Rectangle((x / self.width, 1 - (y + h) / self.height),
                                         w / self.width, h / self.height,
                                         transform=self.figure.transFigure, **kw))

    def axes(self, x, y, w, h):
        ax = self.figure.add_axes(self.fraction(x, y, w, h))
        ax.set_facecolor(PANEL)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.tick_params(colors=TEXT_WEAK, labelsize=FONT, length=0, pad=4)
        ax.grid(True, color=GRID, linewidth=0.8)
        ax.set_axisbelow(True)
        return ax

    def panel_frame(self, box, title):
        x, y, w, h = box
        # Below the panel's axes: figure-level patches otherwise draw over them.
        self.rect(x, y, w, h, facecolor=PANEL, edgecolor=BORDER, linewidth=1, zorder=-10)
        self.text(x + 10, y + 15, clip(title, fit_chars(w - 20, FONT_TITLE)), fontsize=FONT_TITLE,
                  fontweight="bold")

    def no_data(self, box):
        x, y, w, h = box
        self.text(x + w / 2, y + h / 2 + 10, "No data", fontsize=12, color=TEXT_WEAK,
                  ha="center")

    def save(self, path):
        self.figure.savefig(path, dpi=DPI, facecolor=BACKGROUND)
