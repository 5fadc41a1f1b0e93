"""SpoolWaker: a change under events/ wakes the sidecar; without inotify it sleeps the timeout."""
from __future__ import annotations

import sys
import threading

import pytest

from msdoctor.core.wake import PollPacer, SpoolWaker

LONG = 60.0          # a liveness bound only: a change wakes the waiter long before


def write_soon(path, data: bytes, delay: float = 0.05) -> threading.Timer:
    def write() -> None:
        with open(path, "ab") as fh:
            fh.write(data)
    timer = threading.Timer(delay, write)
    timer.start()
    return timer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only")
def test_an_append_to_a_rank_file_wakes_the_waiter_and_a_quiet_spool_times_out(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    waker = SpoolWaker(tmp_path)
    try:
        assert waker.native
        assert waker.wait(0.01) is False                 # nothing happened: the timeout
        write_soon(events / "rank-0.jsonl", b'{"v":1}\n').join()
        assert waker.wait(LONG) is True
        timer = write_soon(events / "rank-0.jsonl", b'{"v":1}\n')
        assert waker.wait(LONG) is True
        timer.join()
    finally:
        waker.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only")
def test_an_events_directory_created_or_recreated_later_is_watched(tmp_path):
    waker = SpoolWaker(tmp_path)                         # no events/ yet: watches the run dir
    try:
        assert waker.wait(0.01) is False
        events = tmp_path / "events"
        events.mkdir()
        assert waker.wait(LONG) is True                  # events/ appeared
        waker.wait(0.01)                                 # (the caller polls the spool here)
        write_soon(events / "rank-3.jsonl", b"x\n").join()
        assert waker.wait(LONG) is True                  # and its files are watched now
        (events / "rank-3.jsonl").unlink()
        events.rmdir()
        assert waker.wait(LONG) is True
        events.mkdir()
        waker.wait(0.01)
        write_soon(events / "rank-1.jsonl", b"x\n").join()
        assert waker.wait(LONG) is True                  # the new events/ is watched
    finally:
        waker.close()


def test_without_inotify_the_waiter_sleeps_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("MSDOCTOR_WAKE", "poll")
    (tmp_path / "events").mkdir()
    waker = SpoolWaker(tmp_path)
    assert not waker.native
    write_soon(tmp_path / "events" / "rank-0.jsonl", b"x\n", delay=0).join()
    assert waker.wait(0.01) is False
    waker.close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_long_catch_up_of_quick_polls_delays_the_next_poll_by_one_poll_not_by_the_catch_up():
    clock = FakeClock()
    pacer = PollPacer(0.02, clock)
    for _ in range(30):                  # 30 polls of 0.1 s back to back, each with input
        started = clock.now
        clock.now += 0.1
        pacer.polled(started, True)
    pacer.polled(clock.now, False)       # the poll that found nothing ends the streak
    clock.now += 0.01                    # a change wakes the sidecar
    assert pacer.gap() == pytest.approx(0.09)


def test_changes_that_never_stop_leave_the_sidecar_idle_as_long_as_it_polled():
    clock = FakeClock()
    pacer = PollPacer(0.02, clock)
    busy = idle = 0.0
    for _ in range(50):                  # each poll takes 0.3 s; the spool always changed
        started = clock.now
        clock.now += 0.3
        pacer.polled(started, True)
        busy += 0.3
        pacer.polled(clock.now, False)   # woken at once
        gap = pacer.gap()
        clock.now += gap
        idle += gap
    assert busy / (busy + idle) == pytest.approx(0.5)


def test_quick_polls_still_wait_the_minimum_gap_and_a_late_wake_waits_no_more():
    clock = FakeClock()
    pacer = PollPacer(0.02, clock)
    pacer.polled(clock.now, True)        # a poll of no measurable time
    assert pacer.gap() == pytest.approx(0.02)
    started = clock.now
    clock.now += 0.2
    pacer.polled(started, True)
    clock.now += 0.5                     # the wake came after the poll interval
    assert pacer.gap() == 0.0
