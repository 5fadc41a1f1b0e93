"""Line charts as inline SVG text: axes with round ticks, gridlines, lines, labelled alert
markers, and the points beyond the axis marked with their value. No scripts: what a chart
says is in its text, readable printed or in a screenshot."""
from __future__ import annotations

import math
import time
from html import escape
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from msdoctor.core import format as fmt
from msdoctor.report import ticks

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
SEVERITY_COLOR = {"critical": "#d62728", "warning": "#e6a100", "info": "#4c8bf5"}
#: Colour of a clipped point's mark and value.
CLIPPED = "#b00060"

Line = Tuple[str, np.ndarray, np.ndarray, str, float]      # label, x, y, colour, width
Marker = Tuple[float, str, str, str]                      # x, tooltip, colour, label
#: Value kinds of a y axis: how its ticks are placed and written.
KINDS = ("number", "bytes", "scale", "percent", "seconds")
LABEL_ROWS = 3
#: The label suffix of a moving average drawn over its raw line.
SMOOTHED = "(smoothed)"
MAX_CLIPPED_LABELS = 8


def value_text(v: float, kind: str = "number") -> str:
    """A value as the axis of ``kind`` writes it."""
    if kind == "bytes":
        return fmt.byte_size(v)
    if kind == "scale":
        return fmt.loss_scale(v)
    if kind == "percent":
        return fmt.percent(v)
    if kind == "seconds":
        return fmt.duration(v)
    return fmt.si(v, digits=4)


def _range(ys: List[np.ndarray], log_y: bool) -> Tuple[float, float]:
    """The y range shown: every point, unless a few lie far out (then the 1st-99th
    percentile range with a margin; those beyond it are marked clipped)."""
    all_y = np.concatenate(ys)
    v = np.log10(all_y) if log_y else all_y
    lo, hi = float(v.min()), float(v.max())
    if v.size >= 20:
        q_lo, q_hi = (float(q) for q in np.percentile(v, (1, 99)))
        span = max(q_hi - q_lo, abs(q_hi) * 0.05, 1e-12)
        if hi > q_hi + 1.5 * span:
            hi = q_hi + 0.35 * span
        if lo < q_lo - 1.5 * span:
            lo = q_lo - 0.35 * span
    if hi - lo <= 1e-9 * max(abs(hi), abs(lo)):          # a flat line: centred, ±20 %
        half = 0.15 if log_y else (abs(hi) * 0.2 or 1.0)
        lo, hi = lo - half, hi + half
    pad = (hi - lo) * 0.06
    return lo - pad, hi + pad


def _y_ticks(lo: float, hi: float, log_y: bool, kind: str) -> List[float]:
    if log_y:
        return ticks.log2_ticks(lo, hi) if kind == "scale" else ticks.log10_ticks(lo, hi)
    if kind == "bytes":
        unit = 2 ** (10 * max(0, min(4, int(math.log(max(abs(hi), 1), 1024)))))
        return [t * unit for t in ticks.linear(lo / unit, hi / unit)]
    return ticks.linear(lo, hi)


def line_chart(title: str, lines: Sequence[Line], markers: Sequence[Marker] = (),
               log_y: bool = False, width: int = 920, height: int = 280,
               x_label: str = "step", bands: Sequence[float] = (), kind: str = "number",
               x_time: bool = False) -> str:
    """An SVG line chart; ``markers`` are labelled vertical lines (alerts), ``bands`` thin
    ticks under the axis (e.g. overflow steps); ``x_time``: x is epoch seconds."""
    left, right, top, bottom = 70, 16, 44, 34
    pw, ph = width - left - right, height - top - bottom
    xs = [x for _, x, y, _, _ in lines if x.size]
    ys = [y[np.isfinite(y) & ((y > 0) if log_y else True)] for _, _, y, _, _ in lines]
    ys = [y for y in ys if y.size]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
           f'class="chart">',
           f'<text x="{left}" y="16" class="title">{escape(title)}</text>']
    if not xs or not ys:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" class="empty">not recorded</text></svg>')
        return "".join(out)
    x_lo = float(min(x.min() for x in xs))
    x_hi = float(max(x.max() for x in xs))
    if x_hi <= x_lo:
        x_hi = x_lo + 1
    lo, hi = _range(ys, log_y)

    def px(x: np.ndarray) -> np.ndarray:
        return left + (x - x_lo) / (x_hi - x_lo) * pw

    def level(y: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.log10(np.where(y > 0, y, np.nan)) if log_y else y

    def py(v: np.ndarray) -> np.ndarray:
        return top + (1 - (np.clip(v, lo, hi) - lo) / (hi - lo)) * ph

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot" '
               'shape-rendering="crispEdges"/>')
    for v in _y_ticks(lo, hi, log_y, kind):
        y = float(py(np.array([v]))[0])
        label = value_text(10 ** v if log_y else v, kind)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ylab">{escape(label)}</text>')
    x_ticks, x_text = _x_axis(x_lo, x_hi, x_time)
    for v in x_ticks:
        x = left + (v - x_lo) / (x_hi - x_lo) * pw
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{top + ph + 16}" class="xlab">{escape(x_text(v))}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 2}" class="xname">{escape(x_label)}</text>')
    for step in bands:
        x = float(px(np.array([step]))[0])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph - 6}" y2="{top + ph}" class="band"/>')
    legend_x = left
    clipped: List[Tuple[float, float, bool]] = []
    for label, x, y, colour, stroke in lines:
        if not x.size:
            continue
        v = level(y)
        X, Y = px(x), py(v)
        ok = np.isfinite(v)
        gap = _gaps(x) if x_time else np.zeros(x.shape, dtype=bool)
        path, pen = [], False
        for xv, yv, good, far in zip(X.tolist(), Y.tolist(), ok.tolist(), gap.tolist()):
            if good:
                path.append(f"{'L' if pen and not far else 'M'}{xv:.1f},{yv:.1f}")
            pen = good
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" '
                   f'stroke-width="{stroke}" stroke-linejoin="round"/>')
        for xv in X[~np.isfinite(y)][:200].tolist():
            out.append(f'<text x="{xv:.1f}" y="{top + ph - 4}" class="nonfinite" '
                       f'fill="{colour}">×<title>non-finite value</title></text>')
        if not label.endswith(SMOOTHED):                  # a moving average has no spikes
            beyond = ok & ((v > hi) | (v < lo))
            clipped += [(float(a), float(b), bool(c > hi)) for a, b, c in
                        zip(X[beyond], y[beyond], v[beyond])]
        if label:
            out.append(f'<rect x="{legend_x}" y="26" width="12" height="3" fill="{colour}"/>'
                       f'<text x="{legend_x + 16}" y="31" class="legend">{escape(label)}</text>')
            legend_x += 26 + 6.5 * len(label)
    out.extend(_clipped_marks(clipped, top, ph, kind))
    out.extend(_markers(markers, px, top, ph, left + pw))
    out.append("</svg>")
    return "".join(out)


