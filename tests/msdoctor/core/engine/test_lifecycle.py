"""Alert lifecycle: pending/firing/resolved with for and keep_firing_for, in steps and seconds."""
from __future__ import annotations

import numpy as np

from msdoctor.core.engine.lifecycle import FIRING, INACTIVE, PENDING, AlertState, Duration, advance

STEPS0 = Duration(0, "steps")


def run(conds, steps=None, t=None, for_=STEPS0, keep=STEPS0, cuts=(None,)):
    """Transitions as (state, step) over the whole series, fed in pieces cut at ``cuts``."""
    cond = np.asarray(conds, dtype=bool)
    steps = np.arange(1, len(cond) + 1) if steps is None else np.asarray(steps)
    t = steps.astype(float) if t is None else np.asarray(t, dtype=float)
    records = np.arange(len(cond), dtype=float)
    st = AlertState()
    out = []
    bounds = [0] + [c for c in cuts if c] + [len(cond)]
    for a, b in zip(bounds, bounds[1:]):
        for tr in advance(st, cond[a:b], steps[a:b], t[a:b], for_, keep, records[a:b]):
            out.append((tr.state, int(steps[a + tr.row])))
    return out, st


def test_for_zero_fires_at_once_and_resolves_on_the_first_false_step():
    out, st = run([0, 1, 1, 0, 0])
    assert out == [("firing", 2), ("resolved", 4)] and st.state == INACTIVE


def test_for_in_steps_counts_step_numbers_not_events():
    # recorded every 5th step: for 10 steps fires at the third true record
    out, _ = run([1, 1, 1, 1], steps=[5, 10, 15, 20], for_=Duration(10, "steps"))
    assert out == [("pending", 5), ("firing", 15)]


def test_a_pending_alert_that_turns_false_goes_back_to_inactive_with_a_transition():
    out, st = run([1, 1, 0, 1, 1, 1, 1], for_=Duration(3, "steps"))
    assert out == [("pending", 1), ("inactive", 3), ("pending", 4), ("firing", 7)]
    assert st.state == FIRING


def test_keep_firing_for_bridges_short_gaps_and_resolves_after_it():
    out, _ = run([1, 0, 0, 1, 0, 0, 0, 0], keep=Duration(3, "steps"))
    assert out == [("firing", 1), ("resolved", 7)]


def test_keep_firing_for_in_steps_and_records_holds_through_both_in_a_sparse_log():
    # every 500th step: 500 steps alone would resolve at the first false record
    conds, steps = [1, 0, 1, 0, 0, 1, 0, 0, 0, 0], [500 * k for k in range(1, 11)]
    assert run(conds, steps=steps, keep=Duration(500, "steps"))[0] == [
        ("firing", 500), ("resolved", 1000), ("firing", 1500), ("resolved", 2000),
        ("firing", 3000), ("resolved", 3500)]
    out, _ = run(conds, steps=steps, keep=Duration(500, "steps", 3))
    assert out == [("firing", 500), ("resolved", 4500)]
    for cuts in ([1, 2, 3], list(range(1, 10))):
        assert run(conds, steps=steps, keep=Duration(500, "steps", 3), cuts=cuts)[0] == out


def test_keep_firing_for_in_steps_and_records_is_steps_in_a_dense_log():
    conds = [1, 0, 0, 0, 0, 0, 0, 0]
    assert run(conds, keep=Duration(5, "steps", 2))[0] == [("firing", 1), ("resolved", 6)]


def test_for_in_steps_and_records_waits_for_both():
    out, _ = run([1, 1, 1, 1, 1], steps=[100, 200, 300, 400, 500], for_=Duration(100, "steps", 3))
    assert out == [("pending", 100), ("firing", 400)]


def test_for_and_keep_firing_for_in_seconds_use_the_event_times():
    t = [0, 10, 20, 30, 40, 50, 60, 70]
    out, _ = run([1, 1, 1, 1, 0, 0, 0, 0], t=t, for_=Duration(25, "s"), keep=Duration(30, "s"))
    assert out == [("pending", 1), ("firing", 4), ("resolved", 7)]


def test_no_transition_is_emitted_twice_whatever_the_batch_cuts():
    rng = np.random.default_rng(1)
    cond = rng.random(500) < 0.3
    cond[100:200] = True
    whole, _ = run(cond, for_=Duration(4, "steps"), keep=Duration(2, "steps"))
    for cuts in ([1, 2, 3, 150, 151], list(range(1, 500, 7)), list(range(1, 500))):
        pieces, _ = run(cond, for_=Duration(4, "steps"), keep=Duration(2, "steps"), cuts=cuts)
        assert pieces == whole
    states = [s for s, _ in whole]
    assert all(a != b for a, b in zip(states, states[1:]) if a == "firing")


def test_the_state_survives_a_round_trip_through_its_dict():
    _, st = run([1, 1], for_=Duration(5, "steps"))
    assert st.state == PENDING
    again = AlertState.from_dict(st.to_dict())
    assert again == st


def test_duration_texts():
    assert str(Duration(1, "steps")) == "1 step" and str(Duration(30, "s")) == "30s"
    assert str(Duration(500, "steps", 10)) == "500 steps and 10 records"
    assert str(Duration(30, "s", 1)) == "30s and 1 record"
