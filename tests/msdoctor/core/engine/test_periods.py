"""spike_period's onsets: consecutive spiking points are one, on logs of every k-th step too."""
from __future__ import annotations

import numpy as np

from msdoctor.core.engine.periods import chained_period, regular_period
from tests.msdoctor.core.engine.helpers import run_expr

CUTS = ([10_000], [1], [7], [3, 5])


def _sparse_log(every: int, records: int) -> tuple:
    """A flat loss logged every ``every`` steps, its noise a repeating pattern."""
    steps = every * np.arange(1, records + 1)
    loss = 3.0 + 0.01 * np.resize([0.3, -1.0, 0.8, -0.2, 1.0, -0.6, 0.1], records)
    return steps, loss


def test_a_spike_over_two_records_of_a_sparse_log_is_one_onset_wherever_the_stream_is_cut():
    # every 10 steps; each spike lasts two records (a spike and a decay that still stands out)
    steps, loss = _sparse_log(10, 120)
    for r in (40, 52, 64, 76):
        loss[r] += 1.0
        loss[r + 1] += 0.8
    expr = "spike_period(loss - median(loss, 20, 4), 500, 10)"
    for sizes in CUTS:
        got = run_expr(expr, steps, {"loss": list(loss)}, sizes)
        # onsets at steps 410, 530, 650: the period from the third on, at every cut
        assert got[63] == 0.0 and got[64] == 120.0, sizes
        assert (got[64:80] == 120.0).all(), sizes


def test_a_spike_at_the_last_point_of_a_batch_carries_over_to_the_next_batch():
    steps, loss = _sparse_log(10, 120)
    for r in (40, 52, 64):
        loss[r] += 1.0
        loss[r + 1] += 0.8
    expr = "spike_period(loss - median(loss, 20, 4), 500, 10)"
    whole = run_expr(expr, steps, {"loss": list(loss)}, [10_000])
    for cut in (41, 53, 65):                    # each cut between a spike's two records
        got = run_expr(expr, steps, {"loss": list(loss)}, [cut, 10_000])
        assert np.array_equal(got, whole), cut
    assert whole[64] == 120.0


def test_a_chain_among_other_onsets_is_judged_by_the_log_interval():
    # every 100 steps: periodic spikes at 1100 + 400 k and a lone onset 300 steps before them;
    # one record (100 steps) is the slot an onset lands in, not the closest onsets' distance
    events = np.array([800, 1100, 1500, 1900, 2300])
    assert regular_period(events, 100.0) == 400.0
    assert chained_period(events) == 400.0
    # the same onsets in a window busy with others are no period
    busy = np.array([300, 400, 500, 600, 700, 800, 1100, 1500, 1900, 2300])
    assert regular_period(busy, 100.0) == 0.0


def test_a_dense_log_with_lone_onsets_before_the_chain_finds_its_period():
    # lone onsets 1000 and 462 steps before periodic spikes every 148 steps
    events = np.array([3238, 3776, 4238, 4386, 4534, 4682])
    assert regular_period(events) == 148.0
