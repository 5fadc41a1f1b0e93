"""Point-sequence functions: ``nonfinite ewma steps_since_change repeat_count first_max episodes``.

Each is computed at its argument's points and carried forward to the other
rows; the carry-over between batches is a few scalars.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from msdoctor.core.engine.gathers import point_rows
from msdoctor.core.engine.nodes import Frame, Node, Out, locf, locf_segments
from msdoctor.core.engine.windows import _EMPTY_I, EPISODE_GAP, episode_starts


def _points(frame: Frame, arg: Out) -> Tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
    """(row mask or None, step numbers, values) of the points of ``arg``."""
    rows = point_rows(arg, frame.n)
    if rows is None:
        return None, frame.steps, arg[0]
    return rows, frame.steps[rows], arg[0][rows]


def _spread(frame: Frame, rows: Any, point_values: np.ndarray, state: Dict[str, Any],
            key: str) -> np.ndarray:
    """Per-point values -> per-row values, carried forward (``state[key]`` before)."""
    if rows is None:
        if frame.n:
            state[key] = float(point_values[-1])
        return point_values
    full = np.empty(frame.n)
    mask = np.zeros(frame.n, dtype=bool)
    full[rows] = point_values
    mask[rows] = True
    return locf(full, mask, state, key)


def _spread_segments(frame: Frame, rows: np.ndarray, point_values: np.ndarray,
                     states: List[Dict[str, Any]], key: str) -> np.ndarray:
    """:func:`_spread` within each rank of a many-rank frame."""
    full = np.empty(frame.n)
    mask = np.zeros(frame.n, dtype=bool)
    full[rows] = point_values
    mask[rows] = True
    return locf_segments(full, mask, frame, states, key)


class NonFinite(Node):
    name = "nonfinite"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"last": 0.0}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, _, v = _points(frame, args[0])
        flags = (~np.isfinite(v)).astype(np.float64)
        return _spread(frame, rows, flags, state, "last"), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        flags = (~np.isfinite(args[0][0][rows])).astype(np.float64)
        return _spread_segments(frame, rows, flags, states, "last"), args[0][1]

    def value_node(self) -> Node:
        return self.children[0].value_node()


def ewma_points(v: np.ndarray, alpha: float, e: float) -> np.ndarray:
    """The EWMA after each of ``v`` (finite), starting from ``e`` (NaN: from v[0])."""
    out = np.empty(v.shape[0])
    if v.shape[0] == 0:
        return out
    if alpha >= 1.0:
        out[:] = v
        return out
    start = 0
    if math.isnan(e):
        e = out[0] = float(v[0])
        start = 1
    beta = 1.0 - alpha
    block = max(1, int(27.6 / -math.log(beta)))     # beta**-block <= ~1e12: no precision loss
    while start < v.shape[0]:
        chunk = v[start:start + block]
        k = np.arange(1, chunk.shape[0] + 1, dtype=np.float64)
        grow = beta ** -k
        res = beta ** k * (e + alpha * np.cumsum(chunk * grow))
        out[start:start + chunk.shape[0]] = res
        e = float(res[-1])
        start += block
    return out


class Ewma(Node):
    name = "ewma"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"e": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, _, v = _points(frame, args[0])
        ok = np.isfinite(v)
        if rows is None:
            rows = np.arange(frame.n)
        rows, v = rows[ok], v[ok]
        e = ewma_points(v, float(self.params[0]), state["e"])
        return _spread(frame, rows, e, state, "e"), args[0][1]


def _last_points(seg: np.ndarray) -> np.ndarray:
    """The index of each rank's last point (``seg``: the points' ranks, ascending)."""
    return np.flatnonzero(np.append(seg[1:] != seg[:-1], True)) if seg.shape[0] else _EMPTY_I


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


class StepsSinceChange(Node):
    """Steps since x last changed value (NaN counts as equal to NaN)."""

    name = "steps_since_change"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"last_v": math.nan, "has": 0, "change": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, s, v = _points(frame, args[0])
        if v.shape[0]:
            prev = np.concatenate(([state["last_v"]], v[:-1]))
            changed = ~_same(v, prev)
            if not state["has"]:
                changed[0] = True
            idx = np.where(changed, np.arange(v.shape[0]), -1)
            np.maximum.accumulate(idx, out=idx)
            change = np.where(idx >= 0, s[np.maximum(idx, 0)].astype(np.float64), state["change"])
            state["last_v"], state["has"] = float(v[-1]), 1
        else:
            change = np.zeros(0)
        return frame.fsteps - _spread(frame, rows, change, state, "change"), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        segs = frame.segments
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        v, s = args[0][0][rows], frame.steps[rows]
        seg = segs.seg[rows]
        i = np.arange(v.shape[0])
        first = np.searchsorted(seg, seg, side="left")      # each point's rank's first point
        carried = np.array([st["last_v"] for st in states], dtype=np.float64)
        prev = np.where(i > first, v[np.maximum(i - 1, 0)], carried[seg])
        fresh = np.array([not st["has"] for st in states], dtype=bool)
        changed = ~_same(v, prev) | ((i == first) & fresh[seg])
        idx = np.where(changed, i, -1)
        np.maximum.accumulate(idx, out=idx)
        before = np.array([st["change"] for st in states], dtype=np.float64)
        change = np.where(idx >= first, s[np.maximum(idx, 0)].astype(np.float64), before[seg])
        last = _last_points(seg)
        for r, x in zip(seg[last].tolist(), v[last].tolist()):
            st = states[r]
            st["last_v"], st["has"] = x, 1
        return frame.fsteps - _spread_segments(frame, rows, change, states, "change"), args[0][1]


class RepeatCount(Node):
    """Consecutive points of x with exactly the same value (NaN never repeats)."""

    name = "repeat_count"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"last_v": math.nan, "run": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, _, v = _points(frame, args[0])
        if v.shape[0]:
            prev = np.concatenate(([state["last_v"]], v[:-1]))
            changed = ~(v == prev)
            i = np.arange(v.shape[0])
            idx = np.where(changed, i, -1)
            np.maximum.accumulate(idx, out=idx)
            carry = 0.0 if math.isnan(state["run"]) else state["run"]
            runs = np.where(idx >= 0, i - idx + 1, carry + i + 1).astype(np.float64)
            state["last_v"] = float(v[-1])
        else:
            runs = np.zeros(0)
        return _spread(frame, rows, runs, state, "run"), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        segs = frame.segments
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        v = args[0][0][rows]
        seg = segs.seg[rows]
        i = np.arange(v.shape[0])
        first = np.searchsorted(seg, seg, side="left")      # each point's rank's first point
        carried = np.array([st["last_v"] for st in states])
        prev = np.where(i > first, v[np.maximum(i - 1, 0)], carried[seg])
        idx = np.where(~(v == prev), i, -1)
        np.maximum.accumulate(idx, out=idx)
        runs_before = np.array([0.0 if math.isnan(st["run"]) else st["run"] for st in states])
        runs = np.where(idx >= first, i - idx + 1, runs_before[seg] + (i - first) + 1)
        last = _last_points(seg)
        for p in last.tolist():
            states[seg[p]]["last_v"] = float(v[p])
        return _spread_segments(frame, rows, runs.astype(np.float64), states, "run"), args[0][1]


class FirstMax(Node):
    """Max of the first n finite points of x (the running max while fewer); the run's first
    points, so a resume (steps going back) does not start it again."""

    name = "first_max"
    stateful = True
    run_scoped = True

    def new_state(self) -> Dict[str, Any]:
        return {"count": 0, "max": math.nan, "fm": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n = int(self.params[0])
        rows, _, v = _points(frame, args[0])
        if rows is None:
            rows = np.arange(frame.n)
        ok = np.isfinite(v)
        rows, v = rows[ok], v[ok]
        take = max(0, min(n - int(state["count"]), v.shape[0]))
        fm = np.empty(v.shape[0])
        if take:
            running = np.fmax.accumulate(np.concatenate(([state["max"]], v[:take])))[1:]
            fm[:take] = running
            state["max"] = float(running[-1])
            state["count"] = int(state["count"]) + take
        fm[take:] = state["max"]
        return _spread(frame, rows, fm, state, "fm"), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        from msdoctor.core.engine.segments import segmented_scan
        n = int(self.params[0])
        segs = frame.segments
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        v = args[0][0][rows]
        ok = np.isfinite(v)
        rows, v = rows[ok], v[ok]
        seg = segs.seg[rows]
        first = np.searchsorted(seg, seg, side="left")
        j = np.arange(v.shape[0]) - first                  # the point's place in its rank
        count = np.array([st["count"] for st in states], dtype=np.int64)
        before = np.array([st["max"] for st in states])
        taken = j < n - count[seg]
        # running max of the taken points, from the rank's max so far (NaN: none yet)
        running = segmented_scan(np.where(taken, v, np.nan), seg, np.fmax)
        running = np.fmax(running, before[seg])
        last = _last_points(seg)
        took = np.bincount(seg, weights=taken, minlength=len(states)).astype(np.int64)
        for p in last[took[seg[last]] > 0].tolist():       # ranks still taking points
            st = states[seg[p]]
            st["max"] = float(running[p])
            st["count"] = int(st["count"]) + int(took[seg[p]])
        fm = np.where(taken, running, np.array([st["max"] for st in states])[seg])
        return _spread_segments(frame, rows, fm, states, "fm"), args[0][1]


class Episodes(Node):
    """``episodes(x, n)``: how many episodes of x being true started in the last n steps.

    A point is true when x is finite and non-zero; an episode starts at a true point at least
    ``windows.EPISODE_GAP`` steps after the previous true point (a burst of adjacent true points
    is one episode; ``spike_period`` counts its spikes the same way). The carry-over is the
    start steps still inside the window.
    """

    name = "episodes"
    stateful = True

    def new_state(self) -> Dict[str, Any]:
        return {"starts": _EMPTY_I, "last_true": math.nan}

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        rows, _, v = _points(frame, args[0])
        if rows is None:
            rows = np.arange(frame.n)
        true_rows = rows[np.isfinite(v) & (v != 0)]
        _, lo, hi, _ = episode_starts(frame, true_rows, int(self.params[0]), state,
                                   "starts", "last_true")
        return (hi - lo).astype(np.float64), args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        """:func:`~.windows.episode_starts` within each rank, the starts looked up by key."""
        segs = frame.segments
        n, R = int(self.params[0]), segs.count
        rows = point_rows(args[0], frame.n)
        rows = np.arange(frame.n) if rows is None else rows
        v = args[0][0][rows]
        true_rows = rows[np.isfinite(v) & (v != 0)]
        seg = segs.seg[true_rows]
        true_steps = frame.steps[true_rows]
        j = np.arange(true_rows.shape[0])
        first = np.searchsorted(seg, seg, side="left")
        last_true = np.array([st["last_true"] for st in states], dtype=np.float64)
        prev = np.where(j > first, true_steps[np.maximum(j - 1, 0)].astype(np.float64),
                        last_true[seg])
        new = ~(true_steps - prev < EPISODE_GAP)                 # NaN prev: a new episode
        last = _last_points(seg)
        for r, step in zip(seg[last].tolist(), true_steps[last].tolist()):
            states[r]["last_true"] = float(step)
        carry = [st["starts"] for st in states]
        carry_n = np.fromiter((c.shape[0] for c in carry), dtype=np.int64, count=R)
        carried = np.cumsum(carry_n)                         # carried starts up to each rank
        new_rows = true_rows[new]
        # each rank's carried starts, then its new ones (keys: no window crosses ranks)
        E = np.insert(np.concatenate(carry) + np.repeat(segs.offset, carry_n),
                      carried[seg[new]], segs.keys[new_rows])
        hi = carried[segs.seg] + np.searchsorted(new_rows, np.arange(frame.n), side="right")
        lo = np.searchsorted(E, segs.keys - n, side="right")
        start = np.zeros(R + 1, dtype=np.int64)
        np.cumsum(carry_n + np.bincount(seg[new], minlength=R), out=start[1:])
        cut = np.searchsorted(E, segs.keys[np.maximum(segs.bounds[1:] - 1, 0)] - n, side="right")
        steps = E - np.repeat(segs.offset, np.diff(start))
        for st, a, z, rows_r in zip(states, cut.tolist(), start[1:].tolist(),
                                    np.diff(segs.bounds).tolist()):
            if rows_r:
                st["starts"] = steps[a:z].copy()
        return (hi - lo).astype(np.float64), args[0][1]
