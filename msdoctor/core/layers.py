"""Where it went wrong: the culprit layer and the first rank of an alert, from ``layers`` events.

:class:`LayerBook` keeps each rank's recent per-layer rows (``layers`` events, see
``msdoctor.wire.schema``) and, when an alert starts, names

- ``layer``: for a non-finite alert, the first layer in forward order whose activation max (or,
  when no activation went non-finite, whose gradient norm) is non-finite, at the first step of
  the episode; for a gradient-norm spike, the layer whose norm jumped most over its recent
  median (ties: the first in forward order); for stalled updates, the layers whose sampled
  relative update is ~0 while others move;
- ``first_rank``: among the ranks read so far, the one whose rows showed the same kind of
  anomaly first (by step, then by the event's time).

The labels given when an alert starts stay with it until it resolves, so Alertmanager sees one
label set per alert. Rows kept per rank are bounded (:data:`DEPTH`).
"""
from __future__ import annotations

import math
import warnings
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np

#: Rows kept per rank, and rows of history a spike is measured against.
DEPTH = 64
SPIKE_HISTORY = 16
#: A layer "jumped" when its gradient norm is this many times its recent median.
JUMP = 4.0
#: A sampled relative update below this, while the median layer moves, is "not moving".
STILL = 1e-9

NONFINITE, SPIKE, STALL = "nonfinite", "spike", "stall"


def kind_of(alert: str) -> Optional[str]:
    """Which localisation an alert gets (None: none)."""
    if "NonFinite" in alert:
        return NONFINITE
    if alert.startswith("GradNormSpike"):
        return SPIKE
    if alert in ("UpdatesStalled", "LossPlateau", "LayerFrozen", "LossFrozen"):
        return STALL
    return None


class _Rank:
    """One rank's recent rows and the first anomaly of each kind seen in them."""

    def __init__(self) -> None:
        self.rows: Deque[Tuple[int, Optional[float], List[str], Dict[str, np.ndarray]]] = \
            deque(maxlen=DEPTH)
        self.first: Dict[str, Tuple[int, float]] = {}


def _array(values: List[Any]) -> np.ndarray:
    """A wire array as floats; null (not measured) becomes NaN (see :func:`_measured`)."""
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def _measured(values: List[Any]) -> np.ndarray:
    return np.array([v is not None for v in values], dtype=bool)


