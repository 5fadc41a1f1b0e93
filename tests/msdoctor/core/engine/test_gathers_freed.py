"""An evaluation frees each carry group's gather once the group's last operator has run: the
alerts, values and states are exactly those of keeping every gather to the end, and no gather
is left in the frame."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest

import msdoctor.core.engine.program as program_module
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.engine.nodes import Frame
from tests.msdoctor.core.engine.helpers import rank_polls
from tests.msdoctor.core.engine.test_ranks_held import same


def polls(seed: int) -> List[Any]:
    return rank_polls(np.random.default_rng(seed), 6, 40, lambda r: 50 + 20 * r,
                      lambda p: [1, 1, 2] if p % 7 else [0, 1], 0.05)


@pytest.mark.parametrize("seed", [5, 11])
def test_gathers_freed_after_their_last_operator_give_what_keeping_them_gives(seed, monkeypatch):
    rules = list(load_rules([default_rules_dir()]))
    freed, kept = Engine(rules), Engine(rules)
    left: List[Dict[Any, Any]] = []
    original = program_module.forget

    def forget(memo: Dict[Any, Any], child: str, group: Any) -> None:
        original(memo, child, group)
        left.append(memo)

    got_freed, got_kept = [], []
    for items in polls(seed):
        monkeypatch.setattr(program_module, "forget", forget)
        got_freed += [a.to_dict() for a in freed.process_many(items)]
        monkeypatch.setattr(program_module, "forget", lambda memo, child, group: None)
        got_kept += [a.to_dict() for a in kept.process_many(items)]
        for r in range(6):
            a, b = freed.runs["run"].ranks[r], kept.runs["run"].ranks[r]
            assert same(a.last, b.last) and same(a.states, b.states), r
    assert got_kept and same(got_freed, got_kept)
    assert left and not any(isinstance(k, tuple) and k[0] in ("carry", "sums")
                            for memo in left for k in memo)


def test_one_rank_batches_free_their_gathers_too():
    rules = list(load_rules([default_rules_dir()]))
    engine = Engine(rules)
    frames: List[Frame] = []
    original = engine.program.evaluate

    def evaluate(frame: Frame, *args: Any, **kw: Any) -> Any:
        frames.append(frame)
        return original(frame, *args, **kw)

    engine.program.evaluate = evaluate          # type: ignore[method-assign]
    for items in polls(3)[:3]:
        for run, rank, events, steps in items:
            engine.process(run, rank, events, steps)
    assert frames and not any(isinstance(k, tuple) and k[0] in ("carry", "sums")
                              for f in frames for k in f.memo)
