"""The alert feed tails alerts.jsonl: replay on start, live transitions to listeners."""
import json
import logging

from msdoctor.core.alerts.feed import AlertFeed


def line(**fields):
    base = {"alert": "LossNonFinite", "state": "firing", "severity": "critical", "run": "r",
            "rank": 0, "step": 5, "value": "nan", "summary": "s", "t": 10.0}
    return json.dumps({**base, **fields}) + "\n"


class Listener:
    def __init__(self):
        self.seen, self.resumed = [], []

    def on_alert(self, t):
        self.seen.append(t)

    def resume(self, active):
        self.resumed.extend(active)


def test_existing_history_is_replayed_silently_and_the_active_set_is_resumed(tmp_path):
    path = tmp_path / "alerts.jsonl"
    path.write_text(line(rank=0) + line(rank=1) + line(rank=1, state="resolved", t=11.0))
    listener = Listener()
    feed = AlertFeed(path, [listener])
    assert [a["rank"] for a in feed.active()] == [0]
    assert listener.seen == [] and [a["rank"] for a in listener.resumed] == [0]
    assert len(feed.history()) == 3


def test_new_transitions_reach_listeners_once_and_update_the_active_set(tmp_path):
    path = tmp_path / "alerts.jsonl"
    listener = Listener()
    feed = AlertFeed(path, [listener])
    with path.open("a") as f:
        f.write(line(state="pending", t=1.0))
    feed.on_tick(0.0)
    assert feed.counts() == {"pending": 1, "firing": 0}
    with path.open("a") as f:
        f.write(line(state="firing", t=2.0) + line(rank=3, state="firing")[:-10])  # partial line
    feed.on_tick(0.0)
    assert [t["state"] for t in listener.seen] == ["pending", "firing"]
    (active,) = feed.active()
    assert active["active_since"] == 1.0 and active["value"] != active["value"]   # NaN
    feed.on_tick(0.0)
    assert len(listener.seen) == 2


def test_a_bad_line_is_skipped_counted_and_logged_once_with_its_line_number(tmp_path, caplog):
    path = tmp_path / "alerts.jsonl"
    path.write_text("not json\n" + line(state="exploded") + line())
    with caplog.at_level(logging.WARNING, "msdoctor.core.alerts.feed"):
        feed = AlertFeed(path)
    assert feed.errors == 2 and len(feed.active()) == 1
    (record,) = caplog.records
    assert "alerts.jsonl:1:" in record.getMessage()


def test_a_truncated_file_is_read_again_from_the_start(tmp_path):
    path = tmp_path / "alerts.jsonl"
    path.write_text(line(rank=0) + line(rank=1))
    feed = AlertFeed(path)
    path.write_text(line(rank=2))
    feed.on_tick(0.0)
    assert [a["rank"] for a in feed.active()] == [2]
