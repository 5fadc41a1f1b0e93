"""The bound on run ids: the first ``max_runs`` are kept, the rest counted and logged."""
from __future__ import annotations

import logging

from msdoctor.core.limits import RunLimit


def events(run: str) -> list:
    return [{"type": "run_start", "run": run}, {"type": "step", "run": run}]


def test_runs_beyond_the_bound_are_refused_and_counted_and_known_ones_stay_admitted(caplog):
    limit = RunLimit(max_runs=2)
    assert limit.admit("a", events("a"), 2, "p") and limit.admit("b", events("b"), 2, "p")
    with caplog.at_level(logging.WARNING, "msdoctor.sidecar"):
        assert not limit.admit("c", events("c"), 2, "events/rank-0.jsonl")
        for i in range(20):
            assert not limit.admit(f"d{i}", events("d"), 2, "events/rank-0.jsonl")
    assert limit.admit("a", events("a"), 2, "p")
    assert limit.to_json() == {"max_runs": 2, "runs": 2, "refused_events": 42,
                               "refused_run_starts": 21}
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2 and "run 'c' refused" in logged[0]       # the 1st and the 10th


def test_restored_runs_count_against_the_bound_and_counters_carry_over():
    limit = RunLimit(max_runs=1)
    limit.know(["old"])
    limit.load({"refused_events": 5, "refused_run_starts": 1})
    assert not limit.admit("new", events("new"), 2, "p")
    assert limit.to_json()["refused_events"] == 7