class LayerBook:
    """Recent per-layer rows of every (run, rank) and the labels they give an alert."""

    def __init__(self) -> None:
        self.ranks: Dict[Tuple[str, int], _Rank] = {}
        self.assigned: Dict[Tuple[str, int, str], Dict[str, str]] = {}

    def note(self, run: str, rank: int, event: Dict[str, Any]) -> None:
        """Keep one ``layers`` event (already validated)."""
        book = self.ranks.get((run, rank))
        if book is None:
            book = self.ranks[(run, rank)] = _Rank()
        arrays = {}
        for name in ("grad_norm", "act_max", "update_ratio"):
            if name in event:
                values = event[name]
                arrays[name] = _array(values)
                arrays[name + ":m"] = _measured(values)
        step, t = int(event["step"]), event.get("t")
        if book.rows and step <= book.rows[-1][0]:    # a resumed run re-logs steps: keep the new
            while book.rows and book.rows[-1][0] >= step:
                book.rows.pop()
        book.rows.append((step, t, list(event["names"]), arrays))
        stamp = (step, float(t) if isinstance(t, (int, float)) else math.inf)
        if NONFINITE not in book.first and self._nonfinite(arrays) is not None:
            book.first[NONFINITE] = stamp
        if SPIKE not in book.first:
            jump = self._jump(book, len(book.rows) - 1)
            if jump is not None and jump[1] >= 10 * JUMP:
                book.first[SPIKE] = stamp

    # -- the culprit ------------------------------------------------------------------------
    @staticmethod
    def _nonfinite(arrays: Dict[str, np.ndarray]) -> Optional[int]:
        for name in ("act_max", "grad_norm"):
            if name in arrays:
                bad = np.flatnonzero(arrays[name + ":m"] & ~np.isfinite(arrays[name]))
                if bad.size:
                    return int(bad[0])
        return None

    @staticmethod
    def _jump(book: _Rank, at: int) -> Optional[Tuple[int, float]]:
        """(layer index, ratio to its median over the rows before) of the biggest jump at row ``at``."""
        step, _, names, arrays = book.rows[at]
        if "grad_norm" not in arrays:
            return None
        now = arrays["grad_norm"]
        history = [r[3]["grad_norm"] for r in list(book.rows)[max(0, at - SPIKE_HISTORY):at]
                   if "grad_norm" in r[3] and r[2] == names]
        if not history:
            return None
        with warnings.catch_warnings():         # columns never measured: all-NaN, on purpose
            warnings.simplefilter("ignore", RuntimeWarning)
            base = np.nanmedian(np.vstack(history), axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(base > 0, now / base, np.nan)
        if not np.isfinite(ratio).any():
            return None
        best = int(np.nanargmax(ratio))
        return best, float(ratio[best])

    def culprit(self, kind: str, run: str, rank: int, step: Optional[int]) -> Optional[str]:
        """The layer(s) to name for an alert of ``kind`` at ``step`` on (run, rank), or None."""
        book = self.ranks.get((run, rank))
        if book is None or not book.rows:
            return None
        rows = [i for i, r in enumerate(book.rows) if step is None or r[0] <= step]
        if not rows:
            return None
        if kind == NONFINITE:
            first = None
            for i in reversed(rows):           # back to the start of the non-finite episode
                found = self._nonfinite(book.rows[i][3])
                if found is None and first is not None:
                    break
                if found is not None:
                    first = (i, found)
            return None if first is None else book.rows[first[0]][2][first[1]]
        if kind == SPIKE:
            jump = self._jump(book, rows[-1])
            return None if jump is None or jump[1] < JUMP else book.rows[rows[-1]][2][jump[0]]
        if kind == STALL:
            for i in reversed(rows):
                arrays = book.rows[i][3]
                if "update_ratio" in arrays:
                    ratio, measured = arrays["update_ratio"], arrays["update_ratio:m"]
                    moving = float(np.median(ratio[measured])) if measured.any() else 0.0
                    still = np.flatnonzero(measured & (ratio <= STILL))
                    if still.size and moving > STILL:
                        return ",".join(book.rows[i][2][j] for j in still.tolist())
                    return None
        return None

    def first_rank(self, kind: str, run: str) -> Optional[int]:
        """The rank of ``run`` whose rows showed ``kind`` first (by step, then time), or None."""
        seen = [(b.first[kind], r) for (name, r), b in self.ranks.items()
                if name == run and kind in b.first]
        return min(seen)[1] if seen else None

    def labels(self, alert: str, state: str, run: str, rank: int,
               step: Optional[int]) -> Dict[str, str]:
        """The ``layer`` / ``first_rank`` labels of a transition (kept from its firing on)."""
        key = (run, rank, alert)
        if state == "resolved":
            return self.assigned.pop(key, {})
        if key in self.assigned:
            return self.assigned[key]
        kind = kind_of(alert)
        found: Dict[str, str] = {}
        if kind is not None:
            layer = self.culprit(kind, run, rank, step)
            if layer:
                found["layer"] = layer
            first = self.first_rank(kind, run) if kind != STALL else None
            if first is not None:
                found["first_rank"] = str(first)
        if state == "firing":
            self.assigned[key] = found
        return found

    def state_dict(self) -> Dict[str, Any]:
        """The labels of alerts still open (rows are re-read from the spool after a restart)."""
        return {"assigned": [[run, rank, alert, labels]
                             for (run, rank, alert), labels in self.assigned.items()]}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        for item in state.get("assigned", []) if isinstance(state, dict) else []:
            if isinstance(item, list) and len(item) == 4 and isinstance(item[3], dict):
                self.assigned[(str(item[0]), int(item[1]), str(item[2]))] = \
                    {str(k): str(v) for k, v in item[3].items()}
