"""``coalesce(a, b, ...)``: the first argument that is not NaN, row by row, against a naive reference."""
from __future__ import annotations

import math
from typing import List, Optional

import numpy as np
import pytest

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.errors import ExprError
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.nodes import Frame
from msdoctor.core.engine.program import Program
from tests.msdoctor.core.engine.helpers import run_expr

SIZES = ([10_000], [1], [7], [3, 50, 1, 100])


def holey(seed: int, n: int) -> List[Optional[float]]:
    """Values with unrecorded rows (None) and recorded NaNs."""
    rng = np.random.default_rng(seed)
    out: List[Optional[float]] = []
    for _ in range(n):
        r = rng.random()
        out.append(None if r < 0.3 else math.nan if r < 0.5 else float(rng.normal(3, 1)))
    return out


def carried(values: List[Optional[float]]) -> List[float]:
    """A signal as the engine reads it: last record carried forward, NaN before the first."""
    last, out = math.nan, []
    for v in values:
        if v is not None:
            last = v
        out.append(last)
    return out


def naive_coalesce(*columns: List[float]) -> np.ndarray:
    return np.array([next((v for v in row if not math.isnan(v)), math.nan) for row in zip(*columns)])


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coalesce_picks_the_first_argument_that_is_not_nan_at_every_row(seed, sizes):
    n = 300
    steps = np.arange(1, n + 1)
    loss, grad = holey(seed, n), holey(seed + 100, n)
    got = run_expr("coalesce(loss, grad_norm, 7)", steps, {"loss": loss, "grad_norm": grad}, sizes)
    want = naive_coalesce(carried(loss), carried(grad), [7.0] * n)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sizes", SIZES)
def test_coalesce_of_nothing_but_nan_is_nan(sizes):
    steps = np.arange(1, 51)
    got = run_expr("coalesce(loss, nan)", steps, {"loss": [math.nan] * 50}, sizes)
    assert np.isnan(got).all()


def test_coalesce_of_two_signals_prefers_the_first_even_where_the_second_is_recorded():
    steps = np.arange(1, 6)
    got = run_expr("coalesce(loss, grad_norm)", steps,
                   {"loss": [None, 2.0, None, math.nan, 5.0], "grad_norm": [1.0] * 5}, [2])
    np.testing.assert_array_equal(got, [1.0, 2.0, 2.0, 1.0, 5.0])


def value_with_run_facts(text: str, config: dict, expect: dict) -> float:
    """``text`` at one step of a rank whose run_start gave ``config`` and ``expect``."""
    program = Program([])
    root = program.add(parse(text))
    run = RunContext("r")
    run.config, run.expect = config, expect
    ctx = RankContext(run, 0, program.new_states(), [math.nan] * len(program.nodes))
    run.ranks[0] = ctx
    batch = StepBatch("r", 0, np.array([1]), np.array([1.0]), {"loss": np.array([3.0])}, {})
    frame = Frame(batch.steps, batch.steps.astype(np.float64), batch.t, batch, ctx)
    failed: dict = {}
    outs = program.evaluate(frame, ctx.states, failed)
    assert not failed, failed
    return float(outs[root][0][0])


def test_coalesce_gives_a_declared_run_fact_and_the_default_when_it_is_absent():
    text = "coalesce(expected(hang_after_s), config(hang_after_s), 900)"
    assert value_with_run_facts(text, {}, {"hang_after_s": 20}) == 20
    assert value_with_run_facts(text, {"hang_after_s": 45}, {}) == 45
    assert value_with_run_facts(text, {"hang_after_s": "soon"}, {}) == 900   # not a number
    assert value_with_run_facts(text, {}, {}) == 900


@pytest.mark.parametrize("text, message", [
    ("coalesce(loss)", "coalesce() takes at least 2 arguments"),
    ("coalesce()", "coalesce() takes at least 2 arguments"),
    ("coalesce(loss, *x)", "starred arguments are not allowed"),
])
def test_coalesce_with_too_few_arguments_is_refused_naming_its_usage(text, message):
    with pytest.raises(ExprError) as info:
        parse(text)
    assert message in str(info.value) and "coalesce(a, b, ...)" in str(info.value)
