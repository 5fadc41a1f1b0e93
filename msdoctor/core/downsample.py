"""Shrink a step series for a chart without losing its spikes or its NaNs.

Min/max decimation: the points are cut into equal buckets by index and each
bucket keeps its minimum and its maximum (a non-finite value counts as an
extreme, so a NaN loss is never averaged away). At most ``max_points`` points
come back, in step order.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np


def minmax(steps: np.ndarray, values: np.ndarray, max_points: int) -> Tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` of ``(steps, values)``: each bucket's min and max, in order."""
    n = int(steps.shape[0])
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points!r}")
    if n <= max_points:
        return steps, values
    if max_points == 1:
        return steps[-1:], values[-1:]
    buckets = max_points // 2
    size = -(-n // buckets)                     # ceil
    rows = -(-n // size)
    pad = rows * size - n
    v = np.concatenate([values.astype(np.float64), np.full(pad, np.nan)]).reshape(rows, size)
    real = (np.arange(rows * size) < n).reshape(rows, size)
    odd = ~np.isfinite(v) & real                # NaN/Inf that were recorded
    low = np.where(real & ~odd, v, np.inf).argmin(axis=1)
    high = np.where(real & ~odd, v, -np.inf).argmax(axis=1)
    has_odd = odd.any(axis=1)
    high = np.where(has_odd, odd.argmax(axis=1), high)
    all_odd = ~(real & ~odd).any(axis=1)
    low = np.where(all_odd, high, low)
    base = np.arange(rows) * size
    keep = np.unique(np.concatenate([base + low, base + high]))
    keep = keep[keep < n]
    return steps[keep], values[keep]
