"""``delta(mean(x, n[, m]), k)`` from the points of x.

``delta`` keeps its argument's points of the last k steps. Over a window mean, that is a
second copy of the run's history: LossPlateau's ``delta(mean(loss, 1e5), 2e5)`` kept every
mean of the last 200k steps beside the loss points ``mean(loss, 1e5)`` keeps. The program
compiles it into :class:`MeanDelta` instead (:func:`fused`), whose carry is x's points,
shared with every other window over x (:mod:`.carries`): the mean as it was k steps ago is
computed again from those points, the window of n steps (at least m points) that ended at
the series' last point k or more steps back. The values are ``delta``'s over the mean's
series (to float rounding: the sums are centred on another point).

The mean's series has a point where x is recorded and its window holds a finite point; at
a record of a non-finite x that is not a point of x. Such steps ("holes": a NaN loss after
finite ones) are kept apart, a few steps at most.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np

from msdoctor.core.engine.gathers import Shared, point_rows, search_right
from msdoctor.core.engine.nodes import Frame, Node, Out, locf, locf_segments
from msdoctor.core.engine.windows import Aggregate, Delta, WindowNode, at_least

_EMPTY_I = np.zeros(0, dtype=np.int64)


def fused(node: Node) -> Node:
    """``node``, or its :class:`MeanDelta` when it is ``delta`` of a window mean."""
    if isinstance(node, Delta) and isinstance(node.children[0], Aggregate) \
            and node.children[0].name == "mean":
        mean = node.children[0]
        return MeanDelta((mean.children[0], mean),
                         (node.n_steps, mean.n_steps, mean.least_points))
    return node


class MeanDelta(WindowNode):
    """``delta(mean(x, n, m), k)``; children ``(x, mean(x, n, m))``, params ``(k, n, m)``."""

    name = "meandelta"

    def make_key(self) -> str:
        k, n, m = (int(p) for p in self.params)
        return f"meandelta({self.children[0].key},{n},{m},{k})"

    def new_state(self) -> Dict[str, Any]:
        return {**super().new_state(), "last": math.nan, "holes": _EMPTY_I}

    def carry_spec(self) -> Tuple[str, int, int, Tuple[Tuple[int, int, int], ...]]:
        k, n, m = (int(p) for p in self.params)
        return self.children[0].key, 0, 0, ((k, n, m),)

    @property
    def mean(self) -> Aggregate:
        child = self.children[1]
        assert isinstance(child, Aggregate)
        return child

    def evaluate(self, frame: Frame, args: List[Out], state: Dict[str, Any]) -> Out:
        k, n, m = (int(p) for p in self.params)
        carry = Shared(frame, self.children[0].key, args[0], [state], 0, 0, ((k, n, m),))
        S, V, hi = carry.arrays
        holes = np.concatenate((state["holes"], frame.steps[new_holes(frame.n, args)]))
        now = locf(args[1][0], finite_points(args[1]), state)
        target = frame.steps - k
        past = search_right(S, target) - 1
        step = np.where(past >= 0, S[np.maximum(past, 0)], -1) if S.shape[0] else \
            np.full(frame.n, -1)
        if holes.shape[0]:
            h = np.searchsorted(holes, target, side="right") - 1
            step = np.maximum(step, np.where(h >= 0, holes[np.maximum(h, 0)], -1))
        top = search_right(S, step)
        lo = at_least(search_right(S, step - n), top, m, 0)
        value = self.mean.reduce(V, lo, top, V[0] if V.shape[0] else 0.0,
                                 Aggregate.sums(frame, V))
        out = now - np.where(step >= 0, value, np.nan)
        if frame.n:
            state["holes"] = kept_holes(holes, int(frame.steps[-1]) - k)
        carry.keep()
        return out, args[1][1]

    def evaluate_segments(self, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
        k, n, m = (int(p) for p in self.params)
        segs = frame.segments
        carry = Shared(frame, self.children[0].key, args[0], states, 0, 0, ((k, n, m),))
        K, V, hi, start = carry.arrays
        now = locf_segments(args[1][0], finite_points(args[1]), frame, states)
        first = start[segs.seg]
        target = segs.keys - k
        past = np.searchsorted(K, target, side="right") - 1
        step = np.where(past >= first, K[np.maximum(past, 0)], -1) if K.shape[0] else \
            np.full(frame.n, -1)
        holes = new_holes(frame.n, args)
        if holes.any() or any(st["holes"].shape[0] for st in states):
            step = np.maximum(step, segment_holes(frame, states, holes, k))
        top = np.searchsorted(K, step, side="right")
        lo = at_least(np.searchsorted(K, step - n, side="right"), top, m, first)
        sums = Aggregate.sums(frame, V)
        value = self.mean.reduce(V, lo, top, Aggregate.refs(sums, V, start), sums)
        out = now - np.where(step >= 0, value, np.nan)
        carry.keep()
        return out, args[1][1]


def new_holes(n: int, args: List[Out]) -> np.ndarray:
    """Rows where the mean has a point and x has none (x recorded, not finite)."""
    rows = point_rows(args[1], n)
    mean = args[1][0] if rows is None else args[1][0][rows]
    x = args[0][0] if rows is None else args[0][0][rows]
    out = np.zeros(n, dtype=bool)
    hole = np.isfinite(mean) & ~np.isfinite(x)
    if rows is None:
        return hole
    out[rows[hole]] = True
    return out


def finite_points(arg: Out) -> np.ndarray:
    """Mask of the rows where ``arg`` has a finite point."""
    values, mask = arg
    if mask is False:
        return np.zeros(values.shape[0], dtype=bool)
    return np.isfinite(values) if mask is None else mask & np.isfinite(values)


def kept_holes(holes: np.ndarray, since: int) -> np.ndarray:
    """The holes after ``since`` and the last one at or before it (one rank)."""
    cut = max(int(np.searchsorted(holes, since, side="right")) - 1, 0)
    return holes[cut:].copy()


def segment_holes(frame: Frame, states: List[Dict[str, Any]], new: np.ndarray,
                  k: int) -> np.ndarray:
    """Per row, the key of its rank's last hole at or before its step - k, else -1; each
    rank keeps its holes after its last step - k and the last one before
    (:func:`kept_holes`)."""
    segs = frame.segments
    old = [(r, st["holes"]) for r, st in enumerate(states) if st["holes"].shape[0]]
    keys = np.sort(np.concatenate([segs.keys[new]] + [h + segs.offset[r] for r, h in old]))
    h = np.searchsorted(keys, segs.keys - k, side="right") - 1
    mine = (h >= 0) & (keys[np.maximum(h, 0)] >= segs.offset[segs.seg])
    out = np.where(mine, keys[np.maximum(h, 0)], -1)
    # what each rank keeps: its holes after its last key - k, and the last one before
    seg = np.searchsorted(segs.offset, keys, side="right") - 1
    last = segs.keys[segs.last_rows()][seg] - k
    before = np.searchsorted(keys, last, side="right") - 1       # per hole: its rank's last <=
    idle = (segs.bounds[1:] == segs.bounds[:-1])[seg]              # a rank without rows here
    keep = (keys > last) | (np.arange(keys.shape[0]) == before) | idle
    had = {r for r, _ in old} | set(np.unique(seg).tolist())
    kept = keys[keep]
    kept_seg = seg[keep]
    bounds = np.searchsorted(kept_seg, np.arange(len(states) + 1))
    for r in had:
        states[r]["holes"] = kept[bounds[r]:bounds[r + 1]] - segs.offset[r]
    return out
