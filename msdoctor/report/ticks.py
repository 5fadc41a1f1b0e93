"""Axis ticks a reader can read: 1-2-5 steps on linear axes, whole decades (or 1-2-5 within
one) on log axes, powers of two for the loss scale, round clock intervals on a time axis."""
from __future__ import annotations

import math
import time
from typing import List, Tuple

#: Round intervals of a time axis, in seconds.
CLOCK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400)


def linear(lo: float, hi: float, count: int = 5) -> List[float]:
    """Ticks at multiples of 1, 2 or 5 times a power of ten, about ``count`` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if (hi - lo) / (m * mag) <= count + 1.5)
    start = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(0.0 if abs(v) < step * 1e-9 else round(v, 12))
        v = start + len(ticks) * step
    return ticks


def log10_ticks(lo: float, hi: float, count: int = 6) -> List[float]:
    """Ticks (as log10 of the value) of a log axis spanning ``lo..hi`` (log10 units): every
    n-th decade, or 1-2-5 within a short span."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return []
    decades = list(range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1))
    if len(decades) >= 2:
        every = max(1, math.ceil(len(decades) / count))
        return [float(d) for d in decades if d % every == 0] or [float(decades[0])]
    values = [m * 10 ** d for d in range(math.floor(lo) - 1, math.ceil(hi) + 1) for m in (1, 2, 5)]
    chosen = [math.log10(v) for v in values if lo - 1e-9 <= math.log10(v) <= hi + 1e-9]
    if len(chosen) >= 2:
        return chosen
    return [math.log10(v) for v in linear(10 ** lo, 10 ** hi, 4) if v > 0]


def log2_ticks(lo: float, hi: float, count: int = 6) -> List[float]:
    """Ticks (as log10 of the value) at powers of two between ``10**lo`` and ``10**hi``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return []
    a, b = lo / math.log10(2), hi / math.log10(2)
    powers = list(range(math.ceil(a - 1e-9), math.floor(b + 1e-9) + 1))
    if not powers:
        return []
    every = max(1, math.ceil(len(powers) / count))
    return [p * math.log10(2) for p in powers if p % every == 0] or [powers[0] * math.log10(2)]


def clock(lo: float, hi: float, count: int = 7) -> Tuple[List[float], str]:
    """Ticks of a wall-clock axis (epoch seconds) at a round interval, and their strftime
    format (``%H:%M``, ``%H:%M:%S``, or with the date across days)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return ([lo] if math.isfinite(lo) else []), "%H:%M:%S"
    raw = (hi - lo) / count
    step = next((s for s in CLOCK_STEPS if s >= raw), CLOCK_STEPS[-1] * math.ceil(raw / 86400))
    offset = time.localtime(lo).tm_gmtoff             # round in local time, as labels read
    start = math.ceil((lo + offset) / step) * step - offset
    ticks = []
    while start + len(ticks) * step <= hi:
        ticks.append(start + len(ticks) * step)
    if hi - lo > 86400:
        return ticks, "%m-%d %H:%M"
    return ticks, "%H:%M:%S" if step < 60 else "%H:%M"