def _gaps(x: np.ndarray) -> np.ndarray:
    """Where a time series has a gap (no record for 20x its median interval and at least
    10 s): the line is broken there, so a hang shows as one."""
    if x.size < 3:
        return np.zeros(x.shape, dtype=bool)
    dx = np.diff(x)
    limit = max(20 * float(np.median(dx)), 10.0)
    return np.concatenate([[False], dx > limit])


def _x_axis(lo: float, hi: float, x_time: bool) -> Tuple[List[float], Callable[[float], str]]:
    if x_time:
        where, pattern = ticks.clock(lo, hi)
        return where, lambda v: time.strftime(pattern, time.localtime(v))
    return ticks.linear(lo, hi, 8), lambda v: fmt.si(v, digits=4)


def _clipped_marks(points: List[Tuple[float, float, bool]], top: float, ph: float,
                   kind: str) -> List[str]:
    """A triangle at the edge for each point beyond the axis; the most extreme ones (a few,
    apart from each other) carry their value."""
    out = []
    labelled: List[float] = []
    for x, value, above in sorted(points, key=lambda p: -abs(p[1])):
        edge = top if above else top + ph
        tip = edge - 1 if above else edge + 1
        base = edge + 7 if above else edge - 7
        out.append(f'<path d="M{x - 4:.1f},{base:.1f} L{x + 4:.1f},{base:.1f} L{x:.1f},{tip:.1f} Z" '
                   f'class="clipped" fill="{CLIPPED}"><title>{escape(value_text(value, kind))} '
                   '(beyond the axis)</title></path>')
        if len(labelled) < MAX_CLIPPED_LABELS and all(abs(x - o) > 46 for o in labelled):
            labelled.append(x)
            y = edge + 18 if above else edge - 10
            out.append(f'<text x="{x + 6:.1f}" y="{y:.1f}" class="clipped-value" '
                       f'fill="{CLIPPED}">{escape(value_text(value, kind))}</text>')
    return out


def _markers(markers: Sequence[Marker], px: Callable[[np.ndarray], np.ndarray], top: float,
             ph: float, right: float) -> List[str]:
    """Alert lines, each with its label (alert and rank) in the first of a few rows where it
    does not overlap another; a label that fits nowhere is left to the alert table."""
    out, row_end = [], [-1e9] * LABEL_ROWS
    for x_value, tip, colour, label in sorted(markers, key=lambda m: m[0]):
        x = float(px(np.array([float(x_value)]))[0])
        out.append(f'<g class="marker"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" '
                   f'stroke="{colour}"/><circle cx="{x:.1f}" cy="{top}" r="3.5" fill="{colour}"/>'
                   f'<title>{escape(tip)}</title></g>')
        if not label:
            continue
        width = 6.6 * len(label) + 6
        start = x + 2 if x + 2 + width <= right else x - 2 - width    # near the right edge: left
        row = next((r for r in range(LABEL_ROWS) if row_end[r] < start), None)
        if row is None:
            continue
        row_end[row] = start + width
        y = top + 32 + 14 * row
        out.append(f'<g class="alert-label"><rect x="{start:.1f}" y="{y - 10:.1f}" '
                   f'width="{width:.0f}" height="13" rx="2" fill="#fff" fill-opacity=".85"/>'
                   f'<text x="{start + 3:.1f}" y="{y:.1f}" fill="{colour}">{escape(label)}</text></g>')
    return out


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def severity_colour(severity: Optional[str]) -> str:
    return SEVERITY_COLOR.get(severity or "", "#555")
