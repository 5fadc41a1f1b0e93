"""``curve_stall(x, f)``: how much of the fall its own bending curve predicts x failed to make.

As ``powerlaw_miss`` (trend.py) the points are summed into bins of log-step, here of width
L / ``BINS_RECENT`` with L = log(1 + f), and the statistic is computed when a bin closes and
held until the next: a least-squares parabola of log(x) on log(step) over the
``BINS_HISTORY`` older bins (the *history*, the 5L before the recent window:
(step / (1 + f)^6, step / (1 + f)]) predicts the mean log(x) of the ``BINS_RECENT`` newest
(the *recent* window, (step / (1 + f), step]). With

    excess = mean recent log(x) - predicted
    fall   = predicted at the recent window's start - predicted

the value is excess / fall (0: x follows its curve, 1: x stayed where its history ended) when
the excess is at least ``EXCESS_Z`` and the fall at least ``FALL_Z`` standard errors of the
difference, else 0 (as ``powerlaw_miss``). The standard error
is the history's residual spread per point (at least the spread of the means of groups of
``GROUP`` bins around the parabola times their counts, so that noise or a misfit wandering over
many steps is not read as a trend; floored as in trend.py) times sqrt(1 / recent count + the
parabola's extrapolation variance at the recent points' mean). A parabola, not a line: it
follows a curve that slows down as it goes (a loss at the end of a cosine schedule, which a
line in log-log overshoots). NaN until the history holds ``MIN_HISTORY`` points, some in its
oldest quarter (after a resume, a short history would be extrapolated far), and the recent
window ``MIN_RECENT``.

``curve_stall(x, f, s)`` answers from the bin that holds step s on (NaN before): the bins
before it close without a fit (LossPlateau reads it from step 2000; a run's first steps close
a bin almost every step). Cost: one fit per closed bin (``BINS_RECENT`` / log(1 + f) per e-fold of the step, ~480 for a
run of 25k dense steps at f = 0.1), each a few dozen array operations on the window's 48 bins
and a closed-form 3 x 3 solve. Memory: 49 bins of nine sums.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List

import numpy as np

from msdoctor.core.engine.nodes import Frame, Out
from msdoctor.core.engine.trend import BINS_RECENT, RESID_FLOOR, PowerLawMiss, bin_width, held

BINS_HISTORY = 40        # bins of the recent window: BINS_RECENT, as powerlaw_miss's
MIN_RECENT, MIN_HISTORY = 3, 10
EXCESS_Z = 4.5  # the excess in standard errors below which x follows its curve (value 0)
FALL_Z = 3.0    # the predicted fall in standard errors below which nothing was there to miss
GROUP = 2       # bins per group for the spread of means (slow wander of the noise)
# per bin, v = log step - the bin's lower edge, y = log x:
# n, sum v, v^2, v^3, v^4, sum y, v*y, v^2*y, y^2
_FIELDS = 9


def powers(width: float) -> np.ndarray:
    """(5, 48): d^p (p = 0..4) of each window bin's lower edge d, counted in log-step from
    where the recent window begins."""
    d = (np.arange(BINS_HISTORY + BINS_RECENT) - BINS_HISTORY) * width
    return d[np.newaxis, :] ** np.arange(5)[:, np.newaxis]


def moved(t: list) -> list:
    """A part's nine sums in z = v + d from t[p][j] = sum over its bins of d^p x (sum j of
    the bin): sum z^k = sum_j C(k, j) t[k - j][j], sum z^k y likewise."""
    t0, t1, t2, t3, t4 = t
    return [t0[0], t0[1] + t1[0], t0[2] + 2 * t1[1] + t2[0],
            t0[3] + 3 * t1[2] + 3 * t2[1] + t3[0],
            t0[4] + 4 * t1[3] + 6 * t2[2] + 4 * t3[1] + t4[0],
            t0[5], t0[6] + t1[5], t0[7] + 2 * t1[6] + t2[5], t0[8]]


def _inverse(a0: float, a1: float, a2: float, a3: float, a4: float) -> tuple | None:
    """Inverse of the symmetric Hankel matrix [[a0 a1 a2] [a1 a2 a3] [a2 a3 a4]] as its six
    distinct entries (00, 01, 02, 11, 12, 22); None when it is (numerically) singular."""
    c00 = a2 * a4 - a3 * a3
    c01 = a2 * a3 - a1 * a4
    c02 = a1 * a3 - a2 * a2
    det = a0 * c00 + a1 * c01 + a2 * c02
    if not det > 1e-12 * a0 * a2 * a4:      # too few distinct steps for a parabola
        return None
    c11 = a0 * a4 - a2 * a2
    c12 = a1 * a2 - a0 * a3
    c22 = a0 * a2 - a1 * a1
    return c00 / det, c01 / det, c02 / det, c11 / det, c12 / det, c22 / det


def stall_from_bins(sums: np.ndarray, pw: np.ndarray) -> float:
    """The statistic from the 48 newest closed bins' sums (oldest first, zeros for empty);
    ``pw``: :func:`powers` of the bins' width."""
    if not sums[:BINS_HISTORY // 4, 0].any():
        return math.nan                 # the history must reach back its full length
    h = BINS_HISTORY
    hist = moved(np.einsum("pi,ij->pj", pw[:, :h], sums[:h]).tolist())
    rec = moved(np.einsum("pi,ij->pj", pw[:, h:], sums[h:]).tolist())
    nh, nr = hist[0], rec[0]
    if nh < MIN_HISTORY or nr < MIN_RECENT:
        return math.nan
    inv = _inverse(*hist[:5])
    if inv is None:
        return math.nan
    i00, i01, i02, i11, i12, i22 = inv
    b0, b1, b2 = hist[5], hist[6], hist[7]
    c0 = i00 * b0 + i01 * b1 + i02 * b2          # the parabola c0 + c1 z + c2 z^2
    c1 = i01 * b0 + i11 * b1 + i12 * b2
    c2 = i02 * b0 + i12 * b1 + i22 * b2
    resid = max(hist[8] - (c0 * b0 + c1 * b1 + c2 * b2), 0.0) / max(nh - 3, 1)
    d, n = pw[1, :h], sums[:h, 0]
    r = sums[:h, 5] - n * (c0 + (c1 + c2 * d) * d) - sums[:h, 1] * (c1 + 2 * c2 * d) \
        - c2 * sums[:h, 2]              # each bin's residuals summed
    gn = n.reshape(-1, GROUP).sum(axis=1)
    gr = r.reshape(-1, GROUP).sum(axis=1)[gn > 0]
    if gr.shape[0] > 3:                 # the scatter of groups' means around the parabola
        resid = max(resid, float((gr * gr / gn[gn > 0]).sum()) / (gr.shape[0] - 3))
    resid = max(resid, RESID_FLOOR)
    m1, m2 = rec[1] / nr, rec[2] / nr
    pred = c0 + c1 * m1 + c2 * m2
    spread = (i00 + 2 * i01 * m1 + 2 * i02 * m2 + i11 * m1 * m1 + 2 * i12 * m1 * m2
              + i22 * m2 * m2)
    se = math.sqrt(resid * (max(spread, 0.0) + 1.0 / nr))
    fall, excess = c0 - pred, rec[5] / nr - pred
    if fall < FALL_Z * se or excess < EXCESS_Z * se:
        return 0.0
    return excess / fall


class CurveStall(PowerLawMiss):
    """See the module docstring. Bins as ``powerlaw_miss`` (its ``_points``: the same width
    for the same f), nine sums each, closed one rank at a time."""

    name = "curve_stall"

    def new_state(self) -> Dict[str, Any]:
        return {"bin": -1, "sums": np.zeros((0, _FIELDS)), "ids": np.zeros(0, dtype=np.int64),
                "value": math.nan, "value_row": math.nan}

    def width(self) -> float:
        """Width in log-step of one bin (``_points`` bins with it)."""
        return bin_width(float(self.params[0]))

    def point_terms(self, u: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per point, the nine terms a bin sums (``b``: its bin)."""
        v = u - b * self.width()
        v2 = v * v
        return np.column_stack((np.ones_like(u), v, v2, v2 * v, v2 * v2, y, v * y, v2 * y,
                                y * y))

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, u, y, b = self._points(frame, args[0])
        out = np.full(rows.shape[0], np.nan)
        if rows.shape[0]:
            starts = np.flatnonzero(np.diff(b, prepend=b[0] - 1))
            bins = np.add.reduceat(self.point_terms(u, y, b), starts, axis=0)
            stops = np.append(starts[1:], rows.shape[0]).tolist()
            ids = b[starts].tolist()
            for j, (start, stop) in enumerate(zip(starts.tolist(), stops)):
                if ids[j] != state["bin"]:                   # the open bin closes
                    state["value"] = self._close_bin(state, ids[j])
                state["sums"][-1] += bins[j]
                out[start:stop] = state["value"]
        return held(frame.n, rows, out, state), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """Ranks with one new point (a live poll) in a few operations each: the open bin
        closed if the point opens another, its terms added; the others rank by rank."""
        from msdoctor.core.engine.segments import some_ranks
        segs = frame.segments
        R, n = segs.count, frame.n
        rows, u, y, b = self._points(frame, args[0])
        seg = segs.seg[rows]
        count = np.bincount(seg, minlength=R)
        first = np.minimum(np.searchsorted(seg, np.arange(R)), max(rows.shape[0] - 1, 0))
        fast = count == 1
        point = np.zeros(n, dtype=bool)
        point[rows] = True
        idx = np.where(point, np.arange(n), -1)
        np.maximum.accumulate(idx, out=idx)
        value_row = np.array([st["value_row"] for st in states], dtype=np.float64)
        quick = np.flatnonzero(fast)
        at = first[quick]
        terms = self.point_terms(u[at], y[at], b[at])
        for r, new_bin, row in zip(quick.tolist(), b[at].tolist(), terms):
            st = states[r]
            if new_bin != st["bin"]:                         # the open bin closes
                st["value"] = self._close_bin(st, new_bin)
            st["sums"][-1] += row
            st["value_row"] = st["value"]
        value = np.array([st["value"] for st in states], dtype=np.float64)
        out = np.where(idx >= segs.bounds[segs.seg], value[segs.seg], value_row[segs.seg])
        slow = np.flatnonzero((count > 0) & ~fast).tolist()
        return some_ranks(self, frame, args, states, slow, out), args[0][1]

    def _close_bin(self, state: Dict[str, Any], new_bin: int) -> float:
        """Close the open bin (if any), open ``new_bin``; the statistic of the closed bins."""
        ids, sums = state["ids"], state["sums"]
        value = state["value"]
        span = BINS_RECENT + BINS_HISTORY
        if ids.shape[0]:
            newest = int(ids[-1])
            keep = ids > newest - span
            ids, sums = ids[keep], sums[keep]
            window = np.zeros((span, _FIELDS))
            window[ids - newest + span - 1] = sums
            # from the bin that holds step ``from`` on: earlier ones close without a fit
            if math.exp((new_bin + 1) * self.width()) >= self._from():
                value = stall_from_bins(window, self._powers())
        state["ids"] = np.append(ids, new_bin)
        state["sums"] = np.vstack((sums, np.zeros((1, _FIELDS))))
        state["bin"] = new_bin
        return value

    def _from(self) -> float:
        """The optional third argument: the first step it answers at (0: from the start)."""
        return float(self.params[1]) if len(self.params) > 1 else 0.0

    _held_powers: tuple = (math.nan, None)

    def _powers(self) -> np.ndarray:
        width = self.width()
        if self._held_powers[0] != width:
            self._held_powers = (width, powers(width))
        return self._held_powers[1]
