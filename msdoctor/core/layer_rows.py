"""A rank's recent per-layer rows (``layers`` events), kept by the store for the views.

:class:`LayerRows` keeps, per step, the layer arrays of one rank's ``layers`` events (gradient
norm, activation max, weight norm, update ratio) as float32, with "not measured" (the wire's
``null``) kept apart from NaN. It is bounded in cells, not rows: at most :data:`CELLS` values
per signal (a model of 100 layers keeps its last 163 steps, one of 4 layers its last
:data:`MAX_ROWS`), so 1024 ranks of a 100-layer model hold ~130 MB at most. A model whose layer
names change starts the rows afresh; a step that does not advance (a resumed run) drops the
rows from that step on, as the store's series do. The rows are not in the sidecar's snapshot:
after a restart they refill from the events read since.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from msdoctor.wire.schema import LAYER_SIGNALS

#: Values kept per signal and rank; rows kept: CELLS // layers, at most MAX_ROWS.
CELLS = 16384
MAX_ROWS = 512


class LayerRow:
    """One step's arrays: ``values[signal]`` float32 (NaN also where not measured) and
    ``measured[signal]`` (None: every entry measured)."""

    __slots__ = ("step", "t", "values", "measured")

    def __init__(self, step: int, t: Optional[float], values: Dict[str, np.ndarray],
                 measured: Dict[str, Optional[np.ndarray]]) -> None:
        self.step, self.t, self.values, self.measured = step, t, values, measured


def row_of(event: Mapping[str, Any]) -> LayerRow:
    """The row of one validated ``layers`` event."""
    values: Dict[str, np.ndarray] = {}
    measured: Dict[str, Optional[np.ndarray]] = {}
    for name in LAYER_SIGNALS:
        entries = event.get(name)
        if entries is None:
            continue
        values[name] = np.array([math.nan if v is None else v for v in entries], dtype=np.float32)
        known = np.array([v is not None for v in entries], dtype=bool)
        measured[name] = None if known.all() else known
    t = event.get("t")
    return LayerRow(int(event["step"]), float(t) if isinstance(t, (int, float)) else None,
                    values, measured)


class LayerRows:
    """The newest rows of one rank, for one list of layer names."""

    def __init__(self) -> None:
        self.names: Tuple[str, ...] = ()
        self.rows: Deque[LayerRow] = deque(maxlen=MAX_ROWS)
        #: rows dropped because a step did not advance (a resumed run)
        self.repeated = 0

    def __len__(self) -> int:
        return len(self.rows)

    def note(self, event: Mapping[str, Any]) -> None:
        """Keep one validated ``layers`` event."""
        names = tuple(event["names"])
        if names != self.names:
            self.reset(names)
        row = row_of(event)
        while self.rows and self.rows[-1].step >= row.step:
            self.rows.pop()
            self.repeated += 1
        self.rows.append(row)

    def reset(self, names: Sequence[str]) -> None:
        """No rows, for the layers ``names`` (the row bound follows their count)."""
        self.names = tuple(names)
        self.rows = deque(maxlen=max(1, min(MAX_ROWS, CELLS // max(1, len(self.names)))))

    def window(self, since: int, last: int) -> List[LayerRow]:
        """The newest ``last`` rows with step >= ``since``, oldest first."""
        rows = [r for r in self.rows if r.step >= since]
        return rows[-last:] if last > 0 else []

    def signals(self) -> List[str]:
        """The signals any kept row holds, in :data:`LAYER_SIGNALS` order."""
        held = {name for r in self.rows for name in r.values}
        return [name for name in LAYER_SIGNALS if name in held]


def column(rows: Sequence[LayerRow], signal: str, width: int
           ) -> Tuple[np.ndarray, np.ndarray]:
    """``(values [rows, width] float64, measured [rows, width] bool)`` of ``signal``."""
    values = np.full((len(rows), width), np.nan)
    known = np.zeros((len(rows), width), dtype=bool)
    for i, r in enumerate(rows):
        v = r.values.get(signal)
        if v is not None and v.shape[0] == width:
            values[i] = v
            m = r.measured[signal]
            known[i] = True if m is None else m
    return values, known
