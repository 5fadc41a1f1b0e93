"""Many ranks in one evaluation: the rows of a poll's step batches, rank after rank.

A live sidecar polls N ranks that each wrote a step or two. Evaluating every operator
once per rank costs N x operators Python calls whatever the rows; here each operator
runs once over the rows of all ranks (:class:`Segments`: rank r owns rows
``bounds[r]:bounds[r+1]``). Element-wise operators do not care; window operators look
up their windows by *keys*, the step numbers shifted by ``r * GAP`` so that no window
crosses from one rank into another, and keep each rank's carry-over in that rank's
state, as the one-rank path does. An operator without a segment-aware version is
evaluated rank by rank on its slices (:func:`per_rank`), so results are always those
of evaluating each rank alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.carries import Group
from msdoctor.core.engine.nodes import Frame, Mask, Node, Out

#: ``frame.memo`` key of the program's held carries: per carry group, the arrays of the last
#: poll's kept points (:func:`keep_segments`), which the next poll of the same ranks gathers
#: without joining the ranks' carries again.
HELD = "held"
#: Key distance between ranks: larger than any step number and any window span.
GAP = 1 << 42
MAX_STEP = 1 << 40


@dataclass
class Segments:
    """Which rows of a many-rank frame belong to which rank, and their window keys."""

    bounds: np.ndarray                   # R + 1 row offsets
    seg: np.ndarray                      # the segment of each row
    offset: np.ndarray                   # key offset of each segment (int64)
    keys: np.ndarray                     # step + offset, per row (increasing across ranks)
    frames: List[Frame] = field(default_factory=list)   # one frame per rank (the fallback)

    @property
    def count(self) -> int:
        return int(self.bounds.shape[0]) - 1

    def last_rows(self) -> np.ndarray:
        return self.bounds[1:] - 1


def segments_of(frames: Sequence[Frame]) -> Segments:
    """The segments of per-rank frames laid one after the other."""
    sizes = np.fromiter((f.n for f in frames), dtype=np.int64, count=len(frames))
    bounds = np.zeros(len(frames) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    seg = np.repeat(np.arange(len(frames)), sizes)
    offset = np.arange(len(frames), dtype=np.int64) * GAP
    steps = np.concatenate([f.steps for f in frames])
    return Segments(bounds, seg, offset, steps + offset[seg], list(frames))


def fits(steps: np.ndarray) -> bool:
    """Step numbers a many-rank evaluation can key (0 <= step < MAX_STEP)."""
    return bool(steps.shape[0]) and int(steps.min()) >= 0 and int(steps.max()) < MAX_STEP


def _slice_mask(mask: Mask, a: int, b: int) -> Mask:
    return mask[a:b] if isinstance(mask, np.ndarray) else mask


def join_masks(masks: Sequence[Mask], sizes: Sequence[int]) -> Mask:
    """Per-rank point masks -> one mask over the rows of all ranks."""
    if all(m is None for m in masks):
        return None
    if all(m is False for m in masks):
        return False
    parts = [np.ones(n, dtype=bool) if m is None else np.zeros(n, dtype=bool) if m is False
             else m for m, n in zip(masks, sizes)]
    return np.concatenate(parts)


def per_rank(node: Node, frame: Frame, args: List[Out], states: List[Dict[str, Any]]) -> Out:
    """``node`` evaluated rank by rank on its rows, the outputs joined."""
    segs = frame.segments
    assert segs is not None
    b = segs.bounds.tolist()
    values, masks = [], []
    for r, sub in enumerate(segs.frames):
        a, z = b[r], b[r + 1]
        out = node.evaluate(sub, [(v[a:z], _slice_mask(m, a, z)) for v, m in args], states[r])
        values.append(out[0])
        masks.append(out[1])
    return np.concatenate(values), join_masks(masks, [f.n for f in segs.frames])


def some_ranks(node: Node, frame: Frame, args: List[Out], states: List[Dict[str, Any]],
               ranks: Sequence[int], out: np.ndarray) -> np.ndarray:
    """``out`` with the rows of ``ranks`` (segment numbers) evaluated rank by rank, as
    :func:`per_rank` does; the other rows as they were."""
    segs = frame.segments
    assert segs is not None
    b = segs.bounds.tolist()
    for r in ranks:
        a, z = b[r], b[r + 1]
        sub = [(v[a:z], _slice_mask(m, a, z)) for v, m in args]
        out[a:z] = node.evaluate(segs.frames[r], sub, states[r])[0]
    return out


def _held(frame: Frame, key: Optional[Hashable], states: List[Dict[str, Any]]
          ) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(sizes, steps, values)``: the carries of ``states`` laid one after the other, as
    :func:`keep_segments` left them for the same ranks in the same order (else None)."""
    held = frame.memo.get(HELD)
    entry = None if held is None or key is None else held.get(key)
    if entry is None:
        return None
    views, steps, values, sizes = entry
    if len(views) != len(states) or not all(st["s"] is w for st, w in zip(states, views)):
        return None
    return sizes, steps, values


