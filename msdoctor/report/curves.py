"""The per-rank series a report plots, collected from the replay's step batches."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

#: Signals plotted, in page order.
PLOTTED = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "step_time_s", "lr")
#: Points per line on a chart (a min/max pair per bucket beyond this).
MAX_POINTS = 1500


class CurveCollector:
    """``observe`` is handed every replay item; ``series(name)`` gives ``{rank: (steps, values)}``."""

    def __init__(self) -> None:
        self._parts: Dict[Tuple[str, int, str], List[Tuple[np.ndarray, np.ndarray]]] = {}
        self.overflow_steps: Dict[Tuple[str, int], List[np.ndarray]] = {}

    def observe(self, item: tuple) -> None:
        run, rank, _others, batch = item
        if batch is None or not len(batch):
            return
        for name in PLOTTED:
            got = batch.series(name)
            if got is not None and len(got[0]):
                self._parts.setdefault((run, rank, name), []).append(
                    (np.array(got[0], dtype=np.float64), np.array(got[1], dtype=np.float64)))
        over = batch.series("overflow")
        if over is not None:
            hit = over[0][over[1] > 0]
            if hit.size:
                self.overflow_steps.setdefault((run, rank), []).append(np.array(hit))

    def series(self, name: str) -> Dict[Tuple[str, int], Tuple[np.ndarray, np.ndarray]]:
        out = {}
        for (run, rank, signal), parts in sorted(self._parts.items()):
            if signal == name:
                out[(run, rank)] = (np.concatenate([p[0] for p in parts]),
                                    np.concatenate([p[1] for p in parts]))
        return out

    def overflows(self) -> np.ndarray:
        parts = [a for v in self.overflow_steps.values() for a in v]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0)


def decimate(x: np.ndarray, y: np.ndarray, points: int = MAX_POINTS) -> Tuple[np.ndarray, np.ndarray]:
    """At most ~``points`` points keeping each bucket's min and max (spikes stay visible)."""
    n = x.shape[0]
    if n <= points:
        return x, y
    buckets = points // 2
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b <= a:
            continue
        seg = y[a:b]
        finite = np.isfinite(seg)
        if not finite.any():
            keep.append(a)
            continue
        lo = a + int(np.nanargmin(np.where(finite, seg, np.nan)))
        hi = a + int(np.nanargmax(np.where(finite, seg, np.nan)))
        keep.extend(sorted({lo, hi}))
    index = np.array(sorted(set(keep)), dtype=np.int64)
    return x[index], y[index]


def smooth(y: np.ndarray, window: Optional[int] = None) -> np.ndarray:
    """Trailing moving average over the finite points (window ~1/50 of the series, ≥ 5)."""
    n = y.shape[0]
    w = window or max(5, n // 50)
    finite = np.isfinite(y)
    values = np.where(finite, y, 0.0)
    csum = np.concatenate([[0.0], np.cumsum(values)])
    ccount = np.concatenate([[0], np.cumsum(finite)])
    lo = np.maximum(np.arange(1, n + 1) - w, 0)
    hi = np.arange(1, n + 1)
    count = ccount[hi] - ccount[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (csum[hi] - csum[lo]) / count, np.nan)
