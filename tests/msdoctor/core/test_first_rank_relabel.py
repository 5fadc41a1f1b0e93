"""``first_rank`` stays right live: a rank that went first but is read after another rank's
alert fired corrects that alert's label (a new firing transition with the reason), and
Alertmanager is told the old label set resolved."""
from __future__ import annotations

import json
import shutil

from test_layer_book import write_rank

from msdoctor.core.engine import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.delivery.alertmanager import AlertmanagerDeliverer, rfc3339


def firing(pipeline: Pipeline, alert: str, rank: int) -> list:
    return [(t["labels"].get("first_rank"), t.get("reason")) for t in pipeline.alerts.history(1000)
            if t["alert"] == alert and t["rank"] == rank and t["state"] == "firing"]


def test_a_first_rank_read_after_the_alert_fired_corrects_its_label(tmp_path):
    live, later = tmp_path / "live", tmp_path / "later"
    write_rank(later, 0, 50, spike=(40, 3))        # GradNormSpike keeps firing for 20 steps
    write_rank(later, 1, 50, spike=(35, 2))        # rank 1 went first, at step 35
    (live / "events").mkdir(parents=True)
    shutil.copy(later / "events" / "rank-0.jsonl", live / "events")
    rules = load_rules([str(default_rules_dir())])
    pipeline = Pipeline(live, rules=rules, persist=False, journal=True)
    pipeline.poll_once()                            # only rank 0 so far
    assert firing(pipeline, "GradNormSpike", 0) == [("0", None)]
    shutil.copy(later / "events" / "rank-1.jsonl", live / "events")
    pipeline.poll_once()
    assert firing(pipeline, "GradNormSpike", 0) == [
        ("0", None), ("1", "first_rank 0 -> 1: rank 1 went first (its events were read after "
                           "this alert fired)")]
    assert firing(pipeline, "GradNormSpike", 1)[0][0] == "1"
    (now,) = [a for a in pipeline.alerts.active() if a["alert"] == "GradNormSpike"
              and a["rank"] == 0]
    assert now["labels"] == {**now["labels"], "first_rank": "1", "layer": "layers.2"}
    assert now["first_step"] == 40 and now["state"] == "firing"
    journal = [json.loads(line) for line in (live / "alerts.jsonl").read_text().splitlines()]
    assert [t["labels"].get("first_rank") for t in journal
            if t["alert"] == "GradNormSpike" and t["rank"] == 0] == ["0", "1"]


def test_alertmanager_gets_the_old_label_set_resolved_and_the_new_one_firing():
    deliverer = AlertmanagerDeliverer("http://127.0.0.1:9/", resend_interval=60.0)  # not started
    base = {"alert": "GradNormSpike", "run": "r", "rank": 0, "severity": "info",
            "state": "firing", "t": 100.0, "labels": {"layer": "layers.1", "first_rank": "0"}}
    deliverer.on_alert(base)
    deliverer.on_alert({**base, "t": 101.0, "labels": {**base["labels"], "first_rank": "1"}})
    payload = deliverer.payload(list(deliverer._queue))
    got = sorted((a["labels"]["first_rank"], a["endsAt"] == rfc3339(101.0)) for a in payload)
    assert got == [("0", True), ("1", False)]      # 0 resolved when 1 fired; 1 firing
