"""The goodput figure in the run header and the checkpoints read through both query paths."""
from __future__ import annotations

from dataclasses import replace

from msdoctor.core.pipeline import Pipeline
from msdoctor.tui.checkpointpane import checkpoints_table
from msdoctor.tui.queries import CoreQueries
from msdoctor.tui.reader import Reader, Request
from msdoctor.tui.runheader import header_text
from msdoctor.wire import make

from fixed_data import snapshot
from spool_factory import write_run


def test_the_header_shows_the_goodput_when_it_is_known():
    run = snapshot().run
    assert "goodput" not in header_text(run, "x").plain
    assert "goodput 72%" in header_text(replace(run, goodput=0.72), "x").plain


def test_an_empty_list_says_which_saves_are_reported():
    assert "ModelCheckpoint" in checkpoints_table(()).plain


def test_the_reader_gets_goodput_and_checkpoints_from_the_core(tmp_path):
    write_run(tmp_path, run="r", ranks=(0,), steps=20)
    with open(tmp_path / "events" / "rank-0.jsonl", "a") as fh:
        import json
        fh.write(json.dumps(make("checkpoint", 0, run="r", step=10, path="c10", t=1.0)) + "\n")
    pipeline = Pipeline(tmp_path, persist=False)
    pipeline.poll_once()
    reading = Reader(CoreQueries(pipeline.store, pipeline.alerts), "here").read(
        Request(checkpoints=True))
    assert reading.run.goodput is not None and 0 < reading.run.goodput <= 1
    assert [(c.step, c.path, c.poisoned_by) for c in reading.checkpoints] == [(10, "c10", None)]
    assert Reader(CoreQueries(pipeline.store, pipeline.alerts), "here").read().checkpoints is None
