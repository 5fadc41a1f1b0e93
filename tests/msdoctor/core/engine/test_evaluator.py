"""The engine over step batches and clock ticks: transitions once, isolation, resume."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from msdoctor.core.alerts.active import ActiveAlerts, as_record
from msdoctor.core.batch import columnize
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import load_rules
from msdoctor.core.snapshot import join_arrays, split_arrays
from msdoctor.wire import make

RULES = """
version: 1
groups:
  - name: g
    rules:
      - alert: LossNonFinite
        expr: nonfinite(loss)
        labels: {severity: critical}
        annotations:
          summary: "Loss is {{ $value }} at step {{ $step }} on rank {{ $labels.rank }}."
          fix: Use bf16.
        action: stop_training
      - alert: LossHigh
        expr: mean(loss, 10) > 5
        for: 5 steps
        labels: {severity: warning}
        annotations: {summary: "mean loss {{ $value | printf \\"%.3g\\" }} since {{ $first_step }}"}
      - alert: JobHung
        expr: seconds_since_step() > 600 and running()
        labels: {severity: critical}
        annotations: {summary: "no step for {{ $value | humanizeDuration }}"}
      - alert: Straggler
        expr: step_time_s > 1.5 * rank_median(step_time_s) and rank_count() >= 2
        labels: {severity: warning}
        annotations: {summary: "{{ $value }}s"}
