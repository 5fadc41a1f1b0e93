"""``rank_median(x)``: the median over the run's ranks of their latest value of x."""
from __future__ import annotations

import math
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
        value), on a sorted array of the run's finite latest values (O(ranks) in C per rank)."""
        (x, mx), = args
        segs = frame.segments
        out = x.copy()
        key = self.children[0].key
        pools: Dict[int, Tuple[Dict[int, float], np.ndarray]] = {}
        bounds = segs.bounds.tolist()
        for r, sub in enumerate(segs.frames):
            ctx = sub.rank
            latest = ctx.run.latest.setdefault(key, {})
            pool = pools.get(id(latest))
            if pool is None:
                values = np.array(list(latest.values()), dtype=np.float64)
                pool = pools[id(latest)] = (latest, np.sort(values[~np.isnan(values)]))
            fin = pool[1]
            a, z = bounds[r], bounds[r + 1]
            own = latest.get(ctx.rank)
            others = len(latest) - (own is not None)
            if own is not None and not math.isnan(own):
                fin = np.delete(fin, np.searchsorted(fin, own))
            if others:
                out[a:z] = _median_with(fin, x[a:z])
            new = float(x[z - 1])
            latest[ctx.rank] = new
            if not math.isnan(new):
                fin = np.insert(fin, np.searchsorted(fin, new), new)
            pools[id(latest)] = (latest, fin)
        return out, mx


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
