"""A window operator's points: its carry-over plus a batch's new finite points, and what
it keeps of them for the next batch (:class:`Shared`: one carry for all window operators over
one argument)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from msdoctor.core.engine import carries
from msdoctor.core.engine.nodes import Frame, Out
from msdoctor.core.engine.segments import cuts, gather_segments, keep_segments

_EMPTY_I = np.zeros(0, dtype=np.int64)


def search_right(S: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(S, x, side="right")`` for sorted int64 step numbers ``S``.

    The common case, every step recorded, makes ``S`` consecutive integers
    (``S[-1] - S[0] == len(S) - 1``): then the answer is arithmetic, exactly.
    """
    m = S.shape[0]
    if m and x.dtype.kind == "i" and S.dtype.kind == "i" and int(S[-1]) - int(S[0]) == m - 1:
        out = x - (int(S[0]) - 1)
        np.maximum(out, 0, out=out)       # np.clip's, without its Python-level dispatch
        return np.minimum(out, m, out=out)
    return np.searchsorted(S, x, side="right")


def point_rows(arg: Out, n: int) -> np.ndarray | None:
    """Row indices of the points of ``arg`` (None = every row)."""
    mask = arg[1]
    if mask is None:
        return None
    if mask is False:
        return _EMPTY_I
    return np.flatnonzero(mask)


def gather(frame: Frame, arg: Out, state: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Carry-over + this batch's finite points: ``(S, V, hi)``.

    ``S``/``V`` are the points' step numbers and values; ``hi[i]`` is how many of
    them come from rows at or before row ``i`` (so ``S[:hi[i]]`` is what row ``i`` may see).
    """
    values = arg[0]
    n = frame.n
    rows = point_rows(arg, n)
    if rows is None:
        s_new, v_new = frame.steps, values
    else:
        s_new, v_new = frame.steps[rows], values[rows]
    ok = np.isfinite(v_new)
    if not ok.all():
        rows = (np.arange(n) if rows is None else rows)[ok]
        s_new, v_new = s_new[ok], v_new[ok]
    carry_s, carry_v = state["s"], state["v"]
    c0 = carry_s.shape[0]
    S = np.concatenate((carry_s, s_new)) if c0 else s_new
    V = np.concatenate((carry_v, v_new)) if c0 else v_new
    if rows is None:
        hi = np.arange(c0 + 1, c0 + n + 1)
    else:
        hi = c0 + search_right(rows, np.arange(n))
    return S, V, hi


def keep(state: Dict[str, Any], S: np.ndarray, V: np.ndarray, frame: Frame, span: int,
         extra_before: int = 0, lags: Tuple[Tuple[int, int, int], ...] = ()) -> None:
    """Keep the points with step > last step - ``span`` (plus ``extra_before`` older ones,
    and the past windows ``lags``: :func:`.segments.cuts`)."""
    if frame.n == 0:
        return
    last = frame.steps[-1:]
    cut = int(cuts(S, last, np.zeros(1, dtype=np.int64), (span, extra_before, lags))[0])
    if S.shape[0] > frame.n and 2 * cut < S.shape[0]:
        # S and V are this operator's own concatenation (carry + new points), mostly kept
        # (a long window): keep views, not copies; the rest is freed with the next batch
        state["s"], state["v"] = S[cut:], V[cut:]
    else:
        state["s"], state["v"] = S[cut:].copy(), V[cut:].copy()


class Shared:
    """An operator's gather of its argument's carry plus the frame's new points, shared with
    the window operators over the same argument (one rank, or a many-rank frame):
    ``arrays`` is ``(S, V, hi)`` for one rank (:func:`gather`), ``(K, V, hi, start)``
    for many (:func:`.segments.gather_segments`). After its reduction the operator calls
    :meth:`keep`: the first one keeps the group's points, the others take them."""

    def __init__(self, frame: Frame, child: str, arg: Any, states: List[Dict[str, Any]], span: int,
                 extra: int, lags: Tuple[Tuple[int, int, int], ...] = ()) -> None:
        self.frame, self.states = frame, states
        self.group = carries.kept(frame, child, span, extra, lags)
        self.key = carries.carry_key(child, self.group)
        shared = carries.shared_gather(frame, self.key, states)
        self.owners: Optional[List[Dict[str, Any]]] = None
        if shared is None:
            self.before = [st["s"] for st in states]
            self.arrays: Tuple[Any, ...] = gather(frame, arg, states[0]) \
                if frame.segments is None else gather_segments(frame, arg, states, self.key)
        else:
            *arrays, self.owners = shared
            self.arrays = tuple(arrays)

    def keep(self) -> None:
        frame, states = self.frame, self.states
        if self.owners is not None:
            carries.take(self.owners, states)
            return
        if frame.segments is None:
            S, V, _ = self.arrays
            keep(states[0], S, V, frame, *self.group)
        else:
            K, V, _, start = self.arrays
            keep_segments(states, K, V, frame, start, *self.group, key=self.key)
        carries.share(frame, self.key, self.before, self.arrays, states)

