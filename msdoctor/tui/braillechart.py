"""A small braille line chart: several series, optional log y axis, alert markers.

Each terminal cell holds 2×4 braille dots, so a 40×6 chart has 80×24 points of
resolution. Non-finite values are not drawn as lines: a red ``×`` on the top
row marks their steps. Alert steps are red ``┊`` columns.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from msdoctor.core import format as fmt

BRAILLE = 0x2800
DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))   # [row][col]
AXIS_WIDTH = 7
PALETTE = ("cyan", "magenta", "yellow", "green", "bright_blue", "bright_red", "white")


@dataclass(frozen=True)
class Line:
    label: str
    steps: Sequence[float]       # x: steps, or wall-clock seconds on a time axis
    values: Sequence[float]
    color: str = "cyan"
    dim: bool = False


@dataclass(frozen=True)
class Plot:
    lines: Tuple[Line, ...] = ()
    log: bool = False
    markers: Tuple[float, ...] = ()
    unit: str = ""               # "bytes" formats the axis with binary suffixes
    empty: str = "no data"
    time_axis: bool = False      # x is wall-clock seconds (labels HH:MM:SS), not steps
    x_until: Optional[float] = None   # extend the x axis to here (a hang shows as a gap)


def x_label(x: float, time_axis: bool) -> str:
    """A step number, or a wall-clock time as local ``HH:MM:SS``."""
    if time_axis:
        return time.strftime("%H:%M:%S", time.localtime(x))
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def smooth(values: Sequence[float], weight: float = 0.9) -> List[float]:
    """TensorBoard's debiased exponential moving average; non-finite points stay NaN."""
    out, last, n = [], 0.0, 0
    for v in values:
        if not math.isfinite(v):
            out.append(math.nan)
            continue
        n += 1
        last = last * weight + (1 - weight) * v
        out.append(last / (1 - weight ** n))
    return out


def _axis(value: float, unit: str) -> str:
    return (fmt.byte_size(value) if unit == "bytes" else fmt.number(value, 3)).rjust(AXIS_WIDTH - 1)


