"""What a replay adds up besides alerts: each run's goodput and its checkpoints, marked.

The live sidecar keeps both in its store (``RunState.goodput``, ``RankState.checkpoints``); a
replay runs without a store, so it folds them here, from the same events.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from msdoctor.core import checkpoints as ckpt
from msdoctor.core.batch import StepBatch
from msdoctor.core.goodput import Goodput


class Ledger:
    """Goodput per run and checkpoints per (run, rank), fed chunk by chunk."""

    def __init__(self) -> None:
        self.goodput: Dict[str, Goodput] = {}
        self.saved: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}

    def add(self, run: str, rank: int, others: Iterable[Mapping[str, Any]],
            steps: Optional[StepBatch], events: Optional[list] = None) -> None:
        """One chunk (``events``: all its events in order, when known)."""
        others = list(others)
        for event in others:
            if event.get("type") == "checkpoint":
                ckpt.note(self.saved.setdefault((run, rank), []), event)
        goodput = self.goodput.setdefault(run, Goodput())
        if events is not None:
            goodput.apply_chunk(rank, events, others, steps)
        else:
            goodput.apply(rank, others, steps)

    def summary(self, transitions: Iterable[Any]) -> Dict[str, Any]:
        """``{"goodput": {run: summary}, "checkpoints": [marked checkpoint]}``."""
        records = [t.to_dict() if hasattr(t, "to_dict") else dict(t) for t in transitions]
        marked: List[Dict[str, Any]] = []
        for (run, rank), saved in sorted(self.saved.items()):
            for item in ckpt.mark(saved, ckpt.poisoning(records, run, rank)):
                marked.append({"run": run, "rank": rank, **item})
        return {"goodput": {run: g.summary() for run, g in self.goodput.items()
                            if g.rank is not None},
                "checkpoints": marked}
