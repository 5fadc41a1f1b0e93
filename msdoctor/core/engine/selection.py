"""The k-th smallest value of many windows ``V[lo:hi]`` at once, without sorting each window.

A sliding median over a batch sorts every window: ``O(w log w)`` per row for a window of
``w`` points. :class:`Selection` ranks the batch's points once (one ``argsort``) and builds a
*wavelet matrix* over the ranks: ``L = bit_length(N)`` levels, each a stable partition of the
ranks by one bit with its prefix counts of zeros. A query ``(lo, hi, k)`` then descends the
levels, keeping the count of its window's points on each side of each bit: ``O(L)`` per query
whatever the window's length, done for all queries at once with array operations.

The answer is the point of rank ``r`` in the batch, i.e. exactly the value a sort of the window
puts at position ``k`` (``tests/msdoctor/core/engine/test_selection.py``).
"""
from __future__ import annotations

import math

import numpy as np

#: Rough CPU cost, in ns, of one level of the build per point, of one level of a query,
#: and of sorting one window element per comparison level (measured with numpy 1.26).
_BUILD_NS, _QUERY_NS, _SORT_NS = 30.0, 25.0, 4.0


def pays(points: int, queries: int, width: int, picks: int = 2) -> bool:
    """Whether building a :class:`Selection` over ``points`` and asking ``picks`` order
    statistics of ``queries`` windows costs less than sorting windows ``width`` wide."""
    if queries == 0 or width < 8:
        return False
    levels = max(1, (points - 1).bit_length())
    select = levels * (_BUILD_NS * points + _QUERY_NS * picks * queries)
    return select < _SORT_NS * queries * width * math.log2(width)


class Selection:
    """Order statistics of windows of ``V`` (finite values): see the module text."""

    def __init__(self, V: np.ndarray) -> None:
        n = V.shape[0]
        order = np.argsort(V, kind="stable")
        self.values = V[order]
        dtype = np.int32 if n < 2**31 - 1 else np.int64
        rank = np.empty(n, dtype=dtype)
        rank[order] = np.arange(n, dtype=dtype)
        self.levels = max(1, (n - 1).bit_length())
        self.zeros = np.zeros((self.levels, n + 1), dtype=dtype)  # zeros before each position
        self.total = np.zeros(self.levels, dtype=dtype)          # zeros on each level
        self.dtype = dtype
        cur = rank
        for i in range(self.levels):
            bit = self.levels - 1 - i
            zero = ((cur >> bit) & 1) == 0
            np.cumsum(zero, out=self.zeros[i, 1:])
            self.total[i] = self.zeros[i, -1]
            cur = np.concatenate((cur[zero], cur[~zero]))

    def kth(self, lo: np.ndarray, hi: np.ndarray, k: np.ndarray) -> np.ndarray:
        """The ``k``-th smallest (from 0) of each ``V[lo:hi]``; needs ``0 <= k < hi - lo``."""
        dtype = self.dtype
        lo, hi, k = lo.astype(dtype), hi.astype(dtype), k.astype(dtype)
        rank = np.zeros(lo.shape[0], dtype=dtype)
        for i in range(self.levels):
            zeros = self.zeros[i]
            zl, zh = zeros.take(lo), zeros.take(hi)
            below = zh - zl                     # the window's points with this bit 0
            right = k >= below
            k = np.where(right, k - below, k)
            shift = self.total[i]
            lo = np.where(right, lo - zl + shift, zl)
            hi = np.where(right, hi - zh + shift, zh)
            rank += rank
            rank += right
        return self.values.take(rank)

    def median(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Median of each window (the mean of its two middle values; NaN if empty), as
        :func:`msdoctor.core.engine.orderstats.row_median` of the sorted window."""
        cnt = hi - lo
        out = np.full(cnt.shape[0], np.nan)
        rows = np.flatnonzero(cnt > 0)
        if rows.shape[0]:
            c, a = cnt[rows], lo[rows]
            both = self.kth(np.concatenate((a, a)), np.concatenate((a + c, a + c)),
                            np.concatenate(((c - 1) // 2, c // 2)))
            out[rows] = (both[:rows.shape[0]] + both[rows.shape[0]:]) / 2.0
        return out

    def quantile(self, lo: np.ndarray, hi: np.ndarray, q: float) -> np.ndarray:
        """The q-quantile (linear interpolation) of each window, as
        :func:`msdoctor.core.engine.orderstats.row_quantile` of the sorted window."""
        cnt = hi - lo
        out = np.full(cnt.shape[0], np.nan)
        rows = np.flatnonzero(cnt > 0)
        if rows.shape[0]:
            c, a = cnt[rows], lo[rows]
            pos = q * (c - 1)
            below = np.floor(pos).astype(np.int64)
            above = np.minimum(below + 1, c - 1)
            both = self.kth(np.concatenate((a, a)), np.concatenate((a + c, a + c)),
                            np.concatenate((below, above)))
            x, y = both[:rows.shape[0]], both[rows.shape[0]:]
            out[rows] = x + (pos - below) * (y - x)
        return out