"""


@pytest.fixture()
def rules(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RULES)
    return load_rules([path])


def steps(rank, first, losses, t0=0.0, **extra):
    return columnize("r", rank, [make("step", rank, run="r", step=first + i, t=t0 + first + i,
                                      loss=v, **extra) for i, v in enumerate(losses)])


def test_transitions_are_emitted_once_in_order_with_rendered_annotations(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], steps(0, 1, [1.0] * 5 + [math.nan] + [9.0] * 10 + [1.0] * 20))
    seen = [(a.alert, a.state, a.step) for a in got]
    assert seen == [("LossNonFinite", "firing", 6), ("LossNonFinite", "resolved", 7),
                    ("LossHigh", "pending", 11), ("LossHigh", "firing", 16),
                    ("LossHigh", "resolved", 21)]
    assert got[0].summary == "Loss is nan at step 6 on rank 0." and got[0].fix == "Use bf16."
    assert got[0].action == "stop_training" and got[0].labels["severity"] == "critical"
    assert got[3].summary.startswith("mean loss ") and got[3].summary.endswith("since 11")
    alerts = ActiveAlerts()
    alerts.add([as_record(a) for a in got])
    assert alerts.active() == []          # every alert that fired also resolved


def test_a_pending_alert_whose_condition_clears_leaves_the_active_set(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    # mean(loss, 10) is above 5 on steps 11-15, less than LossHigh's ``for: 5 steps``
    engine.process("r", 0, [], steps(0, 1, [5.0] * 10 + [8.0] * 3 + [2.0] * 20))
    seen = [(a.alert, a.state, a.step) for a in got]
    assert seen == [("LossHigh", "pending", 11), ("LossHigh", "inactive", 16)]
    alerts = ActiveAlerts()
    alerts.add([as_record(a) for a in got])
    assert alerts.active() == []          # no longer pending: nothing is shown as current


def test_results_do_not_depend_on_how_the_stream_is_cut(rules):
    rng = np.random.default_rng(2)
    losses = list(np.where(rng.random(3000) < 0.01, 50.0, 1.0))
    losses[1234] = math.inf
    whole, pieces = [], []
    Engine(rules, sinks=[whole.append]).process("r", 0, [], steps(0, 1, losses))
    engine = Engine(rules, sinks=[pieces.append])
    batch = steps(0, 1, losses)
    for a in range(0, 3000, 37):
        engine.process("r", 0, [], batch.slice(a, min(a + 37, 3000)))
    assert [a.to_dict() for a in whole] == [a.to_dict() for a in pieces] and whole


def test_clock_rules_fire_on_ticks_and_resolve_when_steps_return(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [make("run_start", 0, run="r", t=0.0)], steps(0, 1, [1.0] * 10))
    engine.on_tick(300.0)
    assert got == []
    engine.on_tick(700.0)
    assert [(a.alert, a.state, a.step) for a in got] == [("JobHung", "firing", 10)]
    assert got[0].summary == "no step for 11m 30s"
    engine.on_tick(800.0)
    assert len(got) == 1                                   # no duplicate notification
    engine.process("r", 0, [], steps(0, 11, [1.0], t0=790.0))
    assert [(a.alert, a.state) for a in got[1:]] == [("JobHung", "resolved")]


def test_a_finished_run_is_not_hung(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [make("run_start", 0, run="r", t=0.0)], steps(0, 1, [1.0] * 3))
    engine.process("r", 0, [make("run_end", 0, run="r", t=4.0, status="completed")], None)
    engine.on_tick(10_000.0)
    assert got == []


def test_a_rank_that_never_stepped_is_hung_from_its_first_event(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 3, [make("run_start", 3, run="r", t=100.0)], None)
    engine.on_tick(800.0)
    assert [(a.alert, a.rank, a.step) for a in got] == [("JobHung", 3, None)]


def test_rank_median_compares_a_rank_with_the_others(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    for rank, seconds in ((0, 1.0), (1, 1.0), (2, 1.05), (3, 3.0)):
        engine.process("r", rank, [], steps(rank, 1, [1.0] * 3, step_time_s=seconds))
    assert [(a.alert, a.rank) for a in got] == [("Straggler", 3)]


def test_a_runtime_error_in_one_rule_is_reported_once_and_the_others_go_on(rules, monkeypatch):
    from msdoctor.core.engine import windows

    def broken(self, frame, args, state):
        raise FloatingPointError("boom")

    monkeypatch.setattr(windows.Aggregate, "evaluate", broken)
    got = []
    engine = Engine(rules, sinks=[got.append])
    for first in (1, 6):
        engine.process("r", 0, [], steps(0, first, [1.0, 1.0, math.nan, 1.0, 1.0]))
    assert [(a.alert, a.state, a.step) for a in got] == [
        ("LossNonFinite", "firing", 3), ("LossNonFinite", "resolved", 4),
        ("LossNonFinite", "firing", 8), ("LossNonFinite", "resolved", 9)]
    assert len(engine.errors) == 1 and "LossHigh" in engine.errors[0] and "boom" in engine.errors[0]


def test_a_failing_sink_does_not_stop_the_engine(rules):
    got = []

    def bad(alert):
        raise OSError("disk full")

    engine = Engine(rules, sinks=[bad, got.append])
    engine.process("r", 0, [], steps(0, 1, [math.nan, 1.0]))
    assert len(got) == 2 and "disk full" in engine.errors[0]


def test_a_restored_engine_resumes_windows_and_never_renotifies(rules):
    losses = [9.0] * 8 + [9.0] * 30 + [1.0] * 30
    straight = []
    Engine(rules, sinks=[straight.append]).process("r", 0, [], steps(0, 1, losses))
    first_half = []
    e1 = Engine(rules, sinks=[first_half.append])
    batch = steps(0, 1, losses)
    e1.process("r", 0, [], batch.slice(0, 20))
    doc, arrays = split_arrays(e1.state_dict())            # as the snapshot stores it
    state = join_arrays(json.loads(json.dumps(doc, allow_nan=False)),
                        {k: v.copy() for k, v in arrays.items()})
    second_half = []
    e2 = Engine(rules, sinks=[second_half.append])
    e2.load_state_dict(state)
    e2.process("r", 0, [], batch.slice(20, len(batch)))
    assert [a.to_dict() for a in first_half + second_half] == [a.to_dict() for a in straight]
    alerts = ActiveAlerts()
    alerts.add([as_record(a) for a in first_half + second_half])
    assert alerts.firing() == []


def state_bytes(engine: Engine) -> int:
    doc, arrays = split_arrays(engine.state_dict())
    return len(json.dumps(doc)) + sum(a.nbytes for a in arrays.values())


def test_state_is_bounded_by_the_windows_not_the_run_length(rules):
    engine = Engine(rules)
    engine.process("r", 0, [], steps(0, 1, [1.0] * 1000))
    small = state_bytes(engine)
    engine.process("r", 0, [], steps(0, 1001, [1.0] * 20000))
    assert state_bytes(engine) < small * 1.5


def shipped_steps(rank, first, n):
    """Healthy LLM-like steps of one rank (every signal the shipped rules read), a NaN loss
    at step 380."""
    rng = np.random.default_rng(rank)
    events = []
    for s in range(first, first + n):
        loss = math.nan if s == 380 else 10 / (1 + 0.01 * s) + 0.05 * rng.random()
        events.append(make("step", rank, run="r", step=s, t=1000.0 + 0.4 * s, loss=loss,
                           grad_norm=1 + 0.1 * rng.random(), loss_scale=65536.0, overflow=False,
                           lr=3e-4, tokens=4096, step_time_s=0.4, data_wait_s=0.002,
                           mem_host_rss_bytes=3e10 + rank))
    return columnize("r", rank, events)


def test_a_snapshot_of_the_shipped_rules_over_several_ranks_resumes_as_if_never_stopped():
    from msdoctor.core.engine.loader import default_rules_dir
    shipped = load_rules([default_rules_dir()])
    starts = [[make("run_start", r, run="r", t=1000.0, world_size=3)] for r in range(3)]
    straight, before, after = [], [], []
    whole = Engine(shipped, sinks=[straight.append])
    whole.process_many([("r", r, starts[r], shipped_steps(r, 1, 300)) for r in range(3)])
    whole.process_many([("r", r, [], shipped_steps(r, 301, 100)) for r in range(3)])
    first = Engine(shipped, sinks=[before.append])
    first.process_many([("r", r, starts[r], shipped_steps(r, 1, 300)) for r in range(3)])
    doc, arrays = split_arrays(first.state_dict())
    state = join_arrays(json.loads(json.dumps(doc, allow_nan=False)),
                        {k: v.copy() for k, v in arrays.items()})
    second = Engine(shipped, sinks=[after.append])
    second.load_state_dict(state)
    second.process_many([("r", r, [], shipped_steps(r, 301, 100)) for r in range(3)])
    assert not second.errors
    assert {a.alert for a in straight} >= {"LossNonFinite"}
    assert [a.to_dict() for a in before + after] == [a.to_dict() for a in straight]


SPARSE_RULES = """
version: 1
groups:
  - name: g
    rules:
      - alert: LossHigh
        expr: loss > 1
        keep_firing_for: 500 steps and 3 records
        labels: {severity: warning}
        annotations: {summary: "high"}
