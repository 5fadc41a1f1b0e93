"""Streaming window functions over the last ``n`` step numbers, vectorised per batch.

Each operator keeps, between batches, only the finite points it still needs
(those within its span of step numbers), so memory is bounded by the window,
never by the run length. For a batch it concatenates that carry-over with the
batch's new points and answers every row at once: sums through cumulative sums
and ``searchsorted`` on the step numbers, min/max through a sparse table.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.gathers import Shared, gather, keep, search_right
from msdoctor.core.engine.nodes import Frame, Node, Out

_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)


EPISODE_GAP = 3     # true points closer than this many steps belong to one episode (spike)


def episode_starts(frame: Frame, true_rows: np.ndarray, n: int, state: Dict[str, Any],
                   starts_key: str, last_key: str
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Episodes of the rows ``true_rows`` (ascending) whose starts fall in each row's window.

    An episode starts at a true row at least ``EPISODE_GAP`` steps after the previous true row
    (``state[last_key]`` carries the last one over batches). Returns ``(E, lo, hi)``: the
    start steps, carry-over first, and for each row ``i`` the slice ``E[lo[i]:hi[i]]`` of those
    in ``(step - n, step]`` seen so far; ``state[starts_key]`` keeps the starts still inside the
    window of the batch's last row. The fourth array marks the ``true_rows`` that start one.
    """
    true_steps = frame.steps[true_rows]
    prev = np.concatenate(([state[last_key]], true_steps[:-1].astype(np.float64)))
    new = ~(true_steps - prev < EPISODE_GAP)                 # NaN prev: a new episode
    if true_steps.shape[0]:
        state[last_key] = float(true_steps[-1])
    carry = state[starts_key]
    E = np.concatenate((carry, true_steps[new])) if carry.shape[0] else true_steps[new]
    hi = carry.shape[0] + np.searchsorted(true_rows[new], np.arange(frame.n), side="right")
    lo = np.searchsorted(E, frame.steps - n, side="right")
    if frame.n:
        cut = int(np.searchsorted(E, frame.steps[-1] - n, side="right"))
        state[starts_key] = E[cut:].copy()
    return E, lo, hi, new


def at_least(lo: np.ndarray, hi: np.ndarray, m: int, floor: Any) -> np.ndarray:
    """Window starts ``lo`` moved back so each window ``[lo, hi)`` holds the last ``m`` points
    when the steps hold fewer (never before ``floor``, the rank's first point)."""
    return np.minimum(lo, np.maximum(hi - m, floor)) if m else lo


def _first(state: Dict[str, Any], S: np.ndarray) -> float:
    """Step of the first finite point since the last reset (NaN if none)."""
    if math.isnan(state["first"]) and S.shape[0]:
        state["first"] = float(S[0])
    return state["first"]


class WindowNode(Node):
    """A function of the points in ``(step - n, step]``."""

    stateful = True

    @property
    def n_steps(self) -> int:
        return int(self.params[0])

    @property
    def least_points(self) -> int:
        """The optional ``m`` of ``mean(x, n, m)`` and its kin: the window holds at least the
        last m points (0: none)."""
        return int(self.params[1]) if len(self.params) > 1 else 0

    def new_state(self) -> Dict[str, Any]:
        return {"s": _EMPTY_I, "v": _EMPTY_F, "first": math.nan}


class LastN(WindowNode):
    """A window function computed by :meth:`reduce` over ``V[lo:hi]`` per row, rank by rank
    or over a many-rank frame alike."""

    centred = True      # :meth:`reduce` takes the points' references (the rank's first value)

    def reduce(self, V: np.ndarray, lo: np.ndarray, hi: np.ndarray, ref: Any,
               sums: Dict[str, Any]) -> np.ndarray:
        """The function over ``V[lo:hi]`` per row; ``sums``: work the operators over the same
        gathered points share in a batch (cumulative sums)."""
        raise NotImplementedError

    @staticmethod
    def sums(frame: Frame, V: np.ndarray) -> Dict[str, Any]:
        memo = frame.memo.get(("sums", id(V)))
        if memo is None or memo["V"] is not V:
            memo = frame.memo[("sums", id(V))] = {"V": V}
        return memo

    @staticmethod
    def refs(sums: Dict[str, Any], V: np.ndarray, start: np.ndarray) -> np.ndarray:
        """:func:`.segments.segment_refs` of the gathered points, once per batch."""
        from msdoctor.core.engine.segments import segment_refs
        if "refs" not in sums:
            sums["refs"] = segment_refs(V, start)
        return sums["refs"]

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        """What its carry must hold: the points of its argument in its span, plus m older."""
        return self.children[0].key, self.n_steps, self.least_points, ()

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n, m = self.n_steps, self.least_points
        carry = Shared(frame, self.children[0].key, args[0], [state], n, m)
        S, V, hi = carry.arrays
        lo = at_least(search_right(S, frame.steps - n), hi, m, 0)
        out = self.reduce(V, lo, hi, V[0] if V.shape[0] else 0.0, self.sums(frame, V))
        carry.keep()
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        n, m = self.n_steps, self.least_points
        carry = Shared(frame, self.children[0].key, args[0], states, n, m)
        K, V, hi, start = carry.arrays
        lo = np.searchsorted(K, frame.segments.keys - n, side="right")
        lo = at_least(lo, hi, m, start[frame.segments.seg])
        sums = self.sums(frame, V)
        out = self.reduce(V, lo, hi, self.refs(sums, V, start) if self.centred else 0.0, sums)
        carry.keep()
        return out, args[0][1]


