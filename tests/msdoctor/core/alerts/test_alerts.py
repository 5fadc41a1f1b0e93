"""Alert records, the alerts.jsonl journal and the stop request."""
from __future__ import annotations

import json
import math
import os

from msdoctor.core.alerts import Alert, AlertJournal, read_alerts, write_stop_request


def alert(**kw):
    base = dict(alert="LossNonFinite", state="firing", severity="critical", run="r", rank=0,
                step=12, first_step=12, value=math.nan, t=5.0, summary="Loss is nan",
                fix="Use bf16.", labels={"severity": "critical"})
    base.update(kw)
    return Alert(**base)


def test_an_alert_serialises_non_finite_values_as_strings():
    d = alert().to_dict()
    json.dumps(d, allow_nan=False)
    assert d["value"] == "nan" and d["step"] == 12 and d["fix"] == "Use bf16."
    for key in ("alert", "state", "severity", "run", "rank", "step", "first_step", "value",
                "summary", "cause", "fix", "runbook_url", "t"):
        assert key in d


def test_the_journal_appends_one_complete_line_per_transition(tmp_path):
    journal = AlertJournal(tmp_path)
    journal(alert())
    journal(alert(state="resolved", value=1.0))
    lines = (tmp_path / "alerts.jsonl").read_text().splitlines()
    assert len(lines) == 2 and [r["state"] for r in read_alerts(tmp_path)] == ["firing", "resolved"]


def test_a_stop_request_is_written_atomically_with_the_contract_fields(tmp_path):
    path = write_stop_request(tmp_path, "Loss is nan", "LossNonFinite", rank=1, step=7, t=3.0,
                              run="r")
    assert path == tmp_path / "control" / "stop.json"
    assert json.loads(path.read_text()) == {"v": 1, "reason": "Loss is nan", "alert": "LossNonFinite",
                                            "run": "r", "rank": 1, "step": 7, "t": 3.0}
    assert os.listdir(tmp_path / "control") == ["stop.json"]


def test_describe_names_the_fix_of_a_firing_alert():
    assert alert().describe().endswith("Fix: Use bf16.")
    assert "Fix" not in alert(state="resolved").describe()
