"""All rules' expressions compiled into one deduplicated operator list (a DAG).

Identical subexpressions (same canonical key, e.g. ``mean(loss,100)`` used by
two rules) become one operator, evaluated once per batch. Operators are kept
in topological order, so a batch is evaluated by one pass over the list.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import is_
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from msdoctor.core.engine import nodes
from msdoctor.core.engine.carries import KEEPS, Group, forget, join_group, last_gathers
from msdoctor.core.engine.meandelta import fused
from msdoctor.core.engine.model import Rule
from msdoctor.core.engine.nodes import Const, Frame, Node, Out

#: Stateless operators: over per-run facts only, a tick can evaluate them afresh.
_ELEMENTWISE = (nodes.BinOp, nodes.Pow, nodes.Neg, nodes.Compare, nodes.And, nodes.Or, nodes.Not,
                nodes.Elementwise, nodes.Coalesce)


@dataclass
class CompiledRule:
    rule: Rule
    condition: int
    value: int
    values: Dict[str, int] = field(default_factory=dict)
    uses: Tuple[int, ...] = ()              # every operator it depends on
    #: its annotations name the last good checkpoint (``{{ $checkpoint }}``)
    names_checkpoint: bool = field(init=False)

    def __post_init__(self) -> None:
        self.names_checkpoint = any(ref.ref == "checkpoint" for t in self.rule.templates.values()
                                    for ref in t.refs())


class Program:
    """The operator list of a rule set plus, per rule, the indices of its roots."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.nodes: List[Node] = []
        self.args: List[Tuple[int, ...]] = []
        self._index: Dict[str, int] = {}
        self.rules: List[CompiledRule] = []
        #: per argument, what the window operators over it keep (one carry for all of them)
        self.keeps: Dict[str, Group] = {}
        #: per carry group, the last many-rank poll's kept points (:data:`.segments.HELD`)
        self.held: Dict[Any, Any] = {}
        self.roots: Set[int] = set()         # outputs read after an evaluation
        self._release: Optional[List[List[int]]] = None
        self._forget: List[List[str]] = []
        #: the ranks' state lists of the last many-rank evaluation, and per operator its
        #: states of those ranks (:meth:`_states_of`)
        self._columns: Tuple[List[List[Dict[str, Any]]], Dict[int, List[Dict[str, Any]]]] = \
            ([], {})
        for rule in rules:
            cond = self.add(rule.condition)
            value = self.add(rule.value)
            values = {name: self.add(node) for name, (_, node) in rule.values.items()}
            uses = self._closure([cond, value, *values.values()])
            self.rules.append(CompiledRule(rule, cond, value, values, uses))
        # a tick re-evaluates the clock's operators and the per-run facts (config(), expected()
        # and elementwise operators over them only): a rank with no step yet has no last values
        static: set = set()
        for i, n in enumerate(self.nodes):
            if isinstance(n, (nodes.RunFact, nodes.Const)) or (
                    isinstance(n, _ELEMENTWISE) and self.args[i]
                    and all(a in static for a in self.args[i])):
                static.add(i)
        self.clock_nodes = [i for i, n in enumerate(self.nodes)
                            if n.clock or (i in static and not isinstance(n, nodes.Const))]
        self.keys = [n.key for n in self.nodes]

    def add(self, node: Node) -> int:
        """Index of ``node`` (added with its children unless an equal one exists); its output
        is kept to the end of an evaluation (a root)."""
        index = self._add(node)
        self.roots.add(index)
        return index

    def _add(self, node: Node) -> int:
        node = fused(node)
        found = self._index.get(node.key)
        if found is not None:
            return found
        self._release = None
        args = tuple(self._add(child) for child in node.children)
        self.nodes.append(node)
        self.args.append(args)
        join_group(self.keeps, node)
        index = self._index[node.key] = len(self.nodes) - 1
        return index

    def _closure(self, roots: Sequence[int]) -> Tuple[int, ...]:
        seen: Set[int] = set()
        stack = list(roots)
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(self.args[i])
        return tuple(sorted(seen))

    def release_after(self) -> List[List[int]]:
        """Per operator, the outputs that no later operator reads once it has run (the roots'
        are kept): an evaluation holds a frontier of outputs, not all ~700 of them."""
        if self._release is None:
            last: Dict[int, int] = {}
            for i, args in enumerate(self.args):
                for a in args:
                    last[a] = i
            release: List[List[int]] = [[] for _ in self.nodes]
            for a, i in last.items():
                if a not in self.roots:
                    release[i].append(a)
            self._release = release
            self._forget = last_gathers(self.nodes)
        return self._release

    def _done(self, i: int, outs: List[Optional[Out]], lasts: Optional[Dict[int, np.ndarray]],
              rows: Optional[np.ndarray], frame: Frame) -> None:
        """After operator i: its values at ``rows`` into ``lasts``, and the outputs and
        carry gathers read for the last time freed (only when the caller takes ``lasts``)."""
        if lasts is None:
            return
        out = outs[i]
        if out is not None and rows is not None:
            lasts[i] = out[0][rows]
        for a in self.release_after()[i]:
            outs[a] = None
        for child in self._forget[i]:
            forget(frame.memo, child, self.keeps[child])

    def initial_values(self) -> List[float]:
        """Per operator value before any batch: constants known, everything else NaN."""
        return [float(n.params[0]) if isinstance(n, Const) else math.nan for n in self.nodes]

    def new_states(self) -> List[Dict[str, Any]]:
        return [node.new_state() for node in self.nodes]

    def evaluate(self, frame: Frame, states: List[Dict[str, Any]], failed: Dict[int, str],
                 lasts: Optional[Dict[int, np.ndarray]] = None) -> List[Optional[Out]]:
        """Every operator over the batch; an operator that raises is recorded in ``failed``.
        With ``lasts``: each operator's value at the last row goes there, and only the
        roots' outputs are returned (the others are freed as soon as no operator needs them)."""
        outs: List[Optional[Out]] = [None] * len(self.nodes)
        frame.memo[KEEPS] = self.keeps
        rows = np.array([frame.n - 1]) if frame.n else None
        with np.errstate(all="ignore"):
            for i, node in enumerate(self.nodes):
                args = [outs[a] for a in self.args[i]]
                if any(a is None for a in args):
                    self._done(i, outs, lasts, rows, frame)
                    continue
                try:
                    outs[i] = node.evaluate(frame, args, states[i])  # type: ignore[arg-type]
                except Exception as exc:  # noqa: BLE001 - one operator must not stop the others
                    failed[i] = f"{type(exc).__name__}: {exc}"
                    states[i] = node.new_state()
                    self._columns = ([], {})           # a rank's state replaced
                self._done(i, outs, lasts, rows, frame)
        return outs

    def evaluate_ranks(self, frame: Frame, states: List[List[Dict[str, Any]]],
                       failed: Dict[int, str], lasts: Optional[Dict[int, np.ndarray]] = None
                       ) -> List[Optional[Out]]:
        """:meth:`evaluate` over a many-rank frame (``frame.segments``); ``states[r]`` are
        rank r's operator states. Each operator runs once for all ranks (rank by rank when
        it has no segment-aware version). ``lasts``: as :meth:`evaluate`, each operator's
        values at the ranks' last rows."""
        from msdoctor.core.engine.segments import HELD, per_rank
        outs: List[Optional[Out]] = [None] * len(self.nodes)
        frame.memo[KEEPS] = self.keeps
        frame.memo[HELD] = self.held
        rows = frame.segments.last_rows()
        columns = self._states_of(states)
        with np.errstate(all="ignore"):
            for i, node in enumerate(self.nodes):
                args = [outs[a] for a in self.args[i]]
                if any(a is None for a in args):
                    self._done(i, outs, lasts, rows, frame)
                    continue
                try:
                    outs[i] = self._evaluate_one(node, frame, args, states, i, per_rank, columns)
                except Exception as exc:  # noqa: BLE001 - one operator must not stop the others
                    failed[i] = f"{type(exc).__name__}: {exc}"
                    for s in states:
                        s[i] = node.new_state()
                    columns.pop(i, None)
                self._done(i, outs, lasts, rows, frame)
        return outs

    def _states_of(self, states: List[List[Dict[str, Any]]]) -> Dict[int, List[Dict[str, Any]]]:
        """Per operator, its states of the ranks ``states`` (filled as operators run): those of
        the last many-rank evaluation when it was of the same state lists. A rank's state is
        replaced only here, after an operator fails (its entry goes), or with a new list."""
        ranks, columns = self._columns
        if len(ranks) != len(states) or not all(map(is_, ranks, states)):
            columns = {}
            self._columns = (list(states), columns)
        return columns

    @staticmethod
    def _evaluate_one(node: Node, frame: Frame, args: List[Any], states: List[List[Dict[str, Any]]],
                      i: int, per_rank: Any, columns: Dict[int, List[Dict[str, Any]]]) -> Out:
        if node.rowwise:
            return node.evaluate(frame, args, {})
        many = getattr(node, "evaluate_segments", None)
        if many is not None and not node.stateful:
            return many(frame, args, states)          # per-rank states unused
        mine = columns.get(i)
        if mine is None:
            mine = columns[i] = [s[i] for s in states]
        if many is not None:
            return many(frame, args, mine)
        return per_rank(node, frame, args, mine)

    def tick(self, frame: Frame, states: List[Dict[str, Any]], last: List[float],
             failed: Dict[int, str], only: Optional[Sequence[int]] = None) -> Dict[int, float]:
        """Re-evaluate the clock-dependent operators (``only`` those, a subset of
        ``clock_nodes`` in their order) for one instant; others from ``last``."""
        fresh: Dict[int, float] = {}
        with np.errstate(all="ignore"):
            for i in self.clock_nodes if only is None else only:
                args: List[Out] = []
                for a in self.args[i]:
                    value = fresh.get(a, last[a])
                    args.append((np.array([value], dtype=np.float64), None))
                try:
                    values, _ = self.nodes[i].evaluate(frame, args, states[i])
                    fresh[i] = float(values[-1])
                except Exception as exc:  # noqa: BLE001
                    failed[i] = f"{type(exc).__name__}: {exc}"
                    fresh[i] = math.nan
        return fresh
