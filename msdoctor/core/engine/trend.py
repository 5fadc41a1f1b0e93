"""``powerlaw_miss(x, f)``: how much of the fall its own power law predicts x failed to make.

A healthy loss falls about as a power of the step, a straight line in log(loss) against
log(step). In log-step the window "the last f of the step" ((step / (1 + f), step]) has a fixed
length L = log(1 + f), so the points are summed into bins of log-step of width L / 8, and each
time a bin closes the statistic is computed from the last 24 closed bins: a least-squares line
of log(x) on log(step) over the 16 older bins (the *history*, the 2L before the recent window)
predicts the mean log(x) of the 8 newest (the *recent* window). The value is

    (mean recent log(x) - predicted) / (predicted fall from the history's mean to the recent one)

when that excess is at least ``MISS_Z`` standard errors (the history's residual spread, the
recent and history counts and the extrapolation distance) and the line falls (slope < 0 at
``MISS_Z`` standard errors); else 0. 0: the loss follows its curve; 1: it stayed at the
history's mean level; NaN until both parts hold ``MIN_RECENT`` / ``MIN_HISTORY`` points. The
value is held until the next bin closes. Memory: 25 bins of six sums.

``powerlaw_stall(x, f)`` counts the predicted fall from where the recent window begins instead
of from the history's mean: 1 when x stayed at the level where its history ended (a stall that
``powerlaw_miss`` scores about 1/3). The residual variance has a floor (``RESID_FLOOR``) so that
an exactly flat or exactly power-law history, whose sums only round, is not read as a trend.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.gathers import point_rows
from msdoctor.core.engine.nodes import Frame, Node, Out, locf

BINS_RECENT, BINS_HISTORY = 8, 16
MIN_RECENT, MIN_HISTORY = 3, 6
MISS_Z = 4.0
RESID_FLOOR = 1e-18     # variance of log(x) below which the residuals are rounding (1e-9 relative)
_FIELDS = 6     # n, sum u, sum y, sum u^2, sum u*y, sum y^2 (u = log step, y = log x)
IN_ORDER = 7    # numpy sums up to this many values one after the other, as np.bincount does


def bin_width(f: float) -> float:
    """Width in log-step of one bin for ``powerlaw_miss(x, f)``."""
    return math.log1p(f) / BINS_RECENT


def miss_from_bins(sums: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """The statistic of K windows of the 24 newest closed bins' sums ``(K, 24, 6)`` (oldest
    first, zeros for empty); where ``edge`` (log-step where the recent window begins) is not
    NaN the fall is counted from there."""
    with np.errstate(all="ignore"):
        hist = sums[:, :BINS_HISTORY].sum(axis=1)
        rec = sums[:, BINS_HISTORY:].sum(axis=1)
        nh, nr = hist[:, 0], rec[:, 0]
        uh, yh = hist[:, 1] / nh, hist[:, 2] / nh
        suu = hist[:, 3] - nh * uh * uh
        slope = (hist[:, 4] - nh * uh * yh) / suu
        resid = np.maximum(hist[:, 5] - nh * yh * yh - slope * slope * suu, 0.0) \
            / np.maximum(nh - 2, 1)
        resid = np.maximum(resid, RESID_FLOOR)  # the sums' rounding must not pass for a trend
        ur, yr = rec[:, 1] / nr, rec[:, 2] / nr
        fall = -slope * (ur - np.where(np.isnan(edge), uh, edge))
        excess = yr - (yh + slope * (ur - uh))
        se = np.sqrt(resid * (1.0 / nr + 1.0 / nh + (ur - uh) ** 2 / suu))
        slope_se = np.sqrt(resid / suu)
        flat = (fall <= 0) | (-slope < MISS_Z * slope_se) | (excess < MISS_Z * se)
        value = np.where(flat, 0.0, excess / fall)
    few = (nh < MIN_HISTORY) | (nr < MIN_RECENT) | ~(suu > 0)
    return np.where(few, math.nan, value)


def held(n: int, rows: np.ndarray, out: np.ndarray, state: Dict[str, Any]) -> np.ndarray:
    """``out`` (the values at the points ``rows``) over all ``n`` rows, each value held until
    the next point (``state["value_row"]`` before the first)."""
    full = np.full(n, np.nan)
    full[rows] = out
    point = np.zeros(n, dtype=bool)
    point[rows] = True
    return locf(full, point, state, "value_row")


class PowerLawMiss(Node):
    """See the module docstring."""

    name = "powerlaw_miss"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"bin": -1, "sums": np.zeros((0, _FIELDS)), "ids": np.zeros(0, dtype=np.int64),
                "value": math.nan, "value_row": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, u, y, b = self._points(frame, args[0])
        out = np.full(rows.shape[0], np.nan)
        if rows.shape[0]:
            starts = np.flatnonzero(np.diff(b, prepend=b[0] - 1)).tolist()
            stops = starts[1:] + [rows.shape[0]]
            adds = np.array([[z - a, u[a:z].sum(), y[a:z].sum(), (u[a:z] * u[a:z]).sum(),
                              (u[a:z] * y[a:z]).sum(), (y[a:z] * y[a:z]).sum()]
                             for a, z in zip(starts, stops)])
            values = self._add_bins(state, b[starts], adds)
            for a, z, v in zip(starts, stops, values):
                out[a:z] = v
        return held(frame.n, rows, out, state), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """Ranks whose new points, a few, fall in one bin, at once (the sums of
        :meth:`evaluate`), closing the open bin first where it is another; ranks with points
        in several bins, or more points, rank by rank."""
        from msdoctor.core.engine.segments import some_ranks
        segs = frame.segments
        R, n = segs.count, frame.n
        rows, u, y, b = self._points(frame, args[0])
        seg = segs.seg[rows]
        count = np.bincount(seg, minlength=R)
        firsts = np.searchsorted(seg, np.arange(R))           # each rank's first point
        first_bin = b[np.minimum(firsts, b.shape[0] - 1)] if b.shape[0] else count
        open_bin = np.array([st["bin"] for st in states], dtype=np.int64)
        other = np.bincount(seg, weights=b != first_bin[seg], minlength=R) > 0
        slow = other | (count > IN_ORDER)
        closes = np.flatnonzero((count > 0) & ~slow & (first_bin != open_bin))
        if closes.shape[0]:
            self._close([states[r] for r in closes.tolist()], first_bin[closes])
        fast = ~slow[seg]
        fseg = seg[fast]
        u, y = u[fast], y[fast]
        add = np.empty((R, _FIELDS))
        add[:, 0] = count
        for k, column in enumerate((u, y, u * u, u * y, y * y), 1):
            add[:, k] = np.bincount(fseg, weights=column, minlength=R)
        # the held value from each rank's first point on, its last row's value before
        point = np.zeros(n, dtype=bool)
        point[rows] = True
        idx = np.where(point, np.arange(n), -1)
        np.maximum.accumulate(idx, out=idx)
        value = np.array([st["value"] for st in states], dtype=np.float64)
        value_row = np.array([st["value_row"] for st in states], dtype=np.float64)
        out = np.where(idx >= segs.bounds[segs.seg], value[segs.seg], value_row[segs.seg])
        for r in np.flatnonzero((count > 0) & ~slow).tolist():
            st = states[r]
            st["sums"][-1] += add[r]
            st["value_row"] = st["value"]
        return some_ranks(self, frame, args, states, np.flatnonzero(slow).tolist(), out), \
            args[0][1]

    def _points(self, frame: Frame, arg: Out
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows of the points of ``arg`` with x > 0 and step > 0, their log-step, log(x)
        and bin."""
        rows = point_rows(arg, frame.n)
        if rows is None:
            rows = np.arange(frame.n)
        x = arg[0][rows]
        ok = np.isfinite(x) & (x > 0) & (frame.steps[rows] > 0)
        rows, x = rows[ok], x[ok]
        u = np.log(frame.steps[rows].astype(np.float64))
        y = np.log(x)
        b = np.floor(u / bin_width(float(self.params[0]))).astype(np.int64)
        return rows, u, y, b

    edge = False        # PowerLawStall: the fall counted from the recent window's start

    def _add_bins(self, state: Dict[str, Any], ids: np.ndarray, adds: np.ndarray) -> List[float]:
        """Add one rank's new points, summed per bin (``ids`` ascending, ``adds`` their sums),
        closing the open bin at each new one as :meth:`_close` does, all closes at once; the
        value held from each of those bins on."""
        span = BINS_RECENT + BINS_HISTORY
        old_ids = state["ids"]
        head: List[float] = []
        if old_ids.shape[0] and int(ids[0]) == state["bin"]:    # the open bin goes on
            state["sums"][-1] += adds[0]
            ids, adds = ids[1:], adds[1:]
            head = [state["value"]]
        if not ids.shape[0]:
            return head
        all_ids = np.concatenate((old_ids, ids))
        all_sums = np.concatenate((state["sums"], adds))
        values = [state["value"]] * (old_ids.shape[0] == 0)    # the first bin: no close
        closes = np.arange(max(old_ids.shape[0], 1), all_ids.shape[0])
        if closes.shape[0]:
            newest = all_ids[closes - 1]          # the bin each close closes
            lo = int(all_ids.min()) - span
            dense = np.zeros((int(all_ids[-1]) - lo + 1, _FIELDS))
            dense[all_ids - lo] = all_sums
            window = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(
                dense, span, axis=0)[newest - lo - span + 1].transpose(0, 2, 1))
            edge = (newest - BINS_RECENT + 1) * bin_width(float(self.params[0])) \
                if self.edge else np.full(newest.shape[0], math.nan)
            values += miss_from_bins(window, edge).tolist()
            keep = all_ids[:-1] > int(newest[-1]) - span
            all_ids = np.append(all_ids[:-1][keep], all_ids[-1])
            all_sums = np.vstack((all_sums[:-1][keep], all_sums[-1:]))
        state["ids"], state["sums"], state["bin"] = all_ids, all_sums, int(all_ids[-1])
        state["value"] = values[-1]
        return head + values

    def _close(self, states: List[Dict[str, Any]], new_bins: np.ndarray) -> None:
        """Close each state's open bin (if any) and open its ``new_bins``; its ``value`` is
        then the statistic of its closed bins (unchanged before it has any)."""
        K, span = len(states), BINS_RECENT + BINS_HISTORY
        lengths = np.fromiter((st["ids"].shape[0] for st in states), dtype=np.int64, count=K)
        ids = np.concatenate([st["ids"] for st in states])
        sums = np.concatenate([st["sums"] for st in states])
        owner = np.repeat(np.arange(K), lengths)
        newest = ids[np.maximum(np.cumsum(lengths) - 1, 0)] if ids.shape[0] else lengths
        keep = ids > newest[owner] - span
        ids, sums, owner = ids[keep], sums[keep], owner[keep]
        window = np.zeros((K, span, _FIELDS))
        window[owner, ids - newest[owner] + span - 1] = sums
        edge = (newest - BINS_RECENT + 1) * bin_width(float(self.params[0])) if self.edge \
            else np.full(K, math.nan)
        value = miss_from_bins(window, edge)
        # each state's kept bins, then its new open one
        at = np.cumsum(np.bincount(owner, minlength=K))
        ids = np.insert(ids, at, new_bins)
        sums = np.insert(sums, at, 0.0, axis=0)
        ends = (at + np.arange(1, K + 1)).tolist()
        for st, a, z, b, v, some in zip(states, [0] + ends[:-1], ends, new_bins.tolist(),
                                        value.tolist(), (lengths > 0).tolist()):
            st["ids"], st["sums"], st["bin"] = ids[a:z].copy(), sums[a:z].copy(), b
            if some:
                st["value"] = v


class PowerLawStall(PowerLawMiss):
    """``powerlaw_stall(x, f)``: as ``powerlaw_miss`` but the share of the fall predicted from
    the start of the recent window (1: x stayed at the level where its history ended)."""

    name = "powerlaw_stall"
    edge = True
