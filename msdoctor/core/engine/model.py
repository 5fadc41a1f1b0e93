"""The loaded form of a rule set: groups of alerting rules with compiled expressions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

from msdoctor.core.engine.lifecycle import Duration
from msdoctor.core.engine.nodes import Node
from msdoctor.core.engine.templates import Template

SEVERITIES = ("info", "warning", "critical")
ACTIONS = ("stop_training",)
#: Labels every alert gets from the engine; a rule may not set them.
ENGINE_LABELS = ("alertname", "rank", "run")
#: Labels the engine adds where per-layer signals localise an alert (``msdoctor.core.layers``).
LOCATION_LABELS = ("layer", "first_rank")


@dataclass
class Rule:
    """One alerting rule, its expressions parsed and templates compiled."""

    alert: str
    expr: str
    condition: Node
    value: Node
    for_: Duration = field(default_factory=Duration)
    keep_firing_for: Duration = field(default_factory=Duration)
    labels: Dict[str, str] = field(default_factory=dict)
    annotations: Dict[str, str] = field(default_factory=dict)
    templates: Dict[str, Template] = field(default_factory=dict)
    values: Dict[str, Tuple[str, Node]] = field(default_factory=dict)
    action: Optional[str] = None
    #: Alerts this one is a consequence of on the same rank (root-cause grouping).
    consequence_of: Tuple[str, ...] = ()
    #: (line, col) of each name of ``consequence_of`` in its file.
    cause_marks: Tuple[Tuple[int, int], ...] = ()
    group: str = ""
    path: str = ""
    line: int = 0

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")

    @property
    def uses_clock(self) -> bool:
        return self.condition.clock or self.value.clock

    @property
    def time_based(self) -> bool:
        """Needs evaluating on clock ticks (a clock function or a duration in seconds)."""
        return self.uses_clock or self.for_.in_seconds or self.keep_firing_for.in_seconds


@dataclass
class RuleSet:
    """Rules from one or more files, in file and group order."""

    rules: List[Rule] = field(default_factory=list)
    files: List[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def get(self, alert: str) -> Optional[Rule]:
        for rule in self.rules:
            if rule.alert == alert:
                return rule
        return None
