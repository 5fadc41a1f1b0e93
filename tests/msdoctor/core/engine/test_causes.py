"""Root-cause grouping in the engine: consequences are marked ``caused_by`` while their cause
fires on the same rank, stand alone when it ends, and keep their mark across a restart."""
from __future__ import annotations

import math

import pytest

from msdoctor.core.batch import columnize
from msdoctor.core.engine.causes import CauseGraph
from msdoctor.core.engine.consumer import EngineConsumer
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import load_rules
from msdoctor.wire import make

# The consequence is defined before its cause on purpose: at the same step the cause still
# goes out first.
RULES = """
version: 1
groups:
  - name: g
    rules:
      - alert: Stalled
        expr: update_ratio == 0
        consequence_of: [GradBad, LossBad]
        labels: {severity: critical}
        annotations: {summary: "stalled at {{ $step }}"}
      - alert: GradBad
        expr: nonfinite(grad_norm)
        consequence_of: LossBad
        labels: {severity: critical}
        annotations: {summary: "grad {{ $value }}"}
      - alert: LossBad
        expr: nonfinite(loss)
        labels: {severity: critical}
        annotations: {summary: "loss {{ $value }}"}
"""


@pytest.fixture()
def rules(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RULES)
    return load_rules([path])


def batch(rank, rows):
    """rows: (step, loss, grad_norm, update_ratio)."""
    return columnize("r", rank, [make("step", rank, run="r", step=s, t=float(s), loss=loss,
                                      grad_norm=grad, update_ratio=ratio)
                                 for s, loss, grad, ratio in rows])


def row(step, loss_bad=False, grad_bad=False, stalled=False):
    return (step, math.nan if loss_bad else 2.0, math.nan if grad_bad else 1.0,
            0.0 if stalled else 1e-3)


def seen(got):
    return [(a.alert, a.state, a.step, a.caused_by) for a in got]


def test_alerts_firing_with_their_cause_are_marked_with_the_root_cause(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], batch(0, [row(1), row(2, True, True), row(3, True, True, True)]))
    assert seen(got) == [("LossBad", "firing", 2, None), ("GradBad", "firing", 2, "LossBad"),
                         ("Stalled", "firing", 3, "LossBad")]
    assert got[1].to_dict()["caused_by"] == "LossBad" and "caused_by" not in got[0].to_dict()


def test_the_mark_does_not_depend_on_how_the_stream_is_cut(rules):
    rows = [row(1), row(2, True, True), row(3, True, True, True), row(4, False, True, True),
            row(5, False, False, True), row(6)]
    whole, cut = [], []
    Engine(rules, sinks=[whole.append]).process("r", 0, [], batch(0, rows))
    engine = Engine(rules, sinks=[cut.append])
    for r in rows:
        engine.process("r", 0, [], batch(0, [r]))
    assert seen(whole) == seen(cut)


def test_a_consequence_whose_cause_ends_is_marked_with_the_next_cause_then_stands_alone(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], batch(0, [
        row(1, True, True, True),          # all three at once: LossBad is the root
        row(2, False, True, True),         # the loss recovers: GradBad stands alone,
        row(3, False, False, True),        # Stalled is marked with GradBad; then alone
        row(4)]))
    assert seen(got) == [
        ("LossBad", "firing", 1, None), ("GradBad", "firing", 1, "LossBad"),
        ("Stalled", "firing", 1, "LossBad"),
        ("LossBad", "resolved", 2, None), ("GradBad", "firing", 2, None),
        ("Stalled", "firing", 2, "GradBad"),
        ("GradBad", "resolved", 3, None), ("Stalled", "firing", 3, None),
        ("Stalled", "resolved", 4, None)]
    assert [a.first_step for a in got if a.alert == "Stalled"] == [1, 1, 1, 1]


def test_a_consequence_that_ends_with_its_cause_is_not_made_an_alert_of_its_own(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], batch(0, [row(1, True, True), row(2)]))
    assert seen(got) == [("LossBad", "firing", 1, None), ("GradBad", "firing", 1, "LossBad"),
                         ("LossBad", "resolved", 2, None), ("GradBad", "resolved", 2, "LossBad")]


def test_an_alert_that_fired_first_stays_an_alert_of_its_own(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], batch(0, [row(1, stalled=True), row(2, True, True, True)]))
    assert seen(got) == [("Stalled", "firing", 1, None), ("LossBad", "firing", 2, None),
                         ("GradBad", "firing", 2, "LossBad")]


def test_a_cause_on_another_rank_does_not_mark(rules):
    got = []
    engine = Engine(rules, sinks=[got.append])
    engine.process("r", 0, [], batch(0, [row(1, True)]))
    engine.process("r", 1, [], batch(1, [row(1, False, True)]))
    assert seen(got) == [("LossBad", "firing", 1, None), ("GradBad", "firing", 1, None)]


def test_a_restored_engine_keeps_the_marks(rules):
    first = Engine(rules)
    first.process("r", 0, [], batch(0, [row(1, True, True)]))
    got = []
    second = Engine(rules, sinks=[got.append])
    second.load_state_dict(first.state_dict())
    second.process("r", 0, [], batch(0, [row(2, True, True), row(3)]))
    assert seen(got) == [("LossBad", "resolved", 3, None), ("GradBad", "resolved", 3, "LossBad")]


def test_removing_the_cause_on_reload_makes_its_consequences_alerts_of_their_own(rules, tmp_path):
    engine = EngineConsumer(rules, tmp_path, log_transitions=False)
    got = []
    engine.sinks.append(got.append)
    engine.process("r", 0, [], batch(0, [row(1, True, True)]))
    kept = [r for r in rules if r.alert != "LossBad"]
    for rule in kept:
        rule.consequence_of = tuple(c for c in rule.consequence_of if c != "LossBad")
    ended = engine.replace_rules(kept)
    assert seen(ended) == [("LossBad", "resolved", 1, None), ("GradBad", "firing", 1, None)]


def test_causes_go_first_at_the_same_step(rules):
    graph = CauseGraph.of(rules)
    assert graph.depth == {"LossBad": 0, "GradBad": 1, "Stalled": 2}
    assert graph.cause_of("Stalled", {"GradBad": None}) == "GradBad"
    assert graph.cause_of("Stalled", {"GradBad": "LossBad", "LossBad": None}) == "LossBad"
    assert graph.cause_of("LossBad", {"GradBad": None}) is None
