"""A tick of every rank of a run at once raises what ticking the ranks one by one raises."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from msdoctor.core.alerts.model import Alert
from msdoctor.core.batch import StepBatch
from msdoctor.core.engine import ticks
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import default_rules_dir, load_rules

RANKS = 8


class Clock:
    """The engines' own clock (when each input was heard), moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def feed(engine: Engine, clock: Clock) -> None:
    """Eight ranks of one run: a few steps each, rank 2 beats without stepping, rank 3 stops
    early, rank 5 ends, rank 6 declares a short hang limit, rank 0 declares a vocabulary
    larger than its embedding."""
    rng = np.random.default_rng(7)
    for r in range(RANKS):
        clock.now = 0.0
        expect = {"hang_after_s": 60} if r == 6 else {}
        start = {"type": "run_start", "rank": r, "run": "run", "t": 0.0, "world_size": RANKS,
                 "expect": expect, "config": {"tokenizer_vocab_size": 32000,
                                              "embedding_rows": 32000 if r else 1000}}
        n = 5 if r == 3 else 40
        steps = np.arange(1, n + 1, dtype=np.int64)
        t = steps * (1.0 + 0.1 * r) + rng.random(n)
        cols = {"loss": 3.0 / (1 + 0.01 * steps), "step_time_s": np.full(n, 1.0 + 0.1 * r)}
        clock.now = float(t[-1])
        engine.process("run", r, [start], StepBatch("run", r, steps, t, cols, {}))
        if r == 2:                  # alive, not stepping: heartbeats go on for 20 minutes
            clock.now = 1200.0
            engine.process("run", r, [{"type": "heartbeat", "rank": r, "run": "run", "t": 1200.0}])
        if r == 5:
            engine.process("run", r, [{"type": "run_end", "rank": r, "run": "run",
                                       "t": float(t[-1]), "status": "ok"}])


def two_engines() -> Tuple[Engine, Engine, Tuple[Clock, Clock]]:
    """Two engines with the shipped rules, each fed the eight ranks, each on its own clock."""
    rules = list(load_rules([default_rules_dir()]))
    clocks = Clock(), Clock()
    alone, together = Engine(rules, clock=clocks[0]), Engine(rules, clock=clocks[1])
    feed(alone, clocks[0])
    feed(together, clocks[1])
    return alone, together, clocks


def key(a: Alert) -> tuple:
    """Everything a transition says (NaN values as text, so that equal NaNs compare equal)."""
    return (a.alert, a.rank, a.state, a.step, a.first_step, str(a.value), a.t, a.reason,
            a.caused_by, a.summary, str(sorted(a.values.items())))


def test_a_tick_of_all_ranks_at_once_equals_each_rank_alone_through_hang_gone_and_run_end(
        monkeypatch):
    alone, together, clocks = two_engines()
    got_alone: List[Alert] = []
    got_together: List[Alert] = []
    for now in (50.0, 130.0, 500.0, 1000.0, 1100.0, 5000.0, 50_000.0, 500_000.0):
        for clock in clocks:
            clock.now = now
        for r in range(RANKS):
            got_alone += alone.tick_rank("run", r, now)
        with monkeypatch.context() as m:         # the vector path, not the rank-by-rank one
            m.setattr(ticks, "tick_one", None)
            got_together += together.tick_ranks("run", list(range(RANKS)), now)
    names = {a.alert for a in got_alone}
    assert {"JobHung", "VocabularyMismatch"} <= names            # the case is not empty
    assert any(a.reason for a in got_alone)                       # and the run ended
    assert list(map(key, got_together)) == list(map(key, got_alone))
    for r in range(RANKS):
        a, b = alone.runs["run"].ranks[r], together.runs["run"].ranks[r]
        assert (a.running, a.gone) == (b.running, b.gone)
        assert {k: s.state for k, s in a.alerts.items()} == {k: s.state for k, s in b.alerts.items()}


def test_a_tick_of_all_ranks_each_at_its_own_time_equals_each_rank_alone_at_that_time(
        monkeypatch):
    alone, together, clocks = two_engines()
    got_alone: List[Alert] = []
    got_together: List[Alert] = []
    for now in (50.0, 130.0, 900.0, 1100.0, 5000.0, 500_000.0):
        nows = [now + 97.0 * r for r in range(RANKS)]
        for clock in clocks:
            clock.now = max(nows)
        for r in range(RANKS):
            got_alone += alone.tick_rank("run", r, nows[r])
        with monkeypatch.context() as m:         # the vector path, not the rank-by-rank one
            m.setattr(ticks, "tick_one", None)
            got_together += together.tick_ranks("run", list(range(RANKS)), nows)
    assert {"JobHung"} <= {a.alert for a in got_alone}
    assert len({a.t for a in got_alone if a.alert == "JobHung"}) > 1     # at their own times
    assert list(map(key, got_together)) == list(map(key, got_alone))
