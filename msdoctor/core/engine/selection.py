"""Order statistics of many windows ``V[lo:hi]`` at once: sorted rows, or a selection.

:func:`sorted_windows` lays the windows out as rows and sorts them (``robust_z`` needs the
whole sorted row for its MAD); :func:`row_median`, :func:`row_mad`, :func:`row_quantile` read
them. ``median`` and ``quantile`` need two values of each window only, and over a long batch
they are taken from a :class:`Selection` instead, when :func:`pays` says it costs less.

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

import importlib
import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from msdoctor.core.engine.sortedrows import SortedRows, row_mad, row_median, row_quantile  # noqa: F401

#: Rough CPU cost, in ns, of one level of the build per point, of one level of a query,
#: and of sorting one window element per comparison level (measured with numpy 1.26).
_BUILD_NS, _QUERY_NS, _SORT_NS = 30.0, 25.0, 4.0
#: ... and of a sliding rank filter (SciPy) per point, for two order statistics.
_FILTER_NS = 150.0


def pays(points: int, queries: int, width: int, picks: int = 2) -> bool:
    """Whether building a :class:`Selection` over ``points`` and asking ``picks`` order
    statistics of ``queries`` windows costs less than sorting windows ``width`` wide."""
    if queries == 0 or width < 8:
        return False
    levels = max(1, (points - 1).bit_length())
    select = levels * (_BUILD_NS * points + _QUERY_NS * picks * queries)
    return select < _SORT_NS * queries * width * math.log2(width)


class Picker:
    """Median and quantiles of windows from two order statistics of each (:meth:`pairs`)."""

    def pairs(self, lo: np.ndarray, hi: np.ndarray, first: np.ndarray, second: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray]:
        """The ``first``-th and the ``second``-th smallest of each (non-empty) ``V[lo:hi]``."""
        raise NotImplementedError

    def median(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Median of each window (the mean of its two middle values; NaN if empty), as
        :func:`row_median` of the sorted window."""
        cnt = hi - lo
        out = np.full(cnt.shape[0], np.nan)
        rows = np.flatnonzero(cnt > 0)
        if rows.shape[0]:
            c = cnt[rows]
            x, y = self.pairs(lo[rows], hi[rows], (c - 1) // 2, c // 2)
            out[rows] = (x + y) / 2.0
        return out

    def quantile(self, lo: np.ndarray, hi: np.ndarray, q: float) -> np.ndarray:
        """The q-quantile (linear interpolation) of each window, as :func:`row_quantile` of
        the sorted window."""
        cnt = hi - lo
        out = np.full(cnt.shape[0], np.nan)
        rows = np.flatnonzero(cnt > 0)
        if rows.shape[0]:
            c = cnt[rows]
            pos = q * (c - 1)
            below = np.floor(pos).astype(np.int64)
            above = np.minimum(below + 1, c - 1)
            x, y = self.pairs(lo[rows], hi[rows], below, above)
            out[rows] = x + (pos - below) * (y - x)
        return out


class Selection(Picker):
    """Order statistics of windows of ``V`` (finite values): see the module text."""

    def __init__(self, V: np.ndarray) -> None:
        n = V.shape[0]
        order = np.argsort(V, kind="stable")
        self.values = V[order]
        dtype: Any = np.int32 if n < 2**31 - 1 else np.int64
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

    def pairs(self, lo: np.ndarray, hi: np.ndarray, first: np.ndarray, second: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray]:
        both = self.kth(np.concatenate((lo, lo)), np.concatenate((hi, hi)),
                        np.concatenate((first, second)))
        return both[:lo.shape[0]], both[lo.shape[0]:]


def rank_filter() -> Any:
    """``scipy.ndimage.rank_filter`` (a sliding order statistic in C), or None without SciPy."""
    global _RANK_FILTER
    if _RANK_FILTER is False:
        try:
            found = importlib.import_module("scipy.ndimage").rank_filter
        except ImportError:          # SciPy is optional (MindSpore brings it to training nodes)
            found = None
        _RANK_FILTER = found
    return _RANK_FILTER


_RANK_FILTER: Any = False


class Sliding(Picker):
    """Order statistics of windows that all hold ``width`` points, from a sliding rank
    filter over ``V`` (:func:`rank_filter`): the ``k``-th smallest of every ``V[i:i+width]``
    at once, in C; exactly the values a sort of each window gives."""

    def __init__(self, V: np.ndarray, width: int) -> None:
        self.V, self.width = V, width
        self.filtered: Dict[int, np.ndarray] = {}

    def kth(self, lo: np.ndarray, k: int) -> np.ndarray:
        out = self.filtered.get(k)
        if out is None:
            out = self.filtered[k] = rank_filter()(self.V, rank=k, size=self.width, mode="nearest")
        return out[lo + self.width // 2]      # the window of output i starts at i - width // 2

    def pairs(self, lo: np.ndarray, hi: np.ndarray, first: np.ndarray, second: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray]:
        return self.kth(lo, int(first[0])), self.kth(lo, int(second[0]))


def sliding_pays(points: int, queries: int, width: int) -> bool:
    """Whether a sliding filter over ``points`` costs less than sorting ``queries`` windows."""
    return width >= 8 and _FILTER_NS * points < _SORT_NS * queries * width * math.log2(width)


#: From this window width on, windows may be sorted as the ranks of their points (integers).
RANK_WIDTH = 8
#: Rough CPU cost, in ns, of ranking one point (a stable argsort), of sorting one rank in a
#: row, and of sorting one value in a row per comparison level (numpy 1.26, AVX-512).
_RANK_NS, _RANK_SORT_NS, _VALUE_NS = 65.0, 2.0, 3.0
#: Up to this width, rank rows are sorted by quicksort (numpy's SIMD sort of integers, many
#: times faster than its radix sort on short rows); wider int16 rows by radix sort.
QUICK_WIDTH = 256


def ranks_pay(points: int, cells: int, width: int) -> bool:
    """Whether ranking ``points`` and sorting ``cells`` ranks in rows ``width`` wide costs
    less than sorting the cells' values (not for a few windows over many points)."""
    return _RANK_NS * points + _RANK_SORT_NS * cells < _VALUE_NS * cells * math.log2(width)


def sorted_windows(V: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each window ``V[lo:hi]`` sorted into a row padded with +inf (a float matrix); and the
    counts: :func:`sorted_rows`, every value looked up."""
    rows, cnt = sorted_rows(V, lo, hi)
    return rows.dense(), cnt


def sorted_rows(V: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Tuple[SortedRows, np.ndarray]:
    """Each window ``V[lo:hi]`` sorted into a row padded with +inf; and the counts.

    Windows at least :data:`RANK_WIDTH` wide are sorted as the ranks of their points (from
    one stable argsort of the points the windows span) into the sorted points: the same rows,
    since ranks order the points as their values do (equal values in the order of the
    points, as a stable sort of the values puts them). Ranks are distinct, so any sort of
    them gives the same rows: quicksort for short rows, radix (int16) for long ones. The
    points are ranked when that pays (:func:`ranks_pay`: not for a few windows over many
    points, such as a live poll's one window per rank); else the values are sorted.
    """
    cnt = hi - lo
    width = int(cnt.max()) if cnt.shape[0] else 0
    if width == 0:
        return SortedRows(np.zeros((lo.shape[0], 0))), cnt
    if constant(V, lo, hi) is not None:     # a constant signal's rows are already sorted
        return SortedRows(window_matrix(V, lo, cnt, width, np.inf)), cnt
    base, top = int(lo.min()), int(hi.max())
    n = top - base
    if width >= RANK_WIDTH and ranks_pay(n, lo.shape[0] * width, width):
        points = V[base:top]
        order = np.argsort(points, kind="stable")
        dtype: Any = np.int16 if n < 2**15 - 1 else np.int32 if n < 2**31 - 1 else np.int64
        ranks = np.empty(n, dtype=dtype)
        ranks[order] = np.arange(n, dtype=dtype)
        matrix = window_matrix(ranks, lo - base, cnt, width, n)
        quick = width <= QUICK_WIDTH or dtype is not np.int16
        matrix.sort(axis=1, kind="quicksort" if quick else "stable")
        return SortedRows(matrix, np.append(points[order], np.inf)), cnt
    matrix = window_matrix(V, lo, cnt, width, np.inf)
    matrix.sort(axis=1, kind="stable")      # timsort: equal values keep their order
    return SortedRows(matrix), cnt


def window_matrix(V: np.ndarray, lo: np.ndarray, cnt: np.ndarray, width: int, pad: Any
                  ) -> np.ndarray:
    """The windows ``V[lo:lo+cnt]`` as rows ``width`` wide, padded with ``pad`` (a copy):
    rows of a strided view, the short ones' tails then set to ``pad``."""
    part = np.flatnonzero(cnt != width)
    if part.shape[0] == 0:                  # every window full
        return sliding_window_view(V, width)[lo]
    padded = np.concatenate((V, np.full(width, pad, dtype=V.dtype)))
    matrix = sliding_window_view(padded, width)[lo]
    tail = np.arange(width)[None, :] >= cnt[part, None]
    matrix[part] = np.where(tail, pad, matrix[part])
    return matrix


def constant(V: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Optional[float]:
    """The value of every point in the windows ``V[lo:hi]`` if they are all equal (and
    non-zero: 0.0 and -0.0 are equal but not the same), else None."""
    if lo.shape[0] == 0:
        return None
    seen = V[int(lo.min()):int(hi.max())]
    if seen.shape[0] == 0:
        return None
    first = seen[0]
    if first != 0 and seen.min() == first and seen.max() == first:
        return first
    return None
