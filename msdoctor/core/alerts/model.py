"""One alert transition, as written to ``alerts.jsonl`` and shown to people."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from msdoctor.wire.numbers import to_wire


@dataclass
class Alert:
    """A transition of one rule for one (run, rank): pending, firing or resolved."""

    alert: str
    state: str
    severity: str
    run: str
    rank: int
    step: Optional[int]
    first_step: Optional[int]
    value: float
    t: Optional[float]
    summary: str = ""
    cause: str = ""
    fix: str = ""
    runbook_url: str = ""
    labels: Dict[str, str] = field(default_factory=dict)
    annotations: Dict[str, str] = field(default_factory=dict)
    values: Dict[str, float] = field(default_factory=dict)
    action: Optional[str] = None
    #: The alert firing on the same rank that this one is a consequence of (root-cause
    #: grouping); such a transition is kept on record but not notified on its own.
    caused_by: Optional[str] = None
    #: For a rule whose text names it: the last checkpoint saved before the anomaly began
    #: (``step``, ``path``...), or None when none is known.
    checkpoint: Optional[Dict[str, Any]] = None
    #: What a control action did (``msdoctor.core.alerts.actions``), recorded in the journal.
    action_taken: Optional[Dict[str, Any]] = None
    #: The rule names a checkpoint (``{{ $checkpoint }}``): the record says which, or null.
    names_checkpoint: bool = False
    #: Why a transition happened other than by the condition: ``run ended``, or a label
    #: corrected while firing (``first_rank 0 -> 1: ...``, core/engine/relabel.py); else None.
    reason: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of this transition (one line of ``alerts.jsonl``)."""
        d: Dict[str, Any] = {
            "alert": self.alert, "state": self.state, "severity": self.severity,
            "run": self.run, "rank": self.rank, "step": self.step, "first_step": self.first_step,
            "value": to_wire(self.value), "summary": self.summary, "cause": self.cause,
            "fix": self.fix, "runbook_url": self.runbook_url, "t": to_wire(self.t),
            "labels": dict(self.labels), "annotations": dict(self.annotations),
            "values": {k: to_wire(v) for k, v in self.values.items()},
        }
        if self.action:
            d["action"] = self.action
        if self.caused_by:
            d["caused_by"] = self.caused_by
        if self.action_taken is not None:
            d["action_taken"] = dict(self.action_taken)
        if self.checkpoint is not None or self.names_checkpoint:
            d["checkpoint"] = None if self.checkpoint is None else dict(self.checkpoint)
        if self.reason:
            d["reason"] = self.reason
        return d

    def describe(self) -> str:
        """One line for a log: what, where, and the fix."""
        where = f"run {self.run} rank {self.rank} step {self.step}"
        text = f"[{self.severity}] {self.alert} {self.state} ({where}): {self.summary}"
        if self.reason:
            return text + f" ({self.reason})"
        if self.caused_by:
            return text + f" (a consequence of {self.caused_by})"
        if self.state == "firing" and self.fix:
            text += f" Fix: {self.fix}"
        return text
