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


def miss_from_bins(sums: np.ndarray, edge: float = math.nan) -> float:
    """The statistic from the 24 newest closed bins' sums (oldest first, zeros for empty);
    with ``edge`` (log-step where the recent window begins) the fall is counted from there."""
    hist = sums[:BINS_HISTORY].sum(axis=0)
    rec = sums[BINS_HISTORY:].sum(axis=0)
    nh, nr = hist[0], rec[0]
    if nh < MIN_HISTORY or nr < MIN_RECENT:
        return math.nan
    uh, yh = hist[1] / nh, hist[2] / nh
    suu = hist[3] - nh * uh * uh
    if suu <= 0:
        return math.nan
    slope = (hist[4] - nh * uh * yh) / suu
    resid = max(hist[5] - nh * yh * yh - slope * slope * suu, 0.0) / max(nh - 2, 1)
    resid = max(resid, RESID_FLOOR)      # the sums' rounding must not pass for a trend
    ur, yr = rec[1] / nr, rec[2] / nr
    fall = -slope * (ur - (uh if math.isnan(edge) else edge))
    excess = yr - (yh + slope * (ur - uh))
    se = math.sqrt(resid * (1.0 / nr + 1.0 / nh + (ur - uh) ** 2 / suu))
    slope_se = math.sqrt(resid / suu)
    if fall <= 0 or -slope < MISS_Z * slope_se or excess < MISS_Z * se:
        return 0.0
    return excess / fall


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
        start = 0
        while start < rows.shape[0]:
            stop = int(np.searchsorted(b, b[start], side="right"))
            if b[start] != state["bin"]:                 # the open bin closes
                state["value"] = self._close(state, int(b[start]), float(self.params[0]))
            seg_u, seg_y = u[start:stop], y[start:stop]
            add = np.array([stop - start, seg_u.sum(), seg_y.sum(), (seg_u * seg_u).sum(),
                            (seg_u * seg_y).sum(), (seg_y * seg_y).sum()])
            state["sums"][-1] += add
            out[start:stop] = state["value"]
            start = stop
        full = np.full(frame.n, np.nan)
        full[rows] = out
        point = np.zeros(frame.n, dtype=bool)
        point[rows] = True
        return locf(full, point, state, "value_row"), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """Ranks whose new points all fall in their open bin, a few of them, at once (the
        sums of :meth:`evaluate`); the ranks whose bin closes (or with more points) rank by
        rank."""
        from msdoctor.core.engine.segments import some_ranks
        segs = frame.segments
        R, n = segs.count, frame.n
        rows, u, y, b = self._points(frame, args[0])
        seg = segs.seg[rows]
        count = np.bincount(seg, minlength=R)
        open_bin = np.array([st["bin"] for st in states], dtype=np.int64)
        closes = np.bincount(seg, weights=b != open_bin[seg], minlength=R) > 0
        slow = closes | (count > IN_ORDER)
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

    def _close(self, state: Dict[str, Any], new_bin: int, f: float) -> float:
        """Close the open bin (if any), open ``new_bin``; the statistic of the closed bins."""
        ids, sums = state["ids"], state["sums"]
        value = state["value"]
        if ids.shape[0]:
            newest = int(ids[-1])
            keep = ids > newest - (BINS_RECENT + BINS_HISTORY)
            ids, sums = ids[keep], sums[keep]
            window = np.zeros((BINS_RECENT + BINS_HISTORY, _FIELDS))
            window[ids - newest + BINS_RECENT + BINS_HISTORY - 1] = sums
            edge = (newest - BINS_RECENT + 1) * bin_width(f) if self.edge else math.nan
            value = miss_from_bins(window, edge)
        state["ids"] = np.append(ids, new_bin)
        state["sums"] = np.vstack((sums, np.zeros((1, _FIELDS))))
        state["bin"] = new_bin
        return value


class PowerLawStall(PowerLawMiss):
    """``powerlaw_stall(x, f)``: as ``powerlaw_miss`` but the share of the fall predicted from
    the start of the recent window (1: x stayed at the level where its history ended)."""

    name = "powerlaw_stall"
    edge = True
