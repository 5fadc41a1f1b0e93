"""The Logs pane follows the run's log files: bounded, regular files only, escaped."""
from __future__ import annotations

import os

import pytest

from msdoctor.tui.app import DoctorApp
from msdoctor.tui.logpane import LogPane
from msdoctor.tui.logtail import TAIL_BYTES, LogFollower, LogTail
from msdoctor.tui.source import EmbeddedSource, FixedSource

from fixed_data import snapshot

pytestmark = pytest.mark.timeout(60)


def mindformers_run(tmp_path):
    """A run directory as ``msdoctor train`` leaves it: train.log and MindFormers' tree."""
    run_dir = tmp_path / "run"
    (run_dir / "events").mkdir(parents=True)
    (run_dir / "train.log").write_text("step 1 loss 2.5\n")
    for rank in (1, 0):
        logs = run_dir / "work" / "output" / "log" / f"rank_{rank}"
        logs.mkdir(parents=True)
        (logs / "info.log").write_text(f"rank {rank} INFO step 1\n")
        (logs / "error.log").write_text(f"rank {rank} ERROR out of memory\n")
    return run_dir


def test_the_follower_lists_the_train_log_then_each_rank_s_info_and_error_log(tmp_path):
    run_dir = mindformers_run(tmp_path)
    follower = LogFollower(run_dir)
    chunk = follower.poll()
    assert [str(p.relative_to(run_dir)) for p in chunk.files] == [
        "train.log", "work/output/log/rank_0/info.log", "work/output/log/rank_0/error.log",
        "work/output/log/rank_1/info.log", "work/output/log/rank_1/error.log"]
    assert chunk.lines == ["step 1 loss 2.5"] and chunk.reset
    follower.pick(1)
    assert follower.poll().lines == ["rank 0 INFO step 1"]


def test_a_tail_reads_only_new_complete_lines_and_escapes_control_characters(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"x" * (3 * TAIL_BYTES) + b"\nold line\n")
    tail = LogTail(log)
    lines, reset = tail.read()
    assert reset and lines[0].startswith("… the last") and lines[-1] == "old line"
    assert sum(len(line) for line in lines) <= TAIL_BYTES + 100      # bounded, not 3x
    with log.open("ab") as f:
        f.write(b"\x1b[2J\x1b]0;owned\x07 half")
    assert tail.read() == ([], False)                                 # no newline yet
    with log.open("ab") as f:
        f.write(b" done\n")
    assert tail.read() == (["\\x1b[2J\\x1b]0;owned\\x07 half done"], False)
    log.write_bytes(b"rotated\n")                                      # truncated: start over
    assert tail.read() == (["rotated"], True)


def test_a_fifo_standing_for_a_log_is_refused_not_waited_on(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.mkfifo(run_dir / "train.log")
    chunk = LogFollower(run_dir).poll()
    assert chunk.lines == [] and "is a FIFO" in chunk.problem


async def test_the_logs_pane_shows_the_train_log_and_brackets_switch_files(tmp_path):
    run_dir = mindformers_run(tmp_path)
    app = DoctorApp(EmbeddedSource(run_dir), poll=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        assert app.pane == "logs"
        await app.refresh_data()
        await pilot.pause()
        pane = app.query_one(LogPane)
        assert "train.log" in str(pane.query_one("#log-bar").render())
        assert "step 1 loss 2.5" in [s.text for s in pane.query_one("#log-view").lines]
        (run_dir / "train.log").open("a").write("step 2 loss 2.4\n")
        await app.refresh_data()
        await pilot.pause()
        assert [s.text for s in pane.query_one("#log-view").lines][-2:] == [
            "step 1 loss 2.5", "step 2 loss 2.4"]
        await pilot.press("right_square_bracket")
        await app.refresh_data()
        await pilot.pause()
        assert "rank_0/info.log" in str(pane.query_one("#log-bar").render())
        assert [s.text for s in pane.query_one("#log-view").lines] == ["rank 0 INFO step 1"]


async def test_without_a_local_run_directory_the_logs_pane_says_why():
    app = DoctorApp(FixedSource(snapshot()), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")
        await app.refresh_data()
        await pilot.pause()
        assert "No run directory on this machine" in str(app.query_one("#log-bar").render())