class Aggregate(LastN):
    """``mean sum count std`` over the last n steps."""

    def reduce(self, V: np.ndarray, lo: np.ndarray, hi: np.ndarray, ref: Any,
               sums: Dict[str, Any]) -> np.ndarray:
        """The function over ``V[lo:hi]`` per row; values are centred on ``ref`` (a scalar,
        or one value per point) to keep the cumulative sums precise."""
        cnt = (hi - lo).astype(np.float64)
        if "cs" not in sums:
            sums["d"] = d = V - ref
            sums["cs"] = np.concatenate(([0.0], np.cumsum(d)))
        d, cs = sums["d"], sums["cs"]
        s = cs[hi] - cs[lo]
        if not np.isscalar(ref):            # per point: the rows' own (their window's first)
            ref = np.where(hi > 0, ref[np.maximum(hi - 1, 0)], 0.0) if ref.shape[0] else 0.0
        name = self.name
        if name == "count":
            out = cnt
        elif name == "sum":
            out = s + ref * cnt
        elif name == "mean":
            out = s / cnt + ref
        else:
            if "cs2" not in sums:
                sums["cs2"] = np.concatenate(([0.0], np.cumsum(d * d)))
            cs2 = sums["cs2"]
            s2 = cs2[hi] - cs2[lo]
            var = np.maximum(s2 / cnt - (s / cnt) ** 2, 0.0)
            out = np.sqrt(var)
            out[cnt < 2] = np.nan
        return out


def range_extreme(V: np.ndarray, lo: np.ndarray, hi: np.ndarray, fn: np.ufunc) -> np.ndarray:
    """``fn``-reduce ``V[lo:hi]`` for every (lo, hi) pair (NaN when empty): a sparse table,
    or, when the windows hold fewer points in all than its levels would, ``fn.reduceat``
    over the (lo, hi) pairs (each reduction depends only on its own pair)."""
    cnt = hi - lo
    out = np.full(lo.shape[0], np.nan)
    ok = cnt > 0
    if not ok.any():
        return out
    maxc = int(cnt.max())
    if int(cnt.sum()) <= V.shape[0] * max(maxc.bit_length() - 1, 1):
        # few rows (a live poll: one new row per rank): one pass over their windows
        sel = np.flatnonzero(ok)
        pairs = np.empty(2 * sel.shape[0], dtype=np.int64)
        pairs[0::2], pairs[1::2] = lo[sel], hi[sel]
        out[sel] = fn.reduceat(np.append(V, V[-1:]), pairs)[0::2]
        return out
    levels = [V]
    k = 1
    while 2 * k <= maxc:
        prev = levels[-1]
        levels.append(fn(prev[:-k], prev[k:]))
        k *= 2
    level = np.zeros(lo.shape[0], dtype=np.int64)
    level[ok] = np.frexp(cnt[ok].astype(np.float64))[1] - 1
    for j in np.flatnonzero(np.bincount(level[ok])):    # the levels used, in order
        sel = ok & (level == j)
        table = levels[j]
        out[sel] = fn(table[lo[sel]], table[hi[sel] - (1 << int(j))])
    return out


class MinMax(LastN):
    """``min max`` over the last n steps."""

    centred = False

    def reduce(self, V: np.ndarray, lo: np.ndarray, hi: np.ndarray, ref: Any,
               sums: Dict[str, Any]) -> np.ndarray:
        return range_extreme(V, lo, hi, np.maximum if self.name == "max" else np.minimum)


