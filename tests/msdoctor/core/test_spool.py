"""SpoolTailer: incremental, line-exact reading of <run_dir>/events/rank-<N>.jsonl."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from msdoctor.core.spool import SpoolTailer, decode_line
from msdoctor.wire import EventError, decode, encode, make


def step_line(rank: int, step: int, **fields) -> bytes:
    fields.setdefault("loss", 2.0 + 1.0 / (step + 1))
    fields.setdefault("t", 1000.0 + step)
    return encode(make("step", rank, step=step, **fields))


def append(run_dir: Path, rank: int, data: bytes) -> Path:
    path = run_dir / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(data)
    return path


def drain(tailer: SpoolTailer, max_bytes: int = 8 << 20):
    chunks = []
    while True:
        new = tailer.poll(max_bytes)
        if not new:
            return chunks
        chunks.extend(new)


def steps_of(chunks) -> list:
    return [int(s) for c in chunks if c.steps is not None for s in c.steps.steps]


def test_a_partial_last_line_is_not_consumed_until_its_newline_arrives(tmp_path):
    line = step_line(0, 1)
    append(tmp_path, 0, step_line(0, 0) + line[:20])
    tailer = SpoolTailer(tmp_path)
    first = tailer.poll()
    assert steps_of(first) == [0]
    assert tailer.offsets["events/rank-0.jsonl"] == (len(step_line(0, 0)), 1)
    assert tailer.poll() == []                     # still only half a line
    append(tmp_path, 0, line[20:-1])               # everything but the newline
    assert tailer.poll() == []
    append(tmp_path, 0, b"\n")
    second = tailer.poll()
    assert steps_of(second) == [1] and second[0].errors == []
    assert tailer.offsets["events/rank-0.jsonl"] == (len(step_line(0, 0)) + len(line), 2)


def test_a_rank_file_that_appears_late_is_picked_up(tmp_path):
    (tmp_path / "events").mkdir()
    tailer = SpoolTailer(tmp_path)
    assert tailer.poll() == []
    append(tmp_path, 0, step_line(0, 1))
    assert [(c.rank, steps_of([c])) for c in tailer.poll()] == [(0, [1])]
    append(tmp_path, 3, step_line(3, 1) + step_line(3, 2))
    append(tmp_path, 0, step_line(0, 2))
    assert [(c.rank, steps_of([c])) for c in tailer.poll()] == [(0, [2]), (3, [1, 2])]


def test_a_missing_events_directory_reads_as_nothing_until_it_appears(tmp_path):
    tailer = SpoolTailer(tmp_path / "not-yet")
    assert tailer.poll() == []
    append(tmp_path / "not-yet", 1, step_line(1, 5))
    assert steps_of(tailer.poll()) == [5]


def test_bad_lines_are_reported_with_file_and_line_and_the_rest_is_ingested(tmp_path):
    path = append(tmp_path, 2, b"".join([
        step_line(2, 1),
        b'{"v":1,"type":"step","rank":2,"step":2,"loss":\n',      # line 2: cut JSON
        b'{"v":1,"type":"step","rank":2,"step":3,"run":"\xff\xfe"}\n',  # line 3: not UTF-8
        b'{"v":1,"type":"step","rank":2,"step":"four"}\n',        # line 4: schema
        b'{"v":2,"type":"step","rank":2,"step":5}\n',             # line 5: version
        step_line(3, 6),                                          # line 6: wrong rank
        b"\n",                                                    # line 7: blank, ignored
        step_line(2, 8),
    ]))
    chunks = SpoolTailer(tmp_path).poll()
    assert steps_of(chunks) == [1, 8]
    errors = [e for c in chunks for e in c.errors]
    assert [(e.path, e.line_no) for e in errors] == [(str(path), n) for n in (2, 3, 4, 5, 6)]
    text = [str(e) for e in errors]
    assert text[0].startswith(f"{path}:2: not valid JSON")
    assert "not valid UTF-8" in text[1]
    assert "field 'step': expected an integer, got 'four'" in text[2]
    assert "unsupported schema version 2" in text[3]
    assert "field 'rank': 3 in the file of rank 2; expected 2" in text[4]


def test_line_numbers_stay_right_across_polls_and_across_restarts(tmp_path):
    append(tmp_path, 0, step_line(0, 1) + b"garbage\n")
    tailer = SpoolTailer(tmp_path)
    assert [e.line_no for c in tailer.poll() for e in c.errors] == [2]
    append(tmp_path, 0, step_line(0, 2) + b"[1]\n")
    assert [e.line_no for c in tailer.poll() for e in c.errors] == [4]
    restarted = SpoolTailer(tmp_path, offsets=tailer.offsets, runs=tailer.runs)
    append(tmp_path, 0, b"{}\n")
    assert [e.line_no for c in restarted.poll() for e in c.errors] == [5]


def test_a_line_over_the_bound_is_skipped_without_buffering_it_whole(tmp_path):
    limit = 1000
    tailer = SpoolTailer(tmp_path, max_line_bytes=limit)
    long_line = b'{"v":1,"type":"step","rank":0,"step":2,"pad":"' + b"x" * 5000
    append(tmp_path, 0, step_line(0, 1) + long_line[:3000])
    assert steps_of(tailer.poll()) == [1]
    offset, lines = tailer.offsets["events/rank-0.jsonl"]
    assert offset == len(step_line(0, 1)) + 3000 and lines == 1   # partial long line dropped
    append(tmp_path, 0, long_line[3000:] + b'"}\n' + step_line(0, 3))
    chunks = tailer.poll()
    assert steps_of(chunks) == [3]
    assert [(e.line_no, "longer than 1000 bytes" in e.message) for c in chunks
            for e in c.errors] == [(2, True)]
    # a complete over-long line read in one go is rejected the same way
    append(tmp_path, 0, long_line + b'"}\n' + step_line(0, 5))
    chunks = tailer.poll()
    assert steps_of(chunks) == [5] and [e.line_no for c in chunks for e in c.errors] == [4]


def test_a_truncated_file_is_reported_and_read_again_from_the_start(tmp_path):
    path = append(tmp_path, 0, step_line(0, 1) + step_line(0, 2))
    tailer = SpoolTailer(tmp_path)
    assert steps_of(tailer.poll()) == [1, 2]
    path.write_bytes(step_line(0, 1))
    chunks = tailer.poll()
    assert steps_of(chunks) == [1]
    assert any("shrank from" in e.message and "from the start" in e.message
               for c in chunks for e in c.errors)
    assert tailer.offsets["events/rank-0.jsonl"] == (len(step_line(0, 1)), 1)


def test_the_run_id_comes_from_run_start_else_the_run_directory_name(tmp_path):
    run_dir = tmp_path / "my-run"
    append(run_dir, 0, step_line(0, 1))
    append(run_dir, 1, encode(make("run_start", 1, run="llama-a", world_size=2)) + step_line(1, 1))
    tailer = SpoolTailer(run_dir)
    assert {c.rank: c.run for c in tailer.poll()} == {0: "my-run", 1: "llama-a"}
    append(run_dir, 1, step_line(1, 2) + encode(make("run_start", 1, run="llama-b"))
           + step_line(1, 1))
    chunks = tailer.poll()                     # a new run mid-read splits the chunk
    assert [(c.run, steps_of([c])) for c in chunks] == [("llama-a", [2]), ("llama-b", [1])]
    resumed = SpoolTailer(run_dir, offsets=tailer.offsets, runs=tailer.runs)
    append(run_dir, 1, step_line(1, 2))
    assert [c.run for c in resumed.poll()] == ["llama-b"]


def test_a_chunk_keeps_every_event_in_file_order_and_columnizes_the_steps(tmp_path):
    append(tmp_path, 0, b"".join([
        encode(make("run_start", 0, run="r", world_size=1, t=1.0)),
        step_line(0, 1, loss=math.nan, grad_norm=math.inf, overflow=True),
        encode(make("heartbeat", 0, t=2.0, step=1, dropped=3)),
        step_line(0, 2, loss=1.5),
        encode(make("run_end", 0, t=3.0, status="completed", step=2)),
    ]))
    [chunk] = SpoolTailer(tmp_path).poll()
    assert [e["type"] for e in chunk.events] == ["run_start", "step", "heartbeat", "step", "run_end"]
    assert [e["type"] for e in chunk.others] == ["run_start", "heartbeat", "run_end"]
    steps, loss = chunk.steps.series("loss")
    assert steps.tolist() == [1, 2] and math.isnan(loss[0]) and loss[1] == 1.5
    assert chunk.steps.series("grad_norm")[1].tolist() == [math.inf]
    assert chunk.steps.series("overflow")[1].tolist() == [1.0]


def test_a_poll_reads_at_most_about_its_byte_budget_per_file(tmp_path):
    append(tmp_path, 0, b"".join(step_line(0, s) for s in range(1, 5001)))
    tailer = SpoolTailer(tmp_path)
    first = tailer.poll(max_bytes=1)           # the per-file floor (256 KiB) still applies
    assert 0 < len(steps_of(first)) < 5000
    assert steps_of(first) + steps_of(drain(tailer)) == list(range(1, 5001))


# -- the fast decode path matches the schema's own decode exactly ----------------
values = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from(["nan", "inf", "-inf", "x", ""]), st.just({}), st.just([1]))
fields = st.dictionaries(st.sampled_from(["v", "type", "rank", "step", "loss", "overflow", "t",
                                          "run", "status", "dropped", "config", "extra"]),
                         values, max_size=8)


@settings(max_examples=300, deadline=None)
@given(fields, st.sampled_from(["step", "run_start", "run_end", "heartbeat", "nope"]),
       st.booleans())
def test_the_fast_decode_path_gives_the_same_result_or_error_as_events_decode(event, kind, base):
    if base:
        event = {"v": 1, "type": kind, "rank": 0, "step": 1, "status": "completed", **event}
    import orjson
    line = orjson.dumps(event)
    try:
        expected = decode(line)
    except EventError as exc:
        with pytest.raises(EventError) as got:
            decode_line(line)
        assert str(got.value) == str(exc)
        return
    actual = decode_line(line)
    assert actual.keys() == expected.keys()
    for key in expected:
        a, e = actual[key], expected[key]
        assert type(a) is type(e) and (a == e or (a != a and e != e)), key


def test_a_large_file_is_read_over_several_polls_with_every_step_exactly_once(tmp_path):
    append(tmp_path, 0, b"".join(step_line(0, s) for s in range(1, 100_001)))
    chunks = drain(SpoolTailer(tmp_path), max_bytes=1 << 20)
    assert len(chunks) > 5
    steps = np.concatenate([c.steps.steps for c in chunks])
    assert steps.tolist() == list(range(1, 100_001))


def test_a_removed_file_is_reported_and_forgotten_so_a_new_one_is_read_from_the_start(tmp_path):
    path = append(tmp_path, 0, step_line(0, 1) + step_line(0, 2))
    tailer = SpoolTailer(tmp_path)
    assert steps_of(tailer.poll()) == [1, 2]
    path.unlink()
    [gone] = tailer.poll()
    assert gone.errors[0].line_no == 0 and "file was removed after 2 lines" in gone.errors[0].message
    assert tailer.offsets == {} and tailer.poll() == []
    append(tmp_path, 0, step_line(0, 1))
    assert steps_of(tailer.poll()) == [1]


def test_a_step_number_beyond_64_bits_is_reported_with_its_line_and_the_rest_is_ingested(tmp_path):
    from msdoctor.core.spool import SpoolTailer
    from msdoctor.wire import encode

    lines = [encode({"v": 1, "type": "step", "rank": 0, "step": i + 1, "loss": 1.0})
             for i in range(3000)]
    lines.insert(10, b'{"v":1,"type":"step","rank":0,"step":9223372036854775808,"loss":1.0}\n')
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    chunks = SpoolTailer(tmp_path).poll()
    assert sum(len(c.steps) for c in chunks if c.steps is not None) == 3000
    errors = [str(e) for c in chunks for e in c.errors]
    assert len(errors) == 1 and errors[0].endswith(
        "rank-0.jsonl:11: field 'step': expected an integer that fits in 64 bits, "
        "got 9223372036854775808")
