"""``delta(mean(x, n, m), k)`` computed from the points of x equals ``delta`` over the mean's
series, and keeps no series of means."""
from __future__ import annotations

import math

import numpy as np
import pytest

from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.program import Program
from tests.msdoctor.core.engine.helpers import run_expr
from tests.msdoctor.core.engine.test_carries import Feed
from tests.msdoctor.core.engine.test_windows import make_series

FUSED = ["delta(mean(loss, 20), 40)", "delta(mean(loss, 20, 8), 30)", "delta(mean(loss, 5), 100)",
         "delta(mean(loss, 60), 7)", "delta(mean(loss, 1, 3), 1)"]
SIZES = [[1], [7], [64], [3, 1, 30, 2, 11], [10_000]]


def unfused(text: str) -> str:
    """The same value through ``delta`` over the mean's series (``+ 0`` is not a mean)."""
    inner = text[len("delta("):text.rindex(",")]
    return f"delta({inner} + 0{text[text.rindex(','):]}"


def test_the_program_compiles_delta_of_a_window_mean_from_the_points_of_its_argument():
    program = Program([])
    fused = program.nodes[program.add(parse("delta(mean(loss, 20, 8), 30)"))]
    plain = program.nodes[program.add(parse(unfused("delta(mean(loss, 20, 8), 30)")))]
    assert fused.key == "meandelta(loss,20,8,30)"
    assert [c.key for c in fused.children] == ["loss", "mean(loss,20,8)"]
    assert plain.name == "delta"


@pytest.mark.parametrize("text", FUSED)
@pytest.mark.parametrize("sparse", [False, True])
def test_delta_of_a_mean_equals_delta_over_the_series_of_means_in_any_batches(text, sparse):
    steps, values = make_series(seed=len(text) + 7 * sparse, n=400, sparse=sparse)
    want = run_expr(unfused(text), steps, {"loss": values}, [10_000])
    for sizes in SIZES:
        got = run_expr(text, steps, {"loss": values}, sizes)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=f"{text}, sparse={sparse}, batches {sizes}")


def test_a_past_window_behind_a_long_gap_in_the_log_is_still_held():
    # steps 1..50, nothing until 1000: at 1000 the mean 100 steps back is that of (30, 50]
    steps = np.concatenate((np.arange(1, 51), np.arange(1000, 1051)))
    values = [float(s % 7) + 0.1 * s for s in steps]
    want = run_expr("delta(mean(loss, 20) + 0, 100)", steps, {"loss": values}, [1000])
    got = run_expr("delta(mean(loss, 20), 100)", steps, {"loss": values}, [1])
    assert not math.isnan(got[50])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_a_non_finite_record_is_a_point_of_the_mean_and_so_a_past_point_of_delta():
    # the loss is NaN at step 10 (recorded): the mean there is that of (5, 10] without it,
    # and at step 15 delta(., 5) looks back to step 10, not to step 9
    steps = np.arange(1, 31)
    values = [float(s) for s in steps]
    values[9] = math.nan
    for sizes in ([1], [4, 9], [100]):
        got = run_expr("delta(mean(loss, 5), 5)", steps, {"loss": values}, sizes)
        want = run_expr("delta(mean(loss, 5) + 0, 5)", steps, {"loss": values}, [100])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    assert got[14] == pytest.approx(13.0 - 7.5)       # not 13 - 7 (the mean at step 9)


def test_windows_deltas_and_prev_over_one_argument_hold_one_carry_and_give_their_own_values():
    texts = ["mean(loss, 20)", "std(loss, 5)", "max(loss, 40)", "delta(mean(loss, 20), 100)",
             "delta(mean(loss, 5, 3), 60)", "delta(loss, 30)", "prev(loss, 3)"]
    feed = Feed(texts)
    steps, values = make_series(seed=3, n=300)
    feed.feed(steps, values)
    for k, text in enumerate(texts):
        alone = run_expr(text, steps, {"loss": values}, [5, 1, 17])
        np.testing.assert_allclose(feed.values(k), alone, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=text)
    states = [feed.ctx.states[feed.index(t)] for t in texts]
    assert all(st["s"] is states[0]["s"] and st["v"] is states[0]["v"] for st in states)
    # the longest need: the mean of 20 steps that ended 100 steps or more before the last one
    assert int(states[0]["s"][0]) <= int(steps[-1]) - 100 - 20 + 1
    assert int(states[0]["s"][0]) > int(steps[-1]) - 100 - 20 - 20
