"""Rule actions beyond stop: the control files the sidecar writes and what the journal records."""
from __future__ import annotations

import json

from msdoctor.core.alerts.actions import SKIP_MARGIN, ActionRequester, read_control
from msdoctor.core.alerts.model import Alert
from msdoctor.wire.layout import LR_FILE, PROTECT_FILE, ROLLBACK_FILE, SKIP_FILE, STOP_FILE

GOOD = {"step": 400, "path": "/ck/step-400.ckpt"}


def alert(action, state="firing", checkpoint=GOOD, caused_by=None, run="r"):
    return Alert(alert="LossSpike", state=state, severity="warning", run=run, rank=0, step=510,
                 first_step=500, value=9.0, t=1.0, summary="Loss jumped", action=action,
                 checkpoint=checkpoint, caused_by=caused_by)


def test_a_rollback_names_the_last_good_checkpoint_protects_it_and_is_recorded(tmp_path):
    requester = ActionRequester(tmp_path, clock=lambda: 100.0)
    a = alert("rollback")
    requester(a)
    doc = read_control(tmp_path, ROLLBACK_FILE)
    assert (doc["to_step"], doc["checkpoint"], doc["skip_from"], doc["run"]) == (
        400, "/ck/step-400.ckpt", 401, "r")
    assert doc["reason"] == "Loss jumped" and doc["margin"] == SKIP_MARGIN
    assert read_control(tmp_path, PROTECT_FILE)["paths"] == ["/ck/step-400.ckpt"]
    assert a.to_dict()["action_taken"]["action"] == "rollback"


def test_a_second_rollback_within_the_window_stops_the_training_instead(tmp_path):
    now = [100.0]
    requester = ActionRequester(tmp_path, clock=lambda: now[0])
    requester(alert("rollback"))
    (tmp_path / ROLLBACK_FILE).unlink()
    now[0] = 200.0
    second = alert("rollback")
    requester(second)
    assert not (tmp_path / ROLLBACK_FILE).exists()
    stop = json.loads((tmp_path / STOP_FILE).read_text())
    assert "rollback refused" in stop["reason"] and stop["run"] == "r"
    assert second.action_taken["action"] == "stop_training"
    now[0] = 100.0 + 3600.0 + 1
    requester(alert("rollback"))
    assert (tmp_path / ROLLBACK_FILE).exists()


def test_without_a_checkpoint_before_the_anomaly_a_rollback_stops_instead(tmp_path):
    requester = ActionRequester(tmp_path)
    requester(alert("rollback", checkpoint=None))
    assert (tmp_path / STOP_FILE).exists() and not (tmp_path / ROLLBACK_FILE).exists()


def test_skips_accumulate_and_the_lr_factor_halves_at_each_firing(tmp_path):
    requester = ActionRequester(tmp_path)
    requester(alert("skip_batches"))
    requester(alert("skip_batches"))
    ranges = read_control(tmp_path, SKIP_FILE)["ranges"]
    assert [(r["from_step"], r["to_step"]) for r in ranges] == [(500, 510 + SKIP_MARGIN)] * 2
    requester(alert("lower_lr"))
    requester(alert("lower_lr"))
    assert read_control(tmp_path, LR_FILE)["factor"] == 0.25


def test_pending_resolved_and_consequence_transitions_do_nothing(tmp_path):
    requester = ActionRequester(tmp_path)
    for a in (alert("rollback", state="pending"), alert("rollback", state="resolved"),
              alert("rollback", caused_by="LossNonFinite"), alert("stop_training"), alert(None)):
        requester(a)
    assert requester.taken == 0 and not (tmp_path / "control").exists()


def test_the_rollback_count_survives_a_restart(tmp_path):
    requester = ActionRequester(tmp_path, clock=lambda: 100.0)
    requester(alert("rollback"))
    again = ActionRequester(tmp_path, clock=lambda: 101.0)
    again.load_state_dict(json.loads(json.dumps(requester.state_dict())))
    again(alert("rollback"))
    assert (tmp_path / STOP_FILE).exists()