"""


def test_keep_firing_for_in_records_counts_each_ranks_records_alone_or_polled_together(tmp_path):
    # a log of every 500th step: 500 steps alone would resolve at the first low record
    path = tmp_path / "r.yaml"
    path.write_text(SPARSE_RULES)
    rules = load_rules([path])
    losses = [2.0, 0.5, 2.0, 0.5, 0.5, 2.0, 0.5, 0.5, 0.5, 0.5]

    def batch(rank, lo, hi):
        return columnize("r", rank, [make("step", rank, run="r", step=500 * (i + 1), t=500.0 * (i + 1),
                                          loss=losses[i]) for i in range(lo, hi)])
    whole, one_by_one, polled = [], [], []
    Engine(rules, sinks=[whole.append]).process("r", 0, [], batch(0, 0, 10))
    engine = Engine(rules, sinks=[one_by_one.append])
    for i in range(10):
        engine.process("r", 0, [], batch(0, i, i + 1))
    engine = Engine(rules, sinks=[polled.append])
    for lo, hi in ((0, 4), (4, 5), (5, 10)):
        engine.process_many([("r", r, [], batch(r, lo, hi)) for r in (0, 1)])
    seen = [(a.state, a.step) for a in whole]
    assert seen == [("firing", 500), ("resolved", 4500)]
    assert [(a.state, a.step) for a in one_by_one] == seen
    assert sorted((a.rank, a.state, a.step) for a in polled) == sorted(
        (r, s, step) for r in (0, 1) for s, step in seen)
