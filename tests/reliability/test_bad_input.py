"""Bad spool input through the real Sidecar (tailer + store + serve's log reporter): each kind
is counted, reported with file:line (repeated steps: file and step), and ingest goes on."""
from __future__ import annotations

import logging

import pytest

from msdoctor.core.pipeline import Pipeline
from msdoctor.core.sidecar_log import LogReporter
from msdoctor.core.spool import MAX_LINE_BYTES
from msdoctor.wire import encode, make


def step(n: int, **fields) -> bytes:
    return encode(make("step", 0, run="r", step=n, t=float(n), loss=1.0, **fields))


START = encode(make("run_start", 0, run="r", t=0.0))
HUGE = b'{"v":1,"type":"step","rank":0,"run":"r","step":3,"pad":"' + b"x" * (MAX_LINE_BYTES + 10) \
    + b'"}\n'

# (case, the bad line written as line 4 (after run_start and steps 1, 2), decode errors, repeated steps, logged text)
CASES = [
    ("garbage", b"\x00\x01 not an event at all\n", 1, 0, ":4: not valid JSON"),
    ("truncated JSON", b'{"v":1,"type":"step","rank":0,"step":3,"lo\n', 1, 0, ":4: not valid JSON"),
    ("huge line over 1 MiB", HUGE, 1, 0, f":4: line longer than {MAX_LINE_BYTES} bytes"),
    ("not UTF-8", b'{"v":1,"type":"step","rank":0,"step":3,"run":"\xc3\x28"}\n', 1, 0,
     ":4: not valid UTF-8"),
    ("schema version 2", b'{"v":2,"type":"step","rank":0,"step":3}\n', 1, 0,
     ":4: field 'v': unsupported schema version 2"),
    ("schema version missing", b'{"type":"step","rank":0,"step":3}\n', 1, 0, ":4: "),
    ("schema version as a string", b'{"v":"1","type":"step","rank":0,"step":3}\n', 1, 0, ":4: "),
    ("unknown event type", b'{"v":1,"type":"reboot","rank":0}\n', 1, 0, ":4: "),
    ("a JSON array", b"[1, 2, 3]\n", 1, 0, ":4: "),
    ("a wrong field type", b'{"v":1,"type":"step","rank":0,"step":3,"loss":[1]}\n', 1, 0,
     ":4: field 'loss'"),
    ("duplicate step", step(2), 0, 1, "1 repeated or out-of-order step(s) (first: step 2 after "
                                      "step 2)"),
    ("out-of-order step", step(1), 0, 1, "1 repeated or out-of-order step(s) (first: step 1 after "
                                         "step 2)"),
]


@pytest.mark.parametrize("case,bad,errors,repeats,logged", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_counted_and_reported_with_its_position_and_ingest_goes_on(
        tmp_path, caplog, case, bad, errors, repeats, logged):
    path = tmp_path / "events" / "rank-0.jsonl"
    path.parent.mkdir()
    path.write_bytes(START + step(1) + step(2) + bad + step(10) + step(11))
    sidecar = Pipeline(tmp_path, persist=False, consumers=[LogReporter()])
    with caplog.at_level(logging.WARNING, logger="msdoctor.serve"):
        while sidecar.poll_once():
            pass
    state = sidecar.store.runs["r"].ranks[0]
    assert state.last_step == 11 and state.latest["loss"] == 1.0       # ingest went on
    assert state.counters["decode_errors"] == errors
    assert state.counters["repeated_steps"] == repeats
    assert state.counters["steps"] == 4 + repeats
    text = caplog.text
    assert f"{path}{logged}" in text if errors else f"{path}: {logged}" in text
    assert "Traceback" not in text


def test_many_bad_lines_are_all_counted_while_the_log_stays_bounded(tmp_path, caplog):
    path = tmp_path / "events" / "rank-0.jsonl"
    path.parent.mkdir()
    path.write_bytes(START + step(1) + b"garbage\n" * 10_000 + step(2))
    sidecar = Pipeline(tmp_path, persist=False, consumers=[LogReporter(burst=5)])
    with caplog.at_level(logging.WARNING, logger="msdoctor.serve"):
        while sidecar.poll_once():
            pass
    state = sidecar.store.runs["r"].ranks[0]
    assert state.counters["decode_errors"] == 10_000 and state.last_step == 2
    assert caplog.text.count("bad line skipped") == 5
