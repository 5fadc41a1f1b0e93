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

The labels given when an alert starts stay with it until it resolves, except ``first_rank``:
a rank read later (a slower rank, a sidecar that reads ranks in turn) can show an earlier start
of the same episode, and :meth:`LayerBook.relabels` then corrects the label of every alert still
firing (the engine journals the change as a new firing transition). Rows kept per rank are
bounded (:data:`KEPT`).
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict, deque
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np

#: Rows of history a spike is measured against; per-step findings kept per rank and kind.
SPIKE_HISTORY = 16
KEPT = 4096
#: Another rank's episode counts for ``first_rank`` when it started at most this many steps before.
EPISODE = 50
#: A layer "jumped" when its gradient norm is this many times its recent median.
JUMP = 4.0
#: A sampled relative update below this, while the median layer moves, is "not moving".
STILL = 1e-9

NONFINITE, SPIKE, STALL, AT_INIT = "nonfinite", "spike", "stall", "at_init"


def kind_of(alert: str) -> Optional[str]:
    """Which localisation an alert gets (None: none)."""
    if "NonFinite" in alert:
        return NONFINITE
    if alert.startswith("GradNormSpike") or alert == "GradNormExplosion":
        return SPIKE
    if alert in ("UpdatesStalled", "LossPlateau", "LayerFrozen", "LossFrozen", "GradientsZero"):
        return STALL
    if alert == "LayersNotLoaded":
        return AT_INIT
    return None


class _Rank:
    """One rank's recent gradient rows (the spike baseline) and what each step's row showed."""

    def __init__(self) -> None:
        self.history: Deque[Tuple[List[str], np.ndarray]] = deque(maxlen=SPIKE_HISTORY)
        self.last: Optional[Tuple[int, Any]] = None
        #: kind -> step -> (t, the layer(s) named): bounded, oldest dropped first
        self.found: Dict[str, "OrderedDict[int, Tuple[float, str]]"] = {
            NONFINITE: OrderedDict(), SPIKE: OrderedDict(), STALL: OrderedDict()}

    def keep(self, kind: str, step: int, t: float, layer: str) -> None:
        found = self.found[kind]
        for old in [s for s in found if s >= step]:    # a resumed run re-logs steps: keep the new
            del found[old]
        found[step] = (t, layer)
        while len(found) > KEPT:
            found.popitem(last=False)


def _array(values: List[Any]) -> np.ndarray:
    """A wire array as floats; null (not measured) becomes NaN (see :func:`_measured`)."""
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


def _measured(values: List[Any]) -> np.ndarray:
    return np.array([v is not None for v in values], dtype=bool)


def _first_nonfinite(event: Dict[str, Any]) -> Optional[int]:
    """The first layer (forward order) whose activation max, else gradient norm, is non-finite."""
    for name in ("act_max", "grad_norm"):
        values = event.get(name)
        if values is not None:
            for i, v in enumerate(values):
                if v is not None and not math.isfinite(v):
                    return i
    return None


def _seen(last: Tuple[int, Any], step: int, t: Any) -> bool:
    """An event noted already: the last one again, or one before it in both step and time
    (the pipeline notes a read before the engine does; a resumed run's steps come later)."""
    if last == (step, t):
        return True
    timed = isinstance(t, (int, float)) and isinstance(last[1], (int, float))
    return timed and step <= last[0] and t <= last[1]


