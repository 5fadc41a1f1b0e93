"""The per-rank series a report plots, collected from the replay's step batches."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

#: Signals plotted, in page order.
PLOTTED = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "step_time_s", "data_wait_s",
           "data_wait_share", "mem_device_bytes", "mem_device_peak_bytes", "mem_host_rss_bytes",
           "lr")
#: Points per line on a chart (a min/max pair per bucket beyond this).
MAX_POINTS = 1500

Part = Tuple[np.ndarray, np.ndarray, np.ndarray]          # steps, times, values


class CurveCollector:
    """``observe`` is handed every replay item; ``series(name)`` gives ``{(run, rank): (x, y)}``
    with x the step, or (``x_time``) the record's wall-clock time."""

    def __init__(self) -> None:
        self._parts: Dict[Tuple[str, int, str], List[Part]] = {}
        self.overflow_steps: Dict[Tuple[str, int], List[np.ndarray]] = {}

    def observe(self, item: tuple) -> None:
        run, rank, _others, batch = item
        if batch is None or not len(batch):
            return
        for name in PLOTTED + ("overflow",):
            got = batch.series(name)
            if got is None or not len(got[0]):
                continue
            mask = batch.masks.get(name)
            t = batch.t if mask is None else batch.t[mask]
            self._parts.setdefault((run, rank, name), []).append(
                (np.array(got[0], dtype=np.float64), np.array(t, dtype=np.float64),
                 np.array(got[1], dtype=np.float64)))

    def series(self, name: str, x_time: bool = False
               ) -> Dict[Tuple[str, int], Tuple[np.ndarray, np.ndarray]]:
        out = {}
        for (run, rank, signal), parts in sorted(self._parts.items()):
            if signal == name:
                x = np.concatenate([p[1] if x_time else p[0] for p in parts])
                y = np.concatenate([p[2] for p in parts])
                keep = np.isfinite(x)
                out[(run, rank)] = (x[keep], y[keep])
        return out

    def loss_scaled(self, key: Tuple[str, int]) -> bool:
        """Whether this rank trains with loss scaling: a scale that changed (dynamic) or one
        above 1. Without it (fp32, bf16: a scale of 1) an "overflow" flag is not an fp16
        overflow but a non-finite gradient."""
        parts = self._parts.get((key[0], key[1], "loss_scale"), [])
        values = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
        values = values[np.isfinite(values)]
        return values.size > 0 and bool(values.min() != values.max() or values.max() > 1)

    def overflows(self, x_time: bool = False) -> np.ndarray:
        """The x of the overflow (skipped) steps of the ranks that train with loss scaling."""
        found = [x[y > 0] for key, (x, y) in self.series("overflow", x_time).items()
                 if self.loss_scaled(key)]
        return np.unique(np.concatenate(found)) if found else np.zeros(0)

    def time_of(self, key: Tuple[str, int], step: float) -> Optional[float]:
        """The wall-clock time of ``step`` on a rank (interpolated), None if unknown."""
        for name in ("loss",) + PLOTTED:
            parts = self._parts.get((key[0], key[1], name))
            if parts:
                s = np.concatenate([p[0] for p in parts])
                t = np.concatenate([p[1] for p in parts])
                ok = np.isfinite(t)
                if ok.any():
                    order = np.argsort(s[ok], kind="stable")
                    return float(np.interp(step, s[ok][order], t[ok][order]))
        return None


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