def gather_segments(frame: Frame, arg: Out, states: List[Dict[str, Any]],
                    key: Optional[Hashable] = None
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each rank's carry-over followed by its new finite points, rank after rank:
    ``(K, V, hi, start)``; ``K`` are keys, ``hi[i]`` bounds what row ``i`` may see
    (as :func:`msdoctor.core.engine.gathers.gather`), rank r's points are
    ``start[r]:start[r+1]``. ``key``: the carry group, whose carries the last poll of
    the same ranks left in one array (:data:`HELD`)."""
    segs = frame.segments
    assert segs is not None
    values, n, R = arg[0], frame.n, segs.count
    mask = arg[1]
    if mask is None:
        ok = np.isfinite(values)
    elif mask is False:
        ok = np.zeros(n, dtype=bool)
    else:
        ok = mask & np.isfinite(values)
    held = _held(frame, key, states)
    if held is None:
        carry_n = np.fromiter((st["s"].shape[0] for st in states), dtype=np.int64, count=R)
        carry_s = np.concatenate([st["s"] for st in states])
        carry_v = np.concatenate([st["v"] for st in states])
    else:
        carry_n, carry_s, carry_v = held
    new_before = np.concatenate(([0], np.cumsum(ok)))        # new points before each row
    new_n = new_before[segs.bounds[1:]] - new_before[segs.bounds[:-1]]
    start = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(carry_n + new_n, out=start[1:])
    # rank r: its carry, then its new points (inserted after the carries up to rank r's)
    at = np.cumsum(carry_n)[segs.seg[ok]]
    K = np.insert(carry_s + np.repeat(segs.offset, carry_n), at, segs.keys[ok])
    V = np.insert(carry_v, at, values[ok])
    # what row i of rank r sees: r's carry and r's new points up to row i
    hi = (start[:-1] + carry_n - new_before[segs.bounds[:-1]])[segs.seg] + new_before[1:]
    return K, V, hi, start


def cuts(S: np.ndarray, last: np.ndarray, first: np.ndarray, group: Group) -> np.ndarray:
    """Per rank (its last key ``last``, its first point's index ``first``), the index of its
    first point to keep: those within the span plus the extra ones, and for each past
    window ``(k, n, m)`` the window of n steps (plus m points) that ends at the last point
    k steps or more before the last one (a later row's past point is that one or later)."""
    span, extra, lags = group
    cut = np.searchsorted(S, last - span, side="right") - extra
    for k, n, m in lags:
        past = np.searchsorted(S, last - k, side="right") - 1
        some = past >= first
        at = np.searchsorted(S, S[np.maximum(past, 0)] - n, side="right") - m if S.shape[0] \
            else first
        cut = np.minimum(cut, np.where(some, at, first))
    return np.maximum(cut, first)


def keep_segments(states: List[Dict[str, Any]], K: np.ndarray, V: np.ndarray, frame: Frame,
                  start: np.ndarray, span: int, extra_before: int = 0,
                  lags: Tuple[Tuple[int, int, int], ...] = (),
                  key: Optional[Hashable] = None) -> None:
    """Each rank keeps its points with step > its last step - ``span`` (plus
    ``extra_before`` older ones and the past windows ``lags``), as
    :func:`msdoctor.core.engine.gathers.keep`: views of one array of all ranks' kept
    points (a rank that leaves the many-rank polls gets copies: :func:`.carries.release`)."""
    segs = frame.segments
    assert segs is not None
    last = segs.keys[segs.last_rows()]
    cut = cuts(K, last, start[:-1], (span, extra_before, lags))
    sizes = start[1:] - cut
    bounds = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    if int(bounds[-1]) == K.shape[0]:
        kept_v = V
        steps = K - np.repeat(segs.offset, sizes)
    else:
        at = np.arange(int(bounds[-1]))
        at += np.repeat(cut - bounds[:-1], sizes)
        steps, kept_v = K[at], V[at]
        del at                                  # a poll holds all ranks' carries: one less
        steps -= np.repeat(segs.offset, sizes)
    b = bounds.tolist()
    views = []
    for r, st in enumerate(states):
        a, z = b[r], b[r + 1]
        s = steps[a:z]
        st["s"], st["v"] = s, kept_v[a:z]
        views.append(s)
    held = frame.memo.get(HELD)
    if held is not None and key is not None:
        held[key] = (views, steps, kept_v, sizes)


def segment_refs(V: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per point, the first point of its rank (the centre of its rank's sums)."""
    sizes = np.diff(start)
    if not V.shape[0]:
        return V
    firsts = V[np.minimum(start[:-1], V.shape[0] - 1)]
    return np.repeat(firsts, sizes)


def join_batches(batches: Sequence[StepBatch]) -> StepBatch:
    """The rows of several ranks' batches, one after the other (a signal some of them lack
    gets a mask that is False on their rows)."""
    names: Dict[str, None] = {}
    for b in batches:
        names.update(dict.fromkeys(b.columns))
    sizes = [len(b) for b in batches]
    columns: Dict[str, np.ndarray] = {}
    masks: Dict[str, np.ndarray] = {}
    for name in names:
        parts = [b.columns.get(name) for b in batches]
        columns[name] = np.concatenate([np.full(n, np.nan) if p is None else p
                                        for p, n in zip(parts, sizes)])
        mask = join_masks([False if p is None else b.masks.get(name)
                           for p, b in zip(parts, batches)], sizes)
        if isinstance(mask, np.ndarray):
            masks[name] = mask
    return StepBatch("", -1, np.concatenate([b.steps for b in batches]),
                     np.concatenate([b.t for b in batches]), columns, masks)


def segmented_scan(values: np.ndarray, seg: np.ndarray, fn: np.ufunc) -> np.ndarray:
    """``fn.accumulate`` of ``values`` restarted at each change of ``seg`` (ascending):
    a doubling scan, log2(longest segment) vectorised passes."""
    out = values.copy()
    d, n = 1, values.shape[0]
    while d < n:
        same = seg[d:] == seg[:-d]
        if not same.any():
            break
        out[d:] = np.where(same, fn(out[d:], out[:-d]), out[d:])
        d *= 2
    return out
