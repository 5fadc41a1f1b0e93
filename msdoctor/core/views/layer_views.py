"""Per-layer rows of one rank over recent steps, with the layers alerts named
(``/api/v1/runs/{run}/ranks/{rank}/layers``, the TUI's layer x step heat map)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from msdoctor.core.layer_rows import LAYER_SIGNALS, MAX_ROWS, column
from msdoctor.core.state import Store
from msdoctor.core.views.alert_views import AlertSource
from msdoctor.core.views.checkpoint_views import records_of
from msdoctor.core.views.run_views import rank_state
from msdoctor.wire.numbers import from_wire, to_wire

#: Steps a layers view holds unless asked otherwise, and at most.
DEFAULT_STEPS = 120
MAX_STEPS = MAX_ROWS

#: One signal's rows: per step, per layer, the value (None: not measured).
Grid = Tuple[Tuple[Optional[float], ...], ...]


@dataclass(frozen=True)
class LayerMark:
    """An alert of this rank that named a layer (its ``layer`` label) and when it began."""

    alert: str
    state: str
    layers: Tuple[str, ...]
    first_step: Optional[int] = None
    first_rank: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return {"alert": self.alert, "state": self.state, "layers": list(self.layers),
                "first_step": self.first_step, "first_rank": self.first_rank}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LayerMark":
        first_rank = d.get("first_rank")
        return cls(str(d["alert"]), str(d.get("state") or ""), tuple(d.get("layers") or ()),
                   d.get("first_step"), None if first_rank is None else int(first_rank))


@dataclass(frozen=True)
class LayersView:
    """A rank's per-layer signals over its recent steps (forward order of ``names``)."""

    run: str
    rank: int
    names: Tuple[str, ...] = ()
    steps: Tuple[int, ...] = ()
    signals: Mapping[str, Grid] = field(default_factory=dict)
    marks: Tuple[LayerMark, ...] = ()

    @property
    def first_nonfinite(self) -> Optional[int]:
        """The first step shown where a measured value is NaN or infinite."""
        for i, step in enumerate(self.steps):
            for grid in self.signals.values():
                if any(v is not None and not math.isfinite(v) for v in grid[i]):
                    return step
        return None

    def culprits(self) -> Tuple[str, ...]:
        """The layers the alerts named, first named first, each once."""
        out: Dict[str, None] = {}
        for mark in self.marks:
            out.update(dict.fromkeys(mark.layers))
        return tuple(out)

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "rank": self.rank, "names": list(self.names),
                "steps": list(self.steps),
                "signals": {k: [[None if v is None else to_wire(v) for v in row] for row in grid]
                            for k, grid in self.signals.items()},
                "marks": [m.to_json() for m in self.marks]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LayersView":
        signals = {str(k): tuple(tuple(None if v is None else from_wire(v) for v in row)
                                 for row in grid)
                   for k, grid in (d.get("signals") or {}).items()}
        return cls(str(d["run"]), int(d["rank"]), tuple(d.get("names") or ()),
                   tuple(int(s) for s in d.get("steps") or ()), signals,
                   tuple(LayerMark.from_json(m) for m in d.get("marks") or ()))


def marks_of(records: Sequence[Mapping[str, Any]], run: str, rank: int) -> Tuple[LayerMark, ...]:
    """The alerts of (run, rank) with a ``layer`` label, one per alert and episode (its latest
    transition), by first step."""
    latest: Dict[Tuple[str, Any], LayerMark] = {}
    for r in records:
        labels = r.get("labels") or {}
        layer = labels.get("layer") if isinstance(labels, Mapping) else None
        if r.get("run") != run or r.get("rank") != rank or not layer:
            continue
        first = str(labels.get("first_rank") or "")
        latest[(str(r.get("alert")), r.get("first_step"))] = LayerMark(
            str(r.get("alert")), str(r.get("state") or ""), tuple(str(layer).split(",")),
            r.get("first_step"), int(first) if first.isdigit() else None)
    return tuple(sorted(latest.values(), key=lambda m: (m.first_step is None, m.first_step or 0)))


def layers(store: Store, source: Optional[AlertSource], run_id: str, rank_id: int,
           since: int = 0, max_steps: int = DEFAULT_STEPS) -> LayersView:
    """The newest ``max_steps`` layer rows of (run, rank) from step ``since`` on."""
    state = rank_state(store, run_id, rank_id)
    book = state.layers
    marks = marks_of(records_of(source), run_id, rank_id)
    if book is None or not book.names:
        return LayersView(run_id, rank_id, marks=marks)
    rows = book.window(since, max_steps)
    width = len(book.names)
    grids: Dict[str, Grid] = {}
    for name in LAYER_SIGNALS:
        if not any(name in r.values for r in rows):
            continue
        values, known = column(rows, name, width)
        grids[name] = tuple(tuple(float(v) if k else None for v, k in zip(vs, ks))
                            for vs, ks in zip(values.tolist(), known.tolist()))
    return LayersView(run_id, rank_id, book.names, tuple(r.step for r in rows), grids, marks)


__all__: List[str] = ["DEFAULT_STEPS", "LayerMark", "LayersView", "MAX_STEPS", "layers",
                      "marks_of"]
