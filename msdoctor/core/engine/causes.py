"""Root-cause grouping: a rule declares the alerts it is a consequence of (``consequence_of``).

When an alert starts firing on a rank while one of its declared causes is firing on the same
(run, rank), its transitions carry ``caused_by``: the root of the chain (a cause that is
itself a consequence passes on its own cause). Such an alert is kept on record but not
notified on its own. When its cause ends while it still fires, it is marked again (another
firing cause) or becomes an alert of its own, with a new firing transition that is notified.
An alert that fired on its own stays so when a cause starts later: it was notified already.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from msdoctor.core.engine.errors import RuleError
from msdoctor.core.engine.model import Rule

#: (alert name, caused_by) per firing alert of one (run, rank), in the order they fired.
Firing = Dict[str, Optional[str]]


def check_causes(rules: Sequence[Rule], known: Mapping[str, str]) -> List[RuleError]:
    """Errors of the rules' ``consequence_of`` lists: unknown alert names (``known`` holds
    every alert name defined, even by a rule that failed to load), a rule naming itself, and
    cycles (reported once, at the rule of the cycle defined first)."""
    errors: List[RuleError] = []
    graph: Dict[str, Tuple[str, ...]] = {}
    for rule in rules:
        for name, (line, col) in zip(rule.consequence_of, rule.cause_marks):
            if name == rule.alert:
                errors.append(RuleError(rule.path, line, col, f"consequence_of: {name!r} is "
                                        "this rule itself; name the alerts that cause it",
                                        rule.group, rule.alert))
            elif name not in known:
                errors.append(RuleError(rule.path, line, col, f"consequence_of: unknown alert "
                                        f"{name!r}: expected the name of a rule in the rule set "
                                        f"(one of {', '.join(sorted(known))})",
                                        rule.group, rule.alert))
        graph[rule.alert] = tuple(n for n in rule.consequence_of if n != rule.alert)
    by_name = {r.alert: r for r in rules}
    reported: Set[str] = set()
    for rule in rules:
        cycle = _cycle_from(rule.alert, graph)
        if cycle is None or reported & set(cycle):
            continue
        reported.update(cycle)
        line, col = rule.cause_marks[rule.consequence_of.index(cycle[1])]
        errors.append(RuleError(rule.path, line, col, "consequence_of: a cycle "
                                f"{' -> '.join(cycle)}: a cause cannot be a consequence of its "
                                "own consequence", by_name[rule.alert].group, rule.alert))
    return errors


def _cycle_from(start: str, graph: Mapping[str, Tuple[str, ...]]) -> Optional[List[str]]:
    """A path start -> ... -> start through ``graph`` (depth first), None if there is none."""
    stack: List[Tuple[str, List[str]]] = [(start, [start])]
    seen: Set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


@dataclass(frozen=True)
class CauseGraph:
    """Each alert's declared causes and its depth (0: declares none; else 1 + its causes'),
    so transitions of the same step go out causes first."""

    causes: Mapping[str, Tuple[str, ...]]
    depth: Mapping[str, int]

    @classmethod
    def of(cls, rules: Iterable[Rule]) -> "CauseGraph":
        rules = list(rules)
        names = {r.alert for r in rules}
        causes = {r.alert: tuple(c for c in r.consequence_of if c in names and c != r.alert)
                  for r in rules}
        depth: Dict[str, int] = {}

        def depth_of(name: str, trail: Tuple[str, ...] = ()) -> int:
            if name not in depth:
                if name in trail:                  # a cycle (refused at load): stop here
                    return 0
                depth[name] = 1 + max((depth_of(c, trail + (name,)) for c in causes[name]),
                                      default=-1)
            return depth[name]

        for rule in rules:
            depth_of(rule.alert)
        return cls({k: v for k, v in causes.items() if v}, depth)

    def cause_of(self, alert: str, firing: Firing) -> Optional[str]:
        """The root cause of ``alert`` among the ``firing`` alerts, None if none is firing."""
        for cause in self.causes.get(alert, ()):
            if cause in firing:
                return firing[cause] or cause
        return None

    def settle(self, firing: Firing) -> List[Tuple[str, Optional[str]]]:
        """Alerts marked as consequences whose cause changed (it ended): (alert, new
        ``caused_by`` or None), causes first. Updates ``firing``."""
        changes: List[Tuple[str, Optional[str]]] = []
        marked = [a for a, c in firing.items() if c is not None]
        for alert in sorted(marked, key=lambda a: self.depth.get(a, 0)):
            new = self.cause_of(alert, firing)
            if new != firing[alert]:
                firing[alert] = new
                changes.append((alert, new))
        return changes
