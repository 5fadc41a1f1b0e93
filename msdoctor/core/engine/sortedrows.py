"""Sorted windows as rows, and the order statistics read from them.

:class:`SortedRows` holds windows sorted into rows padded with +inf, either as the values
themselves or as indices into a table of values (the points' ranks into the sorted points):
then only the cells a statistic reads are looked up, not the whole matrix.
:func:`row_median`, :func:`row_mad`, :func:`row_quantile` take either that or a plain matrix.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np


class SortedRows:
    """Sorted, +inf-padded rows: ``index`` itself (values), or ``table[index]`` when a table
    is given (its last entry +inf, the padding)."""

    def __init__(self, index: np.ndarray, table: Optional[np.ndarray] = None) -> None:
        self.index = index
        self.table = table

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.index.shape

    def cells(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The values at ``(rows, cols)``."""
        picked = self.index[rows, cols]
        return picked if self.table is None else self.table.take(picked)

    def flat(self, at: np.ndarray) -> np.ndarray:
        """The values at the flat positions ``at`` (clipped into the matrix)."""
        picked = self.index.reshape(-1).take(at, mode="clip")
        return picked if self.table is None else self.table.take(picked)

    def dense(self, rows: Optional[np.ndarray] = None) -> np.ndarray:
        """The values of ``rows`` (all by default) as a float matrix."""
        index = self.index if rows is None else self.index[rows]
        return index if self.table is None else self.table.take(index)

    def subset(self, rows: np.ndarray) -> "SortedRows":
        """The rows ``rows``, in that order."""
        return SortedRows(self.index[rows], self.table)


Rows = Union[SortedRows, np.ndarray]


def as_rows(matrix: Rows) -> SortedRows:
    """``matrix`` as :class:`SortedRows` (a plain matrix holds its values)."""
    return matrix if isinstance(matrix, SortedRows) else SortedRows(matrix)


def row_median(matrix: Rows, cnt: np.ndarray) -> np.ndarray:
    """Median of each sorted, +inf-padded row with ``cnt`` valid values (NaN if none)."""
    out = np.full(cnt.shape[0], np.nan)
    ok = cnt > 0
    if ok.any():
        rows = np.flatnonzero(ok)
        c = cnt[ok]
        both = as_rows(matrix).cells(np.concatenate((rows, rows)),
                                     np.concatenate(((c - 1) // 2, c // 2)))
        out[ok] = (both[:rows.shape[0]] + both[rows.shape[0]:]) / 2.0
    return out


def row_mad(matrix: Rows, cnt: np.ndarray, med: np.ndarray) -> np.ndarray:
    """Median of ``|row - med|`` over each sorted row's ``cnt`` values (NaN if none).

    The same value as sorting the deviations and taking their :func:`row_median`,
    without that sort: in a sorted row the deviations fall towards the middle
    ``p = c // 2`` and rise after it, two sorted runs (``left[j] = |row[p-1-j] - med|``,
    ``right[j] = |row[p+j] - med|``); the k-th smallest of their merge is found by
    a binary search on how many come from the left run, for every row at once.
    """
    out = np.full(cnt.shape[0], np.nan)
    rows = np.flatnonzero(cnt > 0)
    if rows.shape[0] == 0:
        return out
    sorted_rows = as_rows(matrix)
    width = sorted_rows.shape[1]
    flat = sorted_rows.flat
    c = np.concatenate((cnt[rows], cnt[rows]))
    k = np.concatenate(((c[:rows.shape[0]] - 1) // 2, c[rows.shape[0]:] // 2))
    m = np.concatenate((med[rows], med[rows]))
    base = np.concatenate((rows, rows)) * width
    p = c // 2
    lo = np.maximum(k + 1 - (c - p), 0)
    hi = np.minimum(k + 1, p)
    left0 = base + p - 1                      # left[j] is flat[left0 - j]
    right0 = base + p + k                     # right[k - j] is flat[right0 - j]
    for _ in range(int(width).bit_length()):  # lo == hi everywhere after these halvings
        mid = (lo + hi) >> 1
        more = np.abs(flat(left0 - mid) - m) < np.abs(flat(right0 - mid) - m)
        more &= lo < hi                       # the k-th needs more than mid from the left
        lo = np.where(more, mid + 1, lo)
        hi = np.where(more | (lo >= hi), hi, mid)
    a = lo
    from_left = np.where(a > 0, np.abs(flat(left0 - a + 1) - m), -np.inf)
    from_right = np.where(k - a >= 0, np.abs(flat(right0 - a) - m), -np.inf)
    kth = np.maximum(from_left, from_right)
    half = rows.shape[0]
    out[rows] = (kth[:half] + kth[half:]) / 2.0
    return out


def row_quantile(matrix: Rows, cnt: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile (linear interpolation, as ``np.quantile``) of each sorted, padded row."""
    out = np.full(cnt.shape[0], np.nan)
    rows = np.flatnonzero(cnt > 0)
    if rows.shape[0]:
        pos = q * (cnt[rows] - 1)
        below = np.floor(pos).astype(np.int64)
        above = np.minimum(below + 1, cnt[rows] - 1)
        sorted_rows = as_rows(matrix)
        a, b = sorted_rows.cells(rows, below), sorted_rows.cells(rows, above)
        out[rows] = a + (pos - below) * (b - a)
    return out
