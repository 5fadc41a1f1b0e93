"""The run summary of a recording: loss first/last/min over finite values, restarts, text."""
from __future__ import annotations

import math

from msdoctor.core.batch import columnize
from msdoctor.core.runstats import RunStats, describe


def _steps(first: int, losses):
    return [{"type": "step", "step": first + i, "t": float(first + i), "loss": loss,
             "step_time_s": 0.5} for i, loss in enumerate(losses)]


def test_the_summary_skips_non_finite_losses_and_counts_restarts():
    stats = RunStats()
    stats.add(columnize("run-a", 0, _steps(1, [3.0, 2.0, math.nan, 2.5])))
    stats.add(columnize("run-a", 0, _steps(3, [1.5])))           # back to step 3: a restart
    summary = stats.to_dict()
    assert summary["steps"] == 5 and summary["ranks"] == 1 and summary["restarts"] == 1
    assert (summary["loss_first"], summary["loss_last"], summary["loss_min"]) == (3.0, 1.5, 1.5)
    assert summary["per_rank"][0]["nonfinite_loss"] == 1
    text = describe(summary)
    assert text.startswith("5 step records on 1 rank(s), 1 restart(s)") and "0.5 s/step" in text


def test_an_empty_recording_is_described_as_such():
    assert describe(RunStats().to_dict()) == "no step records"


def test_a_run_whose_loss_ends_non_finite_says_since_which_step_across_batches():
    stats = RunStats()
    stats.add(columnize("run-a", 0, _steps(1, [3.0, 2.0, math.nan, 2.5, math.nan])))
    stats.add(columnize("run-a", 0, _steps(6, [math.nan] * 3)))
    stats.add(columnize("run-a", 1, _steps(1, [3.0, math.nan, 2.0])))   # recovered: not ended
    summary = stats.to_dict()
    assert summary["ended_nonfinite"] == [{"run": "run-a", "rank": 0, "since": 5, "records": 4}]
    text = describe(summary)
    assert ("loss first 3, ended non-finite from step 5 on (4 record(s); the last finite loss "
            "2.5 at step 4), min 2") in text, text
    assert "last 2.5," not in text