def render_plot(plot: Plot, width: int, height: int) -> Text:
    """The chart as ``height`` lines of ``width`` cells."""
    cols, rows = width - AXIS_WIDTH, height - 1
    if cols < 4 or rows < 1:
        return Text(no_wrap=True, overflow="crop")
    xs, ys = [], []
    for line in plot.lines:
        for s, v in zip(line.steps, line.values):
            xs.append(s)
            if math.isfinite(v) and (not plot.log or v > 0):
                ys.append(math.log10(v) if plot.log else v)
    if not xs:
        return Text(plot.empty, style="dim")
    x0, x1 = min(xs), max(xs)
    if plot.x_until is not None and plot.x_until > x1:
        x1 = plot.x_until
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y1 - y0 < 1e-12 * max(1.0, abs(y1)):
        y0, y1 = y0 - 0.5 if not plot.log else y0 - 0.25, y1 + 0.5 if not plot.log else y1 + 0.25
    w, h = cols * 2, rows * 4
    dots = [[0] * cols for _ in range(rows)]
    color: List[List[Optional[str]]] = [[None] * cols for _ in range(rows)]
    bad = [False] * cols

    def px(step: float) -> int:
        return 0 if x1 == x0 else int(round((step - x0) / (x1 - x0) * (w - 1)))

    def py(v: float) -> int:
        y = math.log10(v) if plot.log else v
        return h - 1 - int(round((y - y0) / (y1 - y0) * (h - 1)))

    for line in plot.lines:
        style = line.color + (" dim" if line.dim else "")
        prev = None
        for s, v in zip(line.steps, line.values):
            if not math.isfinite(v) or (plot.log and v <= 0):
                bad[min(cols - 1, px(s) // 2)] = bad[min(cols - 1, px(s) // 2)] or not math.isfinite(v)
                prev = None
                continue
            point = (px(s), max(0, min(h - 1, py(v))))
            for x, y in _segment(prev, point):
                dots[y // 4][x // 2] |= DOTS[y % 4][x % 2]
                color[y // 4][x // 2] = style
            prev = point
    marks = {min(cols - 1, px(m) // 2) for m in plot.markers if x0 <= m <= x1}
    labels = {0: _axis(10 ** y1 if plot.log else y1, plot.unit),
              rows - 1: _axis(10 ** y0 if plot.log else y0, plot.unit)}
    runs = _Runs()
    for r in range(rows):
        runs.add(labels.get(r, " " * (AXIS_WIDTH - 1)) + "┤" if r in labels
                 else " " * (AXIS_WIDTH - 1) + "│", "dim")
        dot_row, color_row = dots[r], color[r]
        for c in range(cols):
            if r == 0 and bad[c]:
                runs.add("×", "bold red")
            elif dot_row[c]:
                runs.add(chr(BRAILLE + dot_row[c]), "red" if c in marks else color_row[c])
            elif c in marks:
                runs.add("┊", "red")
            else:
                runs.add(" ", None)
        runs.add("\n", None)
    left, right = x_label(x0, plot.time_axis), x_label(x1, plot.time_axis)
    axis = " " * (AXIS_WIDTH - 1) + "└" + left + right.rjust(max(1, cols - len(left)))
    runs.add(axis[:width], "dim")
    return runs.text()


class _Runs:
    """Text built cell by cell, one span per run of cells of the same style (a chart has
    thousands of cells: one ``Text.append`` each, and as many spans, cost more than the
    rest of the chart)."""

    def __init__(self) -> None:
        self.parts: List[str] = []
        self.spans: List[Span] = []
        self.pos = 0
        self.start = 0
        self.style: Optional[str] = None

    def add(self, text: str, style: Optional[str]) -> None:
        if style != self.style:
            self._close()
            self.start, self.style = self.pos, style
        self.parts.append(text)
        self.pos += len(text)

    def _close(self) -> None:
        if self.style and self.pos > self.start:
            self.spans.append(Span(self.start, self.pos, self.style))

    def text(self) -> Text:
        self._close()
        self.style = None
        return Text("".join(self.parts), spans=self.spans, no_wrap=True, overflow="crop")


def _segment(a: Optional[Tuple[int, int]], b: Tuple[int, int]) -> List[Tuple[int, int]]:
    """The dots from ``a`` to ``b`` (Bresenham), or just ``b``."""
    if a is None:
        return [b]
    (x0, y0), (x1, y1) = a, b
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err, out = dx + dy, []
    while True:
        out.append((x0, y0))
        if (x0, y0) == (x1, y1):
            return out
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


class Chart(Widget, can_focus=True):
    """A titled chart widget; set :attr:`plot` to redraw."""

    DEFAULT_CSS = """
    Chart { border: round $panel-lighten-2; height: 1fr; min-height: 4; padding: 0; }
    Chart:focus { border: round $accent; }
    """

    def __init__(self, title: str, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.plot = Plot()
        self._strips: List[Strip] = []
        self._drawn: Optional[Tuple[Plot, Size, object]] = None    # what _strips show

    def set_plot(self, plot: Plot, legend: str = "") -> None:
        """Show ``plot``; a plot equal to the one shown is not drawn again."""
        self.border_subtitle = legend
        try:
            same = plot == self.plot
        except ValueError:          # numpy arrays compare element-wise: call it changed
            same = False
        if not same:
            self.plot = plot
            self.refresh()

    def render(self) -> Text:
        return render_plot(self.plot, self.content_region.width, self.content_region.height)

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the chart: the rich text drawn straight into strips (Textual's
        general path converts every span of a chart of thousands of cells first)."""
        style = self.visual_style.rich_style
        key = (self.plot, self.size, style)
        if self._drawn is None or self._drawn[0] is not self.plot or self._drawn[1:] != key[1:]:
            self._strips = self._draw(style)
            self._drawn = key
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, style)

    def _draw(self, style: Style) -> List[Strip]:
        width, height = self.size
        console = self.app.console
        strips = []
        for line in self.render().split("\n", allow_blank=True)[:height]:
            segments = Segment.apply_style(line.render(console), style)
            strips.append(Strip(segments).crop_extend(0, width, style))
        return strips