class LayerBook:
    """What each (run, rank)'s layers events showed, and the labels they give an alert."""

    def __init__(self) -> None:
        self.ranks: Dict[Tuple[str, int], _Rank] = {}
        self.assigned: Dict[Tuple[str, int, str], Dict[str, str]] = {}
        #: the step each assigned alert fired at (what ``first_rank`` is judged near)
        self.fired_at: Dict[Tuple[str, int, str], Optional[int]] = {}
        self.at_init: Dict[Tuple[str, int], str] = {}

    def note_start(self, run: str, rank: int, event: Dict[str, Any]) -> None:
        """A run_start: the layers its hooks found still at their initializer after loading."""
        config = event.get("config")
        names = config.get("layers_at_init_names") if isinstance(config, dict) else None
        if isinstance(names, list) and names:
            self.at_init[(run, rank)] = ",".join(str(n) for n in names[:32])
        else:
            self.at_init.pop((run, rank), None)

    def note(self, run: str, rank: int, event: Dict[str, Any]) -> None:
        """Read one ``layers`` event (already validated); the same event twice counts once."""
        book = self.ranks.get((run, rank))
        if book is None:
            book = self.ranks[(run, rank)] = _Rank()
        step, t = int(event["step"]), event.get("t")
        if book.last is not None and _seen(book.last, step, t):
            return
        book.last = (step, t)
        when = float(t) if isinstance(t, (int, float)) else math.inf
        names = event["names"]
        bad = _first_nonfinite(event)
        if bad is not None:
            book.keep(NONFINITE, step, when, names[bad])
        grads = event.get("grad_norm")
        if grads is not None:
            now = _array(grads)
            jump = self._jump(book, names, now)
            if jump is not None and jump[1] >= JUMP:
                book.keep(SPIKE, step, when, names[jump[0]])
            if np.isfinite(now[_measured(grads)]).all():
                book.history.append((list(names), now))
        ratios = event.get("update_ratio")
        if ratios is not None:
            ratio, measured = _array(ratios), _measured(ratios)
            moving = float(np.median(ratio[measured])) if measured.any() else 0.0
            still = np.flatnonzero(measured & (ratio <= STILL)).tolist()
            book.keep(STALL, step, when,
                      ",".join(names[j] for j in still) if moving > STILL else "")

    @staticmethod
    def _jump(book: _Rank, names: List[str], now: np.ndarray) -> Optional[Tuple[int, float]]:
        """(layer index, ratio to its recent median) of the biggest jump in ``now``."""
        history = [row for n, row in book.history if n == names]
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

    def _episode(self, book: _Rank, kind: str, step: Optional[int],
                 near: bool = True) -> Optional[Tuple[int, float, str]]:
        """(step, t, layer) that starts the episode of ``kind`` seen at or before ``step`` (a
        spike: ``near`` it, within 2 steps, when naming the culprit of this rank's alert)."""
        found = book.found[kind]
        steps = [s for s in found if step is None or s <= step]
        if not steps:
            return None
        last = steps[-1]
        if near and kind == SPIKE and step is not None and step - last > 2:
            return None
        if kind == NONFINITE:
            while last - 1 in found:
                last -= 1
        t, layer = found[last]
        return last, t, layer

    def culprit(self, kind: str, run: str, rank: int, step: Optional[int]) -> Optional[str]:
        """The layer(s) to name for an alert of ``kind`` at ``step`` on (run, rank), or None."""
        if kind == AT_INIT:
            return self.at_init.get((run, rank))
        book = self.ranks.get((run, rank))
        found = self._episode(book, kind, step) if book is not None else None
        return found[2] if found is not None and found[2] else None

    def first_rank(self, kind: str, run: str, step: Optional[int]) -> Optional[int]:
        """The rank of ``run`` whose episode of ``kind`` near ``step`` started first (by step,
        then time), among the ranks read so far; None when none shows one."""
        seen = []
        for (name, rank), book in self.ranks.items():
            if name != run:
                continue
            found = self._episode(book, kind, step, near=False)
            if found is not None and (step is None or step - found[0] <= EPISODE):
                seen.append((found[0], found[1], rank))
        return min(seen)[2] if seen else None

    def labels(self, alert: str, state: str, run: str, rank: int,
               step: Optional[int]) -> Dict[str, str]:
        """The ``layer`` / ``first_rank`` labels of a transition (kept from its firing on)."""
        key = (run, rank, alert)
        if state == "resolved":
            self.fired_at.pop(key, None)
            return self.assigned.pop(key, {})
        if key in self.assigned:
            return self.assigned[key]
        kind = kind_of(alert)
        found: Dict[str, str] = {}
        if kind is not None:
            layer = self.culprit(kind, run, rank, step)
            if layer:
                found["layer"] = layer
            first = self.first_rank(kind, run, step) if kind in (NONFINITE, SPIKE) else None
            if first is not None:
                found["first_rank"] = str(first)
        if state == "firing":
            self.assigned[key], self.fired_at[key] = found, step
        return found

    def relabels(self, run: str) -> List[Tuple[int, str, str]]:
        """Correct ``first_rank`` of the firing alerts of ``run`` from what has been read since
        they fired; ``(rank, alert, the previous first_rank or "")`` of each one changed."""
        changed = []
        for key, labels in list(self.assigned.items()):
            kind = kind_of(key[2])
            if key[0] != run or kind not in (NONFINITE, SPIKE):
                continue
            first = self.first_rank(kind, run, self.fired_at.get(key))
            if first is not None and str(first) != labels.get("first_rank"):
                changed.append((key[1], key[2], labels.get("first_rank", "")))
                self.assigned[key] = {**labels, "first_rank": str(first)}
        return changed

    def state_dict(self) -> Dict[str, Any]:
        """The labels of alerts still open (rows are re-read from the spool after a restart)."""
        return {"assigned": [[run, rank, alert, labels, self.fired_at.get((run, rank, alert))]
                             for (run, rank, alert), labels in self.assigned.items()]}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        for item in state.get("assigned", []) if isinstance(state, dict) else []:
            if isinstance(item, list) and len(item) in (4, 5) and isinstance(item[3], dict):
                key = (str(item[0]), int(item[1]), str(item[2]))
                self.assigned[key] = {str(k): str(v) for k, v in item[3].items()}
                at = item[4] if len(item) == 5 else None
                self.fired_at[key] = at if isinstance(at, int) else None
