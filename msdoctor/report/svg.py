"""Line charts as inline SVG text: axes, gridlines, lines, and alert markers. No scripts."""
from __future__ import annotations

import math
from html import escape
from typing import List, Optional, Sequence, Tuple

import numpy as np

from msdoctor.core.format import si

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
SEVERITY_COLOR = {"critical": "#d62728", "warning": "#e6a100", "info": "#4c8bf5"}

Line = Tuple[str, np.ndarray, np.ndarray, str, float]      # label, x, y, colour, width
Marker = Tuple[float, str, str]                           # step, tooltip, colour


def _ticks(lo: float, hi: float, count: int = 5) -> List[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def line_chart(title: str, lines: Sequence[Line], markers: Sequence[Marker] = (),
               log_y: bool = False, width: int = 920, height: int = 260,
               x_label: str = "step", bands: Sequence[float] = ()) -> str:
    """An SVG line chart; ``markers`` are vertical lines at steps (alerts), ``bands`` thin
    ticks under the axis (e.g. overflow steps)."""
    left, right, top, bottom = 64, 16, 28, 34
    pw, ph = width - left - right, height - top - bottom
    xs = [x for _, x, y, _, _ in lines if x.size]
    ys = [y[np.isfinite(y) & ((y > 0) if log_y else True)] for _, _, y, _, _ in lines]
    ys = [y for y in ys if y.size]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
           f'<text x="{left}" y="18" class="title">{escape(title)}</text>']
    if not xs or not ys:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" class="empty">not recorded</text></svg>')
        return "".join(out)
    x_lo = float(min(x.min() for x in xs))
    x_hi = float(max(x.max() for x in xs))
    if x_hi <= x_lo:
        x_hi = x_lo + 1
    all_y = np.concatenate(ys)
    lo, hi = float(np.percentile(all_y, 0.5)), float(np.percentile(all_y, 99.5))
    lo, hi = min(lo, float(all_y.min())) if all_y.size < 200 else lo, \
        max(hi, float(all_y.max())) if all_y.size < 200 else hi
    if log_y:
        lo, hi = math.log10(lo), math.log10(hi)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.06
    lo, hi = lo - pad, hi + pad

    def px(x: np.ndarray) -> np.ndarray:
        return left + (x - x_lo) / (x_hi - x_lo) * pw

    def py(y: np.ndarray) -> np.ndarray:
        v = np.log10(np.where(y > 0, y, np.nan)) if log_y else y
        return top + (1 - (np.clip(v, lo, hi) - lo) / (hi - lo)) * ph

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot"/>')
    for v in _ticks(lo, hi):
        y = top + (1 - (v - lo) / (hi - lo)) * ph
        label = si(10 ** v if log_y else v, digits=4)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" class="ylab">{label}</text>')
    for v in _ticks(x_lo, x_hi, 8):
        x = left + (v - x_lo) / (x_hi - x_lo) * pw
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{top + ph + 16}" class="xlab">{si(v, digits=4)}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 2}" class="xlab" text-anchor="end">'
               f'{escape(x_label)}</text>')
    for step in bands:
        x = float(px(np.array([step]))[0])
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + ph - 6}" y2="{top + ph}" class="band"/>')
    legend_x = left + 8
    for label, x, y, colour, stroke in lines:
        if not x.size:
            continue
        X, Y = px(x), py(y)
        ok = np.isfinite(y) & ((y > 0) if log_y else True)
        path, pen = [], False
        for xv, yv, good in zip(X.tolist(), Y.tolist(), ok.tolist()):
            if good:
                path.append(f"{'L' if pen else 'M'}{xv:.1f},{yv:.1f}")
            pen = good
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" '
                   f'stroke-width="{stroke}" stroke-linejoin="round"/>')
        bad = ~np.isfinite(y)
        for xv in X[bad][:200].tolist():
            out.append(f'<text x="{xv:.1f}" y="{top + 12}" class="nonfinite" '
                       f'fill="{colour}">×<title>non-finite value</title></text>')
        if label:
            out.append(f'<rect x="{legend_x}" y="{top + 6}" width="10" height="3" fill="{colour}"/>'
                       f'<text x="{legend_x + 14}" y="{top + 11}" class="legend">{escape(label)}</text>')
            legend_x += 22 + 7 * len(label)
    for step, tip, colour in markers:
        x = float(px(np.array([float(step)]))[0])
        out.append(f'<g class="marker"><line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" '
                   f'stroke="{colour}"/><circle cx="{x:.1f}" cy="{top}" r="4" fill="{colour}"/>'
                   f'<title>{escape(tip)}</title></g>')
    out.append("</svg>")
    return "".join(out)


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def severity_colour(severity: Optional[str]) -> str:
    return SEVERITY_COLOR.get(severity or "", "#555")
