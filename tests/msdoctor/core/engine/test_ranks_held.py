"""Polls of the same ranks reuse what the last poll left (each operator's states of those
ranks, the carries held in one array): the alerts, values and states are exactly those of
building them afresh."""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from tests.msdoctor.core.engine.helpers import rank_polls


def polls(seed: int) -> List[List[Tuple[str, int, list, StepBatch]]]:
    """A backlog, then live polls of one or two rows per rank, with NaN and spikes; a poll
    now and then leaves a rank out (it rejoins with carries of its own)."""
    return rank_polls(np.random.default_rng(seed), 6, 40, lambda r: 50 + 20 * r,
                      lambda p: [1, 1, 2] if p % 7 else [0, 1], 0.05)


def fail_next(engines: List[Engine]) -> List[Any]:
    """The next many-rank evaluation of each engine's first ``prev`` operator raises (the
    engines may hold the same node: the rules' own)."""
    nodes = [next(n for n in e.program.nodes if type(n).__name__ == "Prev") for e in engines]
    for node in {id(n): n for n in nodes}.values():
        left = [sum(n is node for n in nodes)]

        def fail(*args: Any, node: Any = node, left: List[int] = left) -> Any:
            left[0] -= 1
            if not left[0]:
                del node.evaluate_segments
            raise RuntimeError("fails")
        node.evaluate_segments = fail
    return nodes


def same(a: Any, b: Any) -> bool:
    """Equal bit for bit (NaN equal to NaN, arrays by dtype and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
            and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def test_polls_reusing_the_last_polls_states_and_carries_equal_building_them_afresh():
    rules = list(load_rules([default_rules_dir()]))
    reused, afresh = Engine(rules), Engine(rules)
    got_reused, got_afresh = [], []
    for p, items in enumerate(polls(5)):
        if p == 12:
            failing = fail_next([reused, afresh])   # its states start afresh on every rank
        got_reused += [a.to_dict() for a in reused.process_many(items)]
        afresh.program.held.clear()             # carries joined from the ranks' own
        afresh.program._columns = ([], {})      # states gathered operator by operator
        got_afresh += [a.to_dict() for a in afresh.process_many(items)]
        for r in range(6):                      # after every poll
            a, b = reused.runs["run"].ranks[r], afresh.runs["run"].ranks[r]
            assert same(a.last, b.last), (p, r)
            assert same(a.states, b.states), (p, r)
            assert {k: s.to_dict() for k, s in a.alerts.items()} == \
                {k: s.to_dict() for k, s in b.alerts.items()}
    assert not any("evaluate_segments" in vars(node) for node in failing)    # both raised
    assert any(a["alert"] == "LossNonFinite" for a in got_afresh)
    assert same(got_reused, got_afresh)
