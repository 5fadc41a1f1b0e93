"""Order statistics over step windows: ``median quantile robust_z baseline``.

A sliding median cannot be done with cumulative sums. For long windows it is
computed at *anchor* steps only (every ``ceil(n/32)``-th step number, exact at
every step for n < 64) and held in between; the anchors depend only on the step
numbers, so the results do not depend on how the stream was cut into batches.
Each anchor sorts its window once (a padded 2-D gather + ``np.sort``).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Hashable, List, Optional, Tuple

import numpy as np

from msdoctor.core.engine.gathers import Shared, point_rows, search_right
from msdoctor.core.engine.nodes import Frame, Node, Out, locf, locf_segments
from msdoctor.core.engine.segments import some_ranks
from msdoctor.core.engine.selection import (  # noqa: F401 - re-exported
    Picker,
    Selection,
    Sliding,
    constant,
    pays,
    rank_filter,
    row_mad,
    row_median,
    row_quantile,
    sliding_pays,
    sorted_rows,
    sorted_windows,
)
from msdoctor.core.engine.sortedrows import SortedRows
from msdoctor.core.engine.windows import _EMPTY_F, WindowNode, _first

MAD_SCALE = 1.4826      # MAD -> standard deviation for normal data
MEANAD_SCALE = 1.2533   # mean absolute deviation -> standard deviation


def stride(n: int) -> int:
    """Step distance between anchors for a window of ``n`` steps."""
    return 1 if n < 64 else -(-n // 32)


def _anchored(steps: np.ndarray, s: int, before: bool, offset: Any = None
              ) -> Tuple[np.ndarray, np.ndarray]:
    """Anchor step per row (last multiple of ``s`` <= step, or < step) -> (unique, inverse);
    ``offset`` (per row) turns them into keys of a many-rank frame."""
    base = steps - 1 if before else steps
    anchors = (base // s) * s if s > 1 else base
    if offset is not None:
        anchors = anchors + offset
    if anchors.shape[0] == 0:
        return anchors, anchors
    new = np.empty(anchors.shape[0], dtype=bool)   # anchors are non-decreasing (one segment)
    new[0] = True
    np.not_equal(anchors[1:], anchors[:-1], out=new[1:])
    return anchors[new], np.cumsum(new) - 1


def anchor_windows(frame: Frame, key: Hashable, V: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   anchors: np.ndarray) -> Tuple[SortedRows, np.ndarray, np.ndarray]:
    """:func:`sorted_rows` of the anchors' windows, and their medians: ``(matrix, cnt, med)``.

    ``median(x, n)`` and ``robust_z(x, n)`` look at the same windows ``(a - n, a]`` at the
    same anchor steps; the first to run in a batch leaves its sorted windows in
    ``frame.memo`` under ``key`` and the other takes its rows from there when it has every
    anchor with the same number of points and the same padded width (so the rows are the
    very ones it would have sorted itself; both read suffixes of the same point stream).
    """
    cnt = hi - lo
    memo = frame.memo.get(key)
    if memo is not None and anchors.shape[0]:
        m_anchors, m_cnt, m_med, m_matrix = memo
        at = np.minimum(np.searchsorted(m_anchors, anchors), m_anchors.shape[0] - 1)
        width = int(cnt.max())
        if (m_anchors.shape[0] and m_matrix.shape[1] == width and width
                and (m_anchors[at] == anchors).all() and (m_cnt[at] == cnt).all()):
            return m_matrix.subset(at), cnt, m_med[at]
    matrix, cnt = sorted_rows(V, lo, hi)
    med = row_median(matrix, cnt)
    frame.memo[key] = (anchors, cnt, med, matrix)
    return matrix, cnt, med


def selection_of(frame: Frame, key: Hashable, points: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> Optional[Selection]:
    """A :class:`Selection` of ``points`` for the windows ``points[lo:hi]`` when it costs less
    than sorting them (else None). Operators over the same argument with the same window
    (``median(x, n, m)``, ``quantile(x, n, q, m)``) keep the same points: the second reuses
    the first's selection (``frame.memo``) when its points are equal."""
    memo = frame.memo.get(("select", key))
    if memo is not None:
        m_points, m_selection = memo
        if m_points.shape == points.shape and np.array_equal(m_points, points):
            return m_selection
    if not pays(points.shape[0], lo.shape[0], int((hi - lo).max())):
        return None
    selection = Selection(points)
    frame.memo[("select", key)] = (points, selection)
    return selection


