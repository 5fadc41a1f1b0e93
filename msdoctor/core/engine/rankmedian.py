"""``rank_median(x)``: the median over the run's ranks of their latest value of x."""
from __future__ import annotations

import math
from bisect import bisect_left, insort
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.nodes import Frame, Node, Out


class RankMedian(Node):
    """Median over the run's ranks of their latest value of x (this row's value for this rank)."""

    name = "rank_median"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        (x, mx), = args
        rank = frame.rank
        latest = rank.run.latest.setdefault(self.children[0].key, {})
        others = np.array([v for r, v in latest.items() if r != rank.rank], dtype=np.float64)
        if frame.n:
            latest[rank.rank] = float(x[-1])
        if others.size == 0:
            return x, mx
        matrix = np.empty((frame.n, others.size + 1))
        matrix[:, 0] = x
        matrix[:, 1:] = others
        matrix.sort(axis=1)                       # NaN sort last
        k = np.count_nonzero(~np.isnan(matrix), axis=1)
        rows = np.arange(frame.n)
        lo = np.maximum((k - 1) // 2, 0)
        hi = np.maximum(k // 2, 0)
        out = (matrix[rows, lo] + matrix[rows, hi]) / 2.0
        out[k == 0] = np.nan
        return out, mx

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """Rank after rank as :meth:`evaluate` (each sees the ranks before it at their new
        value), on a sorted list of the run's finite latest values (a rank with one new row,
        the common case in a live poll, in a few list operations)."""
        (x, mx), = args
        segs = frame.segments
        out = x.copy()
        key = self.children[0].key
        pools: Dict[int, Tuple[Dict[int, float], List[float]]] = {}
        bounds = segs.bounds.tolist()
        for r, sub in enumerate(segs.frames):
            ctx = sub.rank
            latest = ctx.run.latest.setdefault(key, {})
            pool = pools.get(id(latest))
            if pool is None:
                pool = pools[id(latest)] = (latest, sorted(v for v in latest.values()
                                                           if not math.isnan(v)))
            fin = pool[1]
            a, z = bounds[r], bounds[r + 1]
            own = latest.get(ctx.rank)
            others = len(latest) - (own is not None)
            if own is not None and not math.isnan(own):
                del fin[bisect_left(fin, own)]
            new = float(x[z - 1])
            if others:
                if z - a == 1:
                    out[a] = _median_of_one(fin, new)
                else:
                    out[a:z] = _median_with(np.array(fin, dtype=np.float64), x[a:z])
            latest[ctx.rank] = new
            if not math.isnan(new):
                insort(fin, new)
        return out, mx


def _median_of_one(fin: List[float], x: float) -> float:
    """:func:`_median_with` for one value: the median of the sorted finite ``fin`` and ``x``."""
    m = len(fin)
    if math.isnan(x):
        return (fin[(m - 1) // 2] + fin[m // 2]) / 2.0 if m else math.nan
    p = bisect_left(fin, x)

    def order(j: int) -> float:
        return x if j == p else fin[j - 1] if j > p else fin[j]

    return (order(m // 2) + order((m + 1) // 2)) / 2.0


def _median_with(fin: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per value of ``x``: the median of the sorted finite ``fin`` and that value (NaN x:
    of ``fin`` alone; NaN when both are empty)."""
    m = fin.shape[0]
    finite = ~np.isnan(x)
    k = m + finite
    p = np.searchsorted(fin, np.where(finite, x, np.inf))

    def order(j: np.ndarray) -> np.ndarray:
        """The j-th of fin with x inserted at p (x only where finite)."""
        at = np.where(finite & (j > p), j - 1, j)
        got = fin[np.clip(at, 0, max(m - 1, 0))] if m else np.full(j.shape[0], np.nan)
        return np.where(finite & (j == p), x, got)

    out = (order(np.maximum((k - 1) // 2, 0)) + order(np.maximum(k // 2, 0))) / 2.0
    out[k == 0] = np.nan
    return out
