"""Window operators over the same points keep one carry-over, with the results of their own."""
from __future__ import annotations

import copy
import math
from typing import Dict, List

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.nodes import Frame
from msdoctor.core.engine.program import Program
from tests.msdoctor.core.engine.helpers import run_expr
from tests.msdoctor.core.engine.test_windows import make_series

SIZES = [7, 1, 30, 2]


class Feed:
    """A program of several expressions fed one rank's series batch by batch."""

    def __init__(self, texts: List[str]) -> None:
        self.program = Program([])
        self.roots = [self.program.add(parse(t)) for t in texts]
        self.ctx = RankContext(RunContext("r"), 0, self.program.new_states(),
                               [math.nan] * len(self.program.nodes))
        self.ctx.run.ranks[0] = self.ctx
        self.out: List[List[np.ndarray]] = [[] for _ in texts]

    def index(self, text: str) -> int:
        return self.program.add(parse(text))

    def batch(self, steps: np.ndarray, values: list) -> None:
        mask = np.array([v is not None for v in values])
        columns: Dict[str, np.ndarray] = {}
        masks: Dict[str, np.ndarray] = {}
        if mask.any():
            columns["loss"] = np.array([np.nan if v is None else v for v in values])
            if not mask.all():
                masks["loss"] = mask
        b = StepBatch("r", 0, steps, steps.astype(np.float64), columns, masks)
        failed: Dict[int, str] = {}
        outs = self.program.evaluate(Frame(steps, steps.astype(np.float64), b.t, b, self.ctx),
                                     self.ctx.states, failed)
        assert not failed, failed
        for k, root in enumerate(self.roots):
            self.out[k].append(outs[root][0].copy())

    def feed(self, steps: np.ndarray, values: list, start: int = 0, stop: int = -1) -> None:
        stop = len(values) if stop < 0 else stop
        k = 0
        while start < stop:
            end = min(start + SIZES[k % len(SIZES)], stop)
            self.batch(steps[start:end], values[start:end])
            start, k = end, k + 1

    def values(self, k: int) -> np.ndarray:
        return np.concatenate(self.out[k])


def test_windows_over_one_argument_hold_one_carry_and_give_their_own_values():
    steps, values = make_series(seed=3, n=400, sparse=True)
    feed = Feed(["mean(loss, 40)", "count(loss, 40)", "max(loss, 40)", "sum(loss, 40, 6)"])
    feed.feed(steps, values)
    for k, text in enumerate(["mean(loss, 40)", "count(loss, 40)", "max(loss, 40)",
                              "sum(loss, 40, 6)"]):
        alone = run_expr(text, steps, {"loss": values}, SIZES)
        np.testing.assert_allclose(feed.values(k), alone, rtol=1e-12, equal_nan=True,
                                   err_msg=text)
    states = feed.ctx.states
    mean, count, high, total = (feed.index(t) for t in ("mean(loss,40)", "count(loss,40)",
                                                        "max(loss,40)", "sum(loss,40,6)"))
    assert states[count]["s"] is states[mean]["s"] and states[high]["v"] is states[mean]["v"]
    assert states[total]["s"] is states[mean]["s"]      # all keep the 6 extra points sum needs


def test_carries_restored_as_copies_are_shared_again_after_one_batch_with_the_same_values():
    steps, values = make_series(seed=5, n=300)
    feed = Feed(["mean(loss, 50)", "count(loss, 50)"])
    feed.feed(steps, values, 0, 150)
    feed.ctx.states = [copy.deepcopy(s) for s in feed.ctx.states]     # as a snapshot loads
    mean, count = feed.index("mean(loss,50)"), feed.index("count(loss,50)")
    assert feed.ctx.states[count]["s"] is not feed.ctx.states[mean]["s"]
    feed.feed(steps, values, 150)
    for k, text in enumerate(["mean(loss, 50)", "count(loss, 50)"]):
        alone = run_expr(text, steps, {"loss": values}, SIZES)
        np.testing.assert_allclose(feed.values(k), alone, rtol=1e-12, equal_nan=True)
    assert feed.ctx.states[count]["s"] is feed.ctx.states[mean]["s"]


def test_an_operator_reset_alone_joins_the_longer_carry_after_one_batch_of_its_own():
    steps, values = make_series(seed=8, n=300, holes=False)
    feed = Feed(["mean(loss, 30)", "count(loss, 30)"])
    feed.feed(steps, values, 0, 100)
    count = feed.index("count(loss,30)")
    feed.ctx.states[count] = feed.program.nodes[count].new_state()    # as after an error
    feed.out = [[], []]
    feed.batch(steps[100:107], values[100:107])           # its own carry: counts from the reset
    np.testing.assert_array_equal(feed.values(1), np.arange(1, 8))
    mean = feed.index("mean(loss,30)")
    assert feed.ctx.states[count]["s"] is feed.ctx.states[mean]["s"]   # one carry again
    feed.out = [[], []]
    feed.feed(steps, values, 107, 300)
    alone = run_expr("count(loss, 30)", steps, {"loss": values}, SIZES)
    np.testing.assert_array_equal(feed.values(1), alone[107:])          # the whole history
