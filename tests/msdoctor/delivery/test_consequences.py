"""Deliverers send root causes only: a transition marked ``caused_by`` (a consequence of another
alert firing on its rank) goes neither to a webhook nor to Alertmanager, not even on resend."""
from __future__ import annotations

import pytest

from msdoctor.delivery import AlertmanagerDeliverer, WebhookDeliverer

from receiver import Receiver


def transition(alert, state="firing", step=30, **extra):
    return {"alert": alert, "state": state, "severity": "critical", "run": "run-a", "rank": 0,
            "step": step, "first_step": 30, "value": float("nan"), "summary": alert,
            "t": 1000.0, **extra}


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def sent(receiver, key="alerts"):
    bodies = receiver.bodies
    if key == "alerts":
        return [(a["alert"], a["state"]) for body in bodies for a in body["alerts"]]
    return [(a["labels"]["alertname"], a["endsAt"] > a["startsAt"]) for body in bodies
            for a in body]


def test_a_webhook_gets_the_cause_and_a_consequence_only_once_it_stands_alone(receiver):
    hook = WebhookDeliverer(receiver.url).start()
    try:
        hook.on_alert(transition("LossNonFinite"))
        hook.on_alert(transition("GradNormNonFinite", caused_by="LossNonFinite"))
        hook.on_alert(transition("UpdatesStalled", caused_by="LossNonFinite"))
        hook.on_alert(transition("LossNonFinite", "resolved", 40))
        hook.on_alert(transition("GradNormNonFinite", "resolved", 40, caused_by="LossNonFinite"))
        hook.on_alert(transition("UpdatesStalled", "firing", 40))     # its cause ended
        assert hook.flush()
    finally:
        hook.close()
    assert sent(receiver) == [("LossNonFinite", "firing"), ("LossNonFinite", "resolved"),
                              ("UpdatesStalled", "firing")]


def test_alertmanager_never_gets_a_consequence_not_even_on_resend(receiver):
    am = AlertmanagerDeliverer(receiver.url, resend_interval=0.0)
    am.on_alert(transition("LossNonFinite"))
    am.on_alert(transition("GradNormNonFinite", caused_by="LossNonFinite"))
    am.resume([transition("UpdatesStalled", caused_by="LossNonFinite")])
    assert [t["alert"] for t in am.periodic(10**9)] == ["LossNonFinite"]
    am.start()
    try:
        assert am.flush()
    finally:
        am.close()
    assert {name for name, _ in sent(receiver, "am")} == {"LossNonFinite"}
