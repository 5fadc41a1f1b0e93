"""Delivery runs in the background: retries with backoff, counts failures, logs an outage
once, drops (and counts) when its queue is full, and never blocks the caller."""
from __future__ import annotations

import logging
import time

import pytest

from msdoctor.delivery import AlertmanagerDeliverer, WebhookDeliverer
from msdoctor.delivery.alertmanager import rfc3339

import servers
from receiver import Receiver


def transition(state="firing", rank=0, **extra):
    return {"alert": "LossNonFinite", "state": state, "severity": "critical", "run": "run-a",
            "rank": rank, "step": 30, "first_step": 30, "value": float("nan"),
            "summary": "Loss is nan at step 30 on rank 0.", "cause": "fp16 overflow",
            "fix": "Switch to bf16.", "runbook_url": "docs/runbook.md#lossnonfinite",
            "t": 1000.0, **extra}


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_a_webhook_gets_firing_and_resolved_transitions_as_json(receiver):
    hook = WebhookDeliverer(receiver.url).start()
    try:
        hook.on_alert(transition("pending"))
        hook.on_alert(transition("firing"))
        hook.on_alert(transition("resolved"))
        assert hook.flush()
    finally:
        hook.close()
    alerts = [a for body in receiver.bodies for a in body["alerts"]]
    assert [a["state"] for a in alerts] == ["firing", "resolved"]
    assert alerts[0]["value"] == "nan" and alerts[0]["fix"] == "Switch to bf16."
    assert receiver.bodies[0]["source"] == "msdoctor"
    assert hook.stats["sent"] == 2 and hook.stats["failed"] == 0


def test_failed_posts_are_retried_with_backoff_and_counted(receiver, caplog):
    receiver.fail_next = 2
    hook = WebhookDeliverer(receiver.url, backoff=0.05).start()
    with caplog.at_level(logging.WARNING, "msdoctor.delivery"):
        start = time.monotonic()
        hook.on_alert(transition())
        assert hook.flush()
        elapsed = time.monotonic() - start
        hook.close()
    assert receiver.attempts == 3 and len(receiver.bodies) == 1
    assert hook.stats["failed"] == 2 and hook.stats["sent"] == 1 and hook.stats["healthy"]
    assert elapsed >= 0.05 + 0.1                                  # waited 0.05 s, then 0.1 s
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "delivery failing: HTTP 500" in messages[0]
    assert "recovered after 2 failed attempt(s)" in messages[1]


def test_an_unreachable_receiver_is_logged_once_counted_and_never_blocks_the_caller(caplog):
    url = f"http://127.0.0.1:{servers.free_port()}/nobody"
    hook = WebhookDeliverer(url, backoff=0.01, max_backoff=0.02, max_attempts=3,
                            queue_size=5, batch_size=1).start()
    with caplog.at_level(logging.WARNING, "msdoctor.delivery"):
        start = time.perf_counter()
        for i in range(50):
            hook.on_alert(transition(rank=i))
        enqueue_ms = (time.perf_counter() - start) * 1000
        hook.flush(timeout=20)
        hook.close()
    # a caller that waited on the posts would wait out 50 x 3 attempts' backoff (>= 1.5 s); the
    # margin below that is for a machine under load, not a measure of the enqueue's speed
    assert enqueue_ms < 500, f"50 enqueues took {enqueue_ms:.1f} ms"
    assert hook.stats["sent"] == 0 and hook.stats["failed"] >= 3
    assert hook.stats["dropped"] == 50 and not hook.stats["healthy"]   # queue overflow + gave up
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "cannot reach" in messages[0]


def test_only_http_urls_are_accepted():
    with pytest.raises(ValueError, match="expected an http:// or https:// URL"):
        WebhookDeliverer("file:///etc/passwd")


def test_alertmanager_alerts_carry_labels_annotations_and_an_end_time(receiver):
    am = AlertmanagerDeliverer(receiver.url.rsplit("/", 1)[0], resend_interval=60,
                               wall_clock=lambda: 2000.0, extra_labels={"cluster": "c1"})
    assert am.url.endswith("/api/v2/alerts")
    (alert,) = am.payload([transition("firing", labels={"team": "ml"}, active_since=990.0)])
    assert alert["labels"] == {"alertname": "LossNonFinite", "severity": "critical",
                               "run": "run-a", "rank": "0", "source": "msdoctor",
                               "cluster": "c1", "team": "ml"}
    assert alert["annotations"]["fix"] == "Switch to bf16." and \
        alert["annotations"]["value"] == "NaN" and alert["annotations"]["step"] == "30"
    assert alert["startsAt"] == rfc3339(990.0) and alert["endsAt"] == rfc3339(2240.0)
    (resolved,) = am.payload([transition("resolved", t=1500.0)])
    assert resolved["endsAt"] == rfc3339(1500.0)


def test_alertmanager_firing_alerts_are_resent_until_resolved(receiver):
    am = AlertmanagerDeliverer(receiver.url.rsplit("/", 1)[0], resend_interval=0.2).start()
    try:
        am.on_alert(transition("pending"))
        am.on_alert(transition("firing"))
        servers.wait_until(lambda: len(receiver.bodies) >= 3, 10, 0.05, "resends")
        am.on_alert(transition("resolved", t=time.time()))
        assert am.flush()
        sent = len(receiver.bodies)
        time.sleep(0.5)
        assert len(receiver.bodies) == sent                  # nothing firing: no more resends
    finally:
        am.close()
    assert all(len(body) == 1 for body in receiver.bodies)   # pending is never sent
    assert receiver.bodies[-1][0]["endsAt"] < rfc3339(time.time() + 1)


def test_alertmanager_never_hears_of_an_alert_that_was_only_pending(receiver):
    am = AlertmanagerDeliverer(receiver.url.rsplit("/", 1)[0], resend_interval=60).start()
    try:
        am.on_alert(transition("pending"))
        am.on_alert(transition("inactive"))
        am.on_alert(transition("pending", rank=1))
        am.on_alert(transition("firing", rank=1))
        assert am.flush()
    finally:
        am.close()
    assert [(a["labels"]["rank"], a["endsAt"] > rfc3339(time.time())) for body in receiver.bodies
            for a in body] == [("1", True)]             # rank 0 was never sent, nor its end


def test_one_post_ends_at_its_deadline_however_slowly_the_receiver_answers():
    import socket
    import threading

    from msdoctor.delivery.worker import DeliveryError, post_json

    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:                 # one header byte every 50 ms, never done
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"X")
                except OSError:
                    return
                time.sleep(0.05)

    threading.Thread(target=trickle, daemon=True).start()
    try:
        with pytest.raises(DeliveryError, match="within 0.5 s"):
            post_json(f"http://127.0.0.1:{server.getsockname()[1]}/api/v2/alerts", [], 0.5)
    finally:
        stop.set()
        server.close()


def test_a_non_2xx_answer_names_the_status_and_the_body(receiver):
    from msdoctor.delivery.worker import DeliveryError, post_json

    receiver.fail_next = 1
    with pytest.raises(DeliveryError, match="HTTP 5"):
        post_json(receiver.url, {"x": 1}, 5.0)
