"""The last good checkpoint before an anomaly, named in the alert, and the poisoned ones marked."""
from __future__ import annotations

import math

from msdoctor.core import checkpoints
from msdoctor.core.alerts.active import as_record
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
          summary: "Loss is {{ $value }} at step {{ $step }}."
          fix: "Resume from the last good checkpoint. {{ $checkpoint }}Use bf16."
      - alert: LossHigh
        expr: loss > 5
        labels: {severity: warning}
        annotations: {summary: high, fix: "Lower the LR."}
"""


def saves(*steps):
    return [make("checkpoint", 0, run="r", step=s, path=f"ck/step-{s}.ckpt", t=float(s))
            for s in steps]


def batch(first, losses):
    return columnize("r", 0, [make("step", 0, run="r", step=first + i, t=float(first + i), loss=v)
                              for i, v in enumerate(losses)])


def test_a_nan_names_the_last_checkpoint_saved_before_it_began_not_the_newest(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RULES)
    got = []
    engine = Engine(load_rules([path]), sinks=[got.append])
    engine.process("r", 0, saves(400), batch(1, [1.0] * 499))
    engine.process("r", 0, saves(500, 600), batch(500, [math.nan] + [9.0] * 150))
    nan = [a for a in got if a.alert == "LossNonFinite" and a.state == "firing"][0]
    assert nan.first_step == 500 and nan.checkpoint["step"] == 400
    assert nan.fix == "Resume from the last good checkpoint. Last good checkpoint: step 400 " \
                      "(ck/step-400.ckpt). Use bf16."
    high = [a for a in got if a.alert == "LossHigh"][0]
    assert high.checkpoint is None and "checkpoint" not in high.to_dict()


def test_without_a_checkpoint_the_fix_says_nothing_about_one_and_the_record_says_null(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RULES)
    got = []
    Engine(load_rules([path]), sinks=[got.append]).process("r", 0, [], batch(1, [1.0, math.nan]))
    assert got[0].fix == "Resume from the last good checkpoint. Use bf16."
    assert got[0].to_dict()["checkpoint"] is None


def test_the_engine_remembers_checkpoints_across_a_snapshot(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RULES)
    rules = load_rules([path])
    engine = Engine(rules)
    engine.process("r", 0, saves(100, 200), batch(1, [1.0] * 250))
    state = join_arrays(*split_arrays(engine.state_dict()))
    got = []
    again = Engine(rules, sinks=[got.append])
    again.load_state_dict(state)
    again.process("r", 0, [], batch(251, [math.nan]))
    assert got[0].checkpoint["step"] == 200


def test_checkpoints_saved_while_an_anomaly_lasted_are_poisoned_and_the_named_one_is_good():
    records = [as_record(dict(alert="LossSpike", state="firing", run="r", rank=0, step=510,
                              first_step=500, checkpoint={"step": 400, "path": "a"})),
               as_record(dict(alert="LossSpike", state="resolved", run="r", rank=0, step=650,
                              first_step=500, checkpoint={"step": 400, "path": "a"})),
               as_record(dict(alert="LossHigh", state="firing", run="r", rank=0, step=510,
                              first_step=500))]
    spans = checkpoints.poisoning(records, "r")
    listed = checkpoints.mark([{"step": s} for s in (300, 400, 500, 600, 700)], spans)
    assert [(c["step"], c["poisoned_by"], c["last_good"]) for c in listed] == [
        (300, None, False), (400, None, True), (500, "LossSpike", False),
        (600, "LossSpike", False), (700, None, False)]


def test_a_save_of_a_step_already_listed_replaces_it_and_loads_are_not_checkpoints():
    kept = []
    for event in saves(300, 100, 200) + [make("checkpoint", 0, step=200, path="again"),
                                         make("checkpoint", 0, step=50, path="x", op="load")]:
        checkpoints.note(kept, event)
    assert [(c["step"], c["path"]) for c in kept] == [(100, "ck/step-100.ckpt"), (200, "again"),
                                                      (300, "ck/step-300.ckpt")]
    assert checkpoints.last_before(kept, 200)["step"] == 100
    assert checkpoints.last_before(kept, 100) is None and checkpoints.last_before(kept, None) is None