def min_points(node: Node, at: int = 1) -> int:
    """The optional ``m`` of ``median(x, n, m)``, ``robust_z(x, n, m)``, ``quantile(x, n, q, m)``
    (``params[at]``; 0: none)."""
    return int(node.params[at]) if len(node.params) > at else 0


def window_bounds(S: np.ndarray, anchors: np.ndarray, n: int, m: int, floor: Any = 0
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: the points of ``(a - n, a]`` for each anchor ``a``, or the last ``m``
    points up to ``a`` (from ``floor`` on: the rank's first point) when those are more
    (a short run, a log of every k-th step)."""
    hi = search_right(S, anchors)
    lo = search_right(S, anchors - n)
    if m:
        lo = np.minimum(lo, np.maximum(hi - m, floor))
    return lo, hi


def order_group(child: str) -> str:
    """The carry group of the order statistics over ``child``: ``median(loss, 200, 10)``,
    ``robust_z(loss, 200, 10)`` and ``median(loss, 20, 4)`` gather and keep its points
    once per batch. Apart from the other window operators over ``child``, whose spans
    can be far longer: an order statistic's work grows with its carry."""
    return f"{child} #order"


def _segmented(frame: Frame, carry: Shared, n: int, m: int,
               steps: Optional[np.ndarray] = None, rows: Any = None, before: bool = False
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                          np.ndarray, np.ndarray, np.ndarray]:
    """The many-rank gather (``carry``'s) and anchor windows: ``(K, V, start, anchors,
    inverse, lo, hi, rank of each anchor)``; anchors are keys."""
    segs = frame.segments
    K, V, _, start = carry.arrays
    seg = segs.seg if rows is None else segs.seg[rows]
    q = frame.steps if steps is None else steps
    anchors, inverse = _anchored(q, stride(n), before, segs.offset[seg])
    owner = np.empty(anchors.shape[0], dtype=np.int64)
    owner[inverse] = seg
    lo, hi = window_bounds(K, anchors, n, m, start[owner])
    return K, V, start, anchors, inverse, lo, hi, owner


class OrderStatistic(WindowNode):
    """An order statistic of the window ``(step - n, step]`` (or of its last m points, when
    those are more): :meth:`pick` of the sorted anchor windows; a constant window is its value."""

    def least(self) -> int:
        return min_points(self)

    def pick(self, matrix: SortedRows, cnt: np.ndarray, med: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def select(self, selection: Picker, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The same values as :meth:`pick`, from a :class:`Selection` of the points."""
        raise NotImplementedError

    def _windows(self, frame: Frame, V: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 anchors: np.ndarray, inverse: np.ndarray, least: int) -> np.ndarray:
        value = constant(V, lo, hi)
        if value is not None:
            return np.where(hi > lo, value, np.nan)[inverse]   # e.g. tokens per step
        key = ("windows", self.children[0].key, self.n_steps, least)
        if key not in frame.memo and anchors.shape[0]:
            picked = self._picked(frame, key, V, lo, hi)
            if picked is not None:
                return picked[inverse]
        return self.pick(*anchor_windows(frame, key, V, lo, hi, anchors))[inverse]

    def _picked(self, frame: Frame, key: Hashable, V: np.ndarray, lo: np.ndarray,
                hi: np.ndarray) -> Optional[np.ndarray]:
        """The windows' values without sorting them, where that costs less (None: sort all).

        Windows of the most common point counts (full windows: one or two counts when a few
        points are not finite) come from a sliding rank filter each (:class:`Sliding`), the
        others from a :class:`Selection` or, if that does not pay, sorted."""
        base = int(lo.min())
        points = V[base:int(hi.max())]
        lo, hi = lo - base, hi - base
        cnt = hi - lo
        out = np.empty(lo.shape[0])
        left = np.ones(lo.shape[0], dtype=bool)
        if rank_filter() is not None:
            counts = np.bincount(cnt)          # per point count (a window's width)
            widths = np.flatnonzero(counts)
            counts = counts[widths]
            for at in np.argsort(-counts, kind="stable")[:3].tolist():
                width = int(widths[at])
                if width and sliding_pays(points.shape[0], int(counts[at]), width):
                    rows = cnt == width
                    out[rows] = self.select(Sliding(points, width), lo[rows], hi[rows])
                    left &= ~rows
        rest = np.flatnonzero(left)
        if rest.shape[0] == lo.shape[0]:
            selection = selection_of(frame, key, points, lo, hi)
            return None if selection is None else self.select(selection, lo, hi)
        if rest.shape[0]:
            matrix, c = sorted_rows(points, lo[rest], hi[rest])
            out[rest] = self.pick(matrix, c, row_median(matrix, c))
        return out

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        """The window and one anchor stride before it, plus m older points."""
        n = self.n_steps
        return order_group(self.children[0].key), n + stride(n), self.least(), ()

    def _carry(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Shared:
        _, span, least, _ = self.carry_spec()
        return Shared(frame, order_group(self.children[0].key), args[0], states, span, least)

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n, least = self.n_steps, self.least()
        carry = self._carry(frame, args, [state])
        S, V, _ = carry.arrays
        anchors, inverse = _anchored(frame.steps, stride(n), before=False)
        lo, hi = window_bounds(S, anchors, n, least)
        out = self._windows(frame, V, lo, hi, anchors, inverse, least)
        carry.keep()
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        n, least = self.n_steps, self.least()
        carry = self._carry(frame, args, states)
        K, V, start, anchors, inverse, lo, hi, _ = _segmented(frame, carry, n, least)
        out = self._windows(frame, V, lo, hi, anchors, inverse, least)
        carry.keep()
        return out, args[0][1]


class Median(OrderStatistic):
    """Median of the last n steps (or of the last m points, when those are more)."""

    name = "median"

    def pick(self, matrix: SortedRows, cnt: np.ndarray, med: np.ndarray) -> np.ndarray:
        return med

    def select(self, selection: Picker, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return selection.median(lo, hi)


class Quantile(OrderStatistic):
    """``quantile(x, n, q[, m])``: the q-quantile of the window of ``median(x, n[, m])``."""

    name = "quantile"

    def least(self) -> int:
        return min_points(self, 2)

    def pick(self, matrix: SortedRows, cnt: np.ndarray, med: np.ndarray) -> np.ndarray:
        return row_quantile(matrix, cnt, float(self.params[1]))

    def select(self, selection: Picker, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return selection.quantile(lo, hi, float(self.params[1]))


class RobustZ(WindowNode):
    """(x - median of the previous n steps) / (1.4826 MAD of those), at x's points.

    Without ``m`` it needs a full window of history; with ``m`` it also answers once the
    window (the previous n steps, or the previous m points when those are more) holds m points.
    """

    name = "robust_z"

    def new_state(self) -> Dict[str, Any]:
        state = super().new_state()
        state["z"] = math.nan
        return state

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        """The previous n steps and one anchor stride before them, plus m older points."""
        n = self.n_steps
        return order_group(self.children[0].key), n + stride(n) + 1, min_points(self), ()

    def _carry(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Shared:
        _, span, least, _ = self.carry_spec()
        return Shared(frame, order_group(self.children[0].key), args[0], states, span, least)

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n, least = self.n_steps, min_points(self)
        s = stride(n)
        values, mask = args[0]
        carry = self._carry(frame, args, [state])
        S, V, _ = carry.arrays
        first = _first(state, S)
        rows = point_rows(args[0], frame.n)
        if rows is None:
            rows = np.arange(frame.n)
        z = np.full(rows.shape[0], np.nan)
        if rows.shape[0]:
            q = frame.steps[rows]
            anchors, inverse = _anchored(q, s, before=True)
            lo, hi = window_bounds(S, anchors, n, least)
            z = self.z(frame, V, lo, hi, anchors, anchors, inverse, values[rows], first)
        carry.keep()
        full = np.full(frame.n, np.nan)
        full[rows] = z
        point = np.zeros(frame.n, dtype=bool)
        point[rows] = True
        return locf(full, point, state, "z"), mask

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        n, least = self.n_steps, min_points(self)
        values, mask = args[0]
        rows = point_rows(args[0], frame.n)
        if rows is None:
            rows = np.arange(frame.n)
        carry = self._carry(frame, args, states)
        K, V, start, anchors, inverse, lo, hi, owner = _segmented(
            frame, carry, n, least, frame.steps[rows], rows, before=True)
        offset = frame.segments.offset
        for r, (a, z) in enumerate(zip(start[:-1].tolist(), start[1:].tolist())):
            st = states[r]                                  # as _first, per rank
            if math.isnan(st["first"]) and z > a:
                st["first"] = float(K[a] - offset[r])
        first = np.array([st["first"] for st in states])[owner]
        zs = self.z(frame, V, lo, hi, anchors, anchors - offset[owner], inverse, values[rows],
                    first)
        carry.keep()
        full = np.full(frame.n, np.nan)
        full[rows] = zs
        point = np.zeros(frame.n, dtype=bool)
        point[rows] = True
        return locf_segments(full, point, frame, states, "z"), mask

    def z(self, frame: Frame, V: np.ndarray, lo: np.ndarray, hi: np.ndarray, keys: np.ndarray,
          anchors: np.ndarray, inverse: np.ndarray, x: np.ndarray, first: Any) -> np.ndarray:
        """z of the points ``x`` against their anchors' windows ``V[lo:hi]`` (``keys``: the
        anchors as the windows are memoised; ``anchors``: their step numbers)."""
        n, least = self.n_steps, min_points(self)
        key = ("windows", self.children[0].key, n, least)
        matrix, cnt, med = anchor_windows(frame, key, V, lo, hi, keys)
        mad = row_mad(matrix, cnt, med)
        scale = MAD_SCALE * mad
        flat = np.flatnonzero(~(mad > 0))       # MAD 0 (or no data): mean abs deviation
        if flat.shape[0]:
            dev = np.abs(matrix.dense(flat) - med[flat, None])
            meanad = np.where(cnt[flat] > 0, np.where(np.isfinite(dev), dev, 0.0).sum(axis=1)
                              / np.maximum(cnt[flat], 1), np.nan)
            scale[flat] = MEANAD_SCALE * meanad
        enough = (cnt >= 3) & ((first <= anchors - n + 1) | ((least > 0) & (cnt >= least)))
        m, sc = med[inverse], scale[inverse]
        diff = x - m
        with np.errstate(all="ignore"):
            z = np.where(sc > 0, diff / sc, np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
        z[~enough[inverse] | np.isnan(diff)] = np.nan
        return z


class Baseline(Node):
    """``baseline(x, warmup, n[, m])``: median of x over steps [f+warmup, f+warmup+n), then
    frozen; with ``m``, the window reaches on past its end until it holds ``m`` points (a
    log of every 10th step has one or two records in 15 steps: no baseline)."""

    name = "baseline"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"f": math.nan, "pts": _EMPTY_F, "value": math.nan, "done": 0, "closed": math.nan}

    def _grow(self, state: Dict[str, Any], s: np.ndarray, v: np.ndarray, last: float) -> None:
        """Add one rank's new points ``(s, v)`` (its rows reach step ``last``) to its window
        and freeze the median once the window has closed (at ``state["closed"]``)."""
        n = int(self.params[1])
        m = int(self.params[2]) if len(self.params) > 2 else 0
        start, end = self._window(state["f"])
        inside = (s >= start) & np.isfinite(v)
        if m:
            within = inside & (s <= end)
            beyond = np.flatnonzero(inside & (s > end))
            had = state["pts"].shape[0]
            need = m - had - int(within.sum())
            take = beyond[:max(need, 0)]
            within[take] = True
            state["pts"] = np.concatenate((state["pts"], v[within]))[-max(n, m):]
            if had + int(within.sum()) >= m and last >= end:
                # closed at the end, or at the m-th point when it lies past the end
                self._freeze(state, float(s[take[-1]]) if need > 0 else end)
            return
        if inside.any():
            inside &= s <= end
            state["pts"] = np.concatenate((state["pts"], v[inside]))[-max(n, 1):]
        if last >= end:
            self._freeze(state, end)

    def _window(self, f: Any) -> Tuple[Any, Any]:
        """First and last step of the window, for a rank (or ranks) whose first step is ``f``."""
        start = f + int(self.params[0])
        return start, start + int(self.params[1]) - 1

    @staticmethod
    def _freeze(state: Dict[str, Any], closed: float) -> None:
        state["done"] = 1
        state["closed"] = closed
        state["value"] = float(np.median(state["pts"])) if state["pts"].shape[0] else math.nan
        state["pts"] = _EMPTY_F

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        out = np.full(frame.n, np.nan)
        if frame.n == 0:
            return out, args[0][1]
        if math.isnan(state["f"]):
            state["f"] = float(frame.steps[0])
        q = frame.steps
        if not state["done"]:
            rows = point_rows(args[0], frame.n)
            if rows is None:
                rows = np.arange(frame.n)
            self._grow(state, q[rows], args[0][0][rows], float(q[-1]))
        if state["done"]:
            out[q >= self._closed(state)] = state["value"]
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """As :meth:`evaluate` rank by rank: the points inside each rank's window found at
        once; a rank's list grows (or its baseline freezes) in a few operations."""
        if len(self.params) > 2:
            return self._reaching(frame, args, states)
        segs = frame.segments
        n = int(self.params[1])
        q = frame.steps
        f = np.array([st["f"] for st in states], dtype=np.float64)
        for r in np.flatnonzero(np.isnan(f)).tolist():      # a rank's first rows
            f[r] = states[r]["f"] = float(q[segs.bounds[r]])
        start, end = self._window(f)
        done = np.array([bool(st["done"]) for st in states])
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        seg = segs.seg[rows]
        s, v = q[rows], args[0][0][rows]
        inside = ~done[seg] & (s >= start[seg]) & (s <= end[seg]) & np.isfinite(v)
        at = np.flatnonzero(inside)
        cut = np.searchsorted(seg[at], np.arange(len(states) + 1)).tolist()
        ends = q[segs.last_rows()] >= end
        for r in np.flatnonzero(~done & ((np.diff(cut) > 0) | ends)).tolist():
            st = states[r]
            if cut[r + 1] > cut[r]:
                st["pts"] = np.concatenate((st["pts"], v[at[cut[r]:cut[r + 1]]]))[-max(n, 1):]
            if ends[r]:
                self._freeze(st, float(end[r]))
                done[r] = True
        value = np.array([st["value"] for st in states])
        out = np.where(done[segs.seg] & (q >= end[segs.seg]), value[segs.seg], np.nan)
        return out, args[0][1]

    def _closed(self, state: Dict[str, Any]) -> float:
        """The step a frozen baseline holds from (a state saved before windows could close
        past their end closed at the end)."""
        return state.get("closed", self._window(state["f"])[1])

    def _reaching(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """The windows that reach past their end (``m``): ranks whose baseline is still open
        rank by rank (:meth:`evaluate`), the frozen ones from their value at once."""
        seg = frame.segments.seg
        done = np.array([bool(st["done"]) for st in states])
        out = np.full(frame.n, np.nan)
        if not done.all():
            some_ranks(self, frame, args, states, np.flatnonzero(~done).tolist(), out)
        if done.any():
            value = np.array([st["value"] for st in states])
            closed = np.array([self._closed(st) for st in states], dtype=np.float64)
            out = np.where(done[seg] & (frame.steps >= closed[seg]), value[seg], out)
        return out, args[0][1]
