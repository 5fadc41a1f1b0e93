"""The one staleness and run-end rule (msdoctor.core.liveness), through the real store, views
and engine over spool chunks a test writes."""
from __future__ import annotations

import math

from msdoctor.core import views
from msdoctor.core.engine import default_rules_dir, load_rules
from msdoctor.core.liveness import GONE_AFTER_S, STALE_MIN_S, live_values, run_end_of, stale_after
from msdoctor.core.pipeline import Pipeline
from msdoctor.exporter.collector import scrape_families
from msdoctor.wire import encode, make

from spool_factory import STEP_TIME, TOKENS, rank_file, write_run

T0 = 1_700_000_000.0
STEPS = 30
LAST = T0 + STEPS * STEP_TIME          # the last step's time


class Clock:
    """The sidecar's clock, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def read(tmp_path, clock, rules=False) -> Pipeline:
    pipeline = Pipeline(tmp_path, persist=False, clock=clock,
                        rules=load_rules([default_rules_dir()]) if rules else None)
    pipeline.poll_once()
    return pipeline


def gauge(families, name, rank):
    family = next(f for f in families if f.spec.name == name)
    return dict(zip(family.keys, family.values)).get(("run-a", str(rank)))


def test_a_rank_is_stale_after_ten_median_steps_and_never_before_ten_seconds():
    assert stale_after(0.5) == STALE_MIN_S
    assert stale_after(3.0) == 30.0
    assert stale_after(None) == STALE_MIN_S and stale_after(math.nan) == STALE_MIN_S


def test_a_stale_rank_reports_zero_tokens_and_its_age_as_step_time():
    latest = {"tokens_per_s": 5000.0, "step_time_s": 0.1, "loss": 2.0}
    assert live_values(latest, True, False, 1.0) == latest
    assert live_values(latest, True, True, 42.0) == {"tokens_per_s": 0.0, "step_time_s": 42.0,
                                                     "loss": 2.0}
    assert live_values(latest, False, False, 42.0)["tokens_per_s"] == 0.0     # ended


def test_the_views_and_metrics_judge_staleness_by_steps_not_heartbeats(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=STEPS, t0=T0)       # a heartbeat after the steps
    with rank_file(tmp_path, 0).open("ab") as f:                 # rank 0 heartbeats on
        f.write(encode(make("heartbeat", 0, run="run-a", t=LAST + 60.0, step=STEPS)))
    pipeline = read(tmp_path, Clock(LAST + 61.0))
    store = pipeline.store
    fresh = views.overview(store, None, "run-a", now=LAST + 5.0)
    assert fresh.stale == (False, False)
    assert fresh.latest["tokens_per_s"][0] == TOKENS / fresh.latest["step_time_s"][0]
    late = views.overview(store, None, "run-a", now=LAST + 61.0)
    assert late.stale == (True, True) and late.age_s == (61.0, 61.0)
    assert late.latest["tokens_per_s"] == (0.0, 0.0) and late.totals["tokens_per_s"] == 0.0
    assert late.latest["step_time_s"] == (61.0, 61.0)
    families = scrape_families(store, now=LAST + 61.0)
    assert gauge(families, "msdoctor_device_tokens_per_second", 0) == 0.0
    assert gauge(families, "msdoctor_rank_stale", 0) == 1.0
    assert gauge(families, "msdoctor_last_step_timestamp_seconds", 0) == LAST
    assert gauge(families, "msdoctor_last_event_timestamp_seconds", 0) == LAST + 60.0


def test_a_run_ends_when_every_rank_wrote_run_end_and_says_how(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=STEPS, t0=T0)
    for rank, status in ((0, "completed"), (1, "failed")):
        with rank_file(tmp_path, rank).open("ab") as f:
            f.write(encode(make("run_end", rank, run="run-a", status=status, t=LAST + rank)))
    store = read(tmp_path, Clock(LAST + 2.0)).store
    run = views.run(store, None, "run-a")
    assert run.ended == {"outcome": "failed", "t": LAST + 1, "statuses": {"completed": 1,
                                                                          "failed": 1}}
    assert views.overview(store, None, "run-a", now=LAST + 2.0).totals["running"] == 0


def test_a_rank_is_gone_for_good_only_after_the_sidecar_heard_nothing_for_an_hour(tmp_path):
    write_run(tmp_path, ranks=(0,), steps=STEPS, t0=T0)          # years old, read just now
    clock = Clock(LAST + 10 * 365 * 86400.0)
    pipeline = read(tmp_path, clock, rules=True)
    store, read_at = pipeline.store, clock.now
    assert run_end_of(store.runs["run-a"].ranks.values(), read_at) is None
    later = read_at + GONE_AFTER_S + 1.0
    ended = run_end_of(store.runs["run-a"].ranks.values(), later)
    assert ended == {"outcome": "failed", "t": LAST, "statuses": {"gone": 1}}
    # the engine ends the run's alerts then (JobHung fired on the old spool)
    hung = [a for a in pipeline.alerts.active() if a["alert"] == "JobHung"]
    assert hung and hung[0]["state"] == "firing"
    clock.now = later
    pipeline.tick()
    assert not pipeline.alerts.active()
    last = pipeline.alerts.history(1)[-1]
    assert (last["alert"], last["state"], last["reason"]) == ("JobHung", "resolved", "run ended")


def test_the_median_step_time_is_numpys_median_of_the_last_finite_points():
    import numpy as np

    from msdoctor.core.liveness import MEDIAN_POINTS, median_of
    rng = np.random.default_rng(0)
    for size in (0, 1, 2, 7, MEDIAN_POINTS, MEDIAN_POINTS + 9):
        values = rng.normal(size=size)
        values[::5] = np.nan
        tail = values[-MEDIAN_POINTS:]
        tail = tail[np.isfinite(tail)]
        assert median_of(values) == (float(np.median(tail)) if tail.shape[0] else None)
