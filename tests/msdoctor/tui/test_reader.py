"""The reader's resolved list holds alerts that fired and ended, as they read while firing."""
from __future__ import annotations

import math

from msdoctor.core.views.alert_views import AlertView
from msdoctor.tui.reader import Reader, alert_item


def item(alert, state, t, summary=""):
    return alert_item(AlertView(alert=alert, state=state, severity="warning", run="r", rank=0,
                                value=math.nan, t=t, summary=summary))


def test_an_alert_that_was_only_pending_is_not_listed_as_resolved():
    history = [item("ThroughputBelowBaseline", "pending", 1.0),
               item("ThroughputBelowBaseline", "inactive", 2.0),
               item("LossSpike", "firing", 3.0, "Loss jumped"),
               item("LossSpike", "resolved", 4.0, "Loss is back")]
    resolved = Reader._resolved(history, set())
    assert [(a.alert, a.state, a.summary, a.t) for a in resolved] == [
        ("LossSpike", "resolved", "Loss jumped", 4.0)]