class Delta(WindowNode):
    """``delta(x, n)``: x now minus x as it was n steps ago."""

    name = "delta"

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        """The points of the last n steps and the one before them."""
        return self.children[0].key, self.n_steps, 1, ()

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n = self.n_steps
        carry = Shared(frame, self.children[0].key, args[0], [state], n, 1)
        S, V, hi = carry.arrays
        out = np.full(frame.n, np.nan)
        if V.shape[0]:
            past_idx = search_right(S, frame.steps - n) - 1
            out = self.delta(V, hi, past_idx, 0)
        carry.keep()
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        n = self.n_steps
        carry = Shared(frame, self.children[0].key, args[0], states, n, 1)
        K, V, hi, start = carry.arrays
        out = np.full(frame.n, np.nan)
        if V.shape[0]:
            first = start[frame.segments.seg]       # each row's rank's first point
            past_idx = np.searchsorted(K, frame.segments.keys - n, side="right") - 1
            out = self.delta(V, hi, past_idx, first)
        carry.keep()
        return out, args[0][1]

    @staticmethod
    def delta(V: np.ndarray, hi: np.ndarray, past_idx: np.ndarray, first: Any) -> np.ndarray:
        """``V[hi - 1] - V[past_idx]``, NaN where either is before ``first``."""
        now = np.where(hi > first, V[np.maximum(hi - 1, 0)], np.nan)
        past = np.where(past_idx >= first, V[np.maximum(past_idx, 0)], np.nan)
        return now - past


class Prev(WindowNode):
    """``prev(x, k)``: x at its k-th finite point before its last one, counting records, not
    step numbers (NaN until x has k + 1 points). Keeps k + 1 points."""

    name = "prev"

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        """The last k + 1 points."""
        return self.children[0].key, 0, self.n_steps + 1, ()

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        k = self.n_steps
        carry = Shared(frame, self.children[0].key, args[0], [state], 0, k + 1)
        S, V, hi = carry.arrays
        out = self.back(V, hi - 1 - k, 0)
        carry.keep()
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        k = self.n_steps
        carry = Shared(frame, self.children[0].key, args[0], states, 0, k + 1)
        K, V, hi, start = carry.arrays
        out = self.back(V, hi - 1 - k, start[frame.segments.seg])
        carry.keep()
        return out, args[0][1]

    @staticmethod
    def back(V: np.ndarray, idx: np.ndarray, first: Any) -> np.ndarray:
        """``V[idx]``, NaN where ``idx`` is before ``first``."""
        if not V.shape[0]:
            return np.full(idx.shape[0], np.nan)
        return np.where(idx >= first, V[np.minimum(np.maximum(idx, 0), V.shape[0] - 1)], np.nan)


class RelChange(WindowNode):
    """``rel_change(x, n)``: (mean of the last n steps - mean of the n before) / |mean before|."""

    name = "rel_change"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n = self.n_steps
        S, V, hi = gather(frame, args[0], state)
        first = _first(state, S)
        q = frame.steps
        mid = search_right(S, q - n)
        lo = search_right(S, q - 2 * n)
        ref = V[0] if V.shape[0] else 0.0
        cs = np.concatenate(([0.0], np.cumsum(V - ref)))
        c_now, c_prev = (hi - mid), (mid - lo)
        now = (cs[hi] - cs[mid]) / c_now + ref
        prev = (cs[mid] - cs[lo]) / c_prev + ref
        out = (now - prev) / np.abs(prev)
        out[(c_now == 0) | (c_prev == 0) | ~(first <= q - 2 * n + 1)] = np.nan
        keep(state, S, V, frame, 2 * n)
        return out, args[0][1]


class Slope(WindowNode):
    """``slope(x, n)``: least-squares slope per step over the points of the last n steps."""

    name = "slope"

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        n, m = self.n_steps, self.least_points
        S, V, hi = gather(frame, args[0], state)
        lo = at_least(search_right(S, frame.steps - n), hi, m, 0)
        if V.shape[0]:
            out = self.slope((S - S[0]).astype(np.float64), V - V[0], lo, hi)
        else:
            out = self.slope(_EMPTY_F, _EMPTY_F, lo, hi)
        keep(state, S, V, frame, n, extra_before=m)
        return out, args[0][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        from msdoctor.core.engine.segments import gather_segments, keep_segments, segment_refs
        n, m = self.n_steps, self.least_points
        K, V, hi, start = gather_segments(frame, args[0], states)
        lo = np.searchsorted(K, frame.segments.keys - n, side="right")
        lo = at_least(lo, hi, m, start[frame.segments.seg])
        out = self.slope((K - segment_refs(K, start)).astype(np.float64),
                         V - segment_refs(V, start), lo, hi)
        keep_segments(states, K, V, frame, start, n, extra_before=m)
        return out, args[0][1]

    @staticmethod
    def slope(s: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The least-squares slope of the points ``(s, v)[lo:hi]`` per row."""

        def window_sum(x: np.ndarray) -> np.ndarray:
            c = np.concatenate(([0.0], np.cumsum(x)))
            return c[hi] - c[lo]

        cnt = (hi - lo).astype(np.float64)
        ss, sv, sss, ssv = window_sum(s), window_sum(v), window_sum(s * s), window_sum(s * v)
        den = cnt * sss - ss * ss
        out = (cnt * ssv - ss * sv) / den
        out[(cnt < 2) | (den <= 0)] = np.nan
        return out
