"""``exp(x)`` and ``round(x)``, row by row, against Python's math; ``round(exp(loss))`` names the
k of a loss at ln(k)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.msdoctor.core.engine.helpers import run_expr

SIZES = ([1000], [1], [3, 50, 1, 100])


@pytest.mark.parametrize("sizes", SIZES)
def test_exp_is_e_to_the_value_and_inf_where_it_overflows(sizes):
    loss = [0.0, 1.0, -2.5, 700.0, 710.0, math.nan, math.inf, -math.inf]
    got = run_expr("exp(loss)", list(range(1, len(loss) + 1)), {"loss": loss}, sizes)
    want = [math.exp(v) if v < 710 else math.inf for v in loss[:5]] + [math.nan, math.inf, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("sizes", SIZES)
def test_round_is_the_nearest_integer_with_halves_to_even(sizes):
    x = [0.4, 0.5, 1.5, 2.5, -0.6, 3.9999, math.nan]
    got = run_expr("round(loss)", list(range(1, len(x) + 1)), {"loss": x}, sizes)
    np.testing.assert_array_equal(got, [0.0, 0.0, 2.0, 2.0, -1.0, 4.0, math.nan])


def test_a_loss_at_ln_4_reads_as_four_classes():
    loss = [1.386393, 1.356284, 0.6931, 2.3026]
    got = run_expr("round(exp(loss)) * (abs(loss - ln(round(exp(loss)))) < 0.002)",
                   [1, 2, 3, 4], {"loss": loss}, [4])
    np.testing.assert_array_equal(got, [4.0, 0.0, 2.0, 10.0])
