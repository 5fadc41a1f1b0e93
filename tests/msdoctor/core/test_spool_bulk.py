"""The spool's bulk decoder, and the replay's typed one, give exactly what the line-by-line
decoder gives, only faster."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import msdoctor.core.spool_bulk as spool_bulk
from msdoctor.core.spool import SpoolTailer
from msdoctor.core.spool_typed import STEP
from msdoctor.wire import encode, make


def read_all(run_dir: Path, bulk: bool, monkeypatch) -> tuple:
    """Every chunk of the spool, read with or without the bulk decoder, and the tailer."""
    with monkeypatch.context() as m:
        if not bulk:
            m.setattr(SpoolTailer, "_decode_bulk", lambda self, *args: None)
        return read_through(SpoolTailer(run_dir))


def read_through(tailer: SpoolTailer) -> tuple:
    """Every chunk ``tailer`` reads until the spool has no more, and the tailer."""
    chunks = []
    while True:
        new = tailer.poll(max_bytes=1 << 30)
        if not new:
            return chunks, tailer
        chunks.extend(new)


def same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_same_events(got: list, expected: list) -> None:
    assert len(got) == len(expected)
    for a, e in zip(got, expected):
        assert list(a) == list(e)
        assert all(same_value(a[k], e[k]) for k in e), (a, e)


def assert_same_chunks(got: list, expected: list) -> None:
    assert len(got) == len(expected)
    for a, e in zip(got, expected):
        assert (a.path, a.rank, a.run) == (e.path, e.rank, e.run)
        assert [str(x) for x in a.errors] == [str(x) for x in e.errors]
        assert_same_events(a.events, e.events)
        assert_same_events(a.others, e.others)
        assert (a.steps is None) == (e.steps is None)
        if e.steps is None:
            continue
        assert a.steps.run == e.steps.run and a.steps.rank == e.steps.rank
        assert a.steps.steps.dtype == np.int64 and a.steps.steps.tolist() == e.steps.steps.tolist()
        np.testing.assert_array_equal(a.steps.t, e.steps.t)
        assert sorted(a.steps.columns) == sorted(e.steps.columns)
        assert sorted(a.steps.masks) == sorted(e.steps.masks)
        for name, column in e.steps.columns.items():
            np.testing.assert_array_equal(a.steps.columns[name], column, err_msg=name)
        for name, mask in e.steps.masks.items():
            np.testing.assert_array_equal(a.steps.masks[name], mask, err_msg=name)


def step(rank: int, n: int, /, **extra) -> dict:
    event = {"v": 1, "type": "step", "rank": rank, "run": "r", "t": 1000.0 + n, "step": n,
             "loss": 2.0 + 1.0 / n, "grad_norm": 1.5, "overflow": False, "tokens": 4096,
             "step_time_s": 0.5, "micro_steps": 1.0}
    event.update(extra)
    return event


# One "twist" per line, from harmless (other shapes, ints for numbers) to wrong (every kind
# of type error the schema knows) and to the cases the bulk decoder hands back.
TWISTS = [
    {}, {}, {}, {}, {"update_ratio": 1e-3}, {"tokens": 4096.0}, {"loss": 3}, {"t": 5},
    {"loss": "nan"}, {"grad_norm": "inf"}, {"loss": "-Infinity"}, {"loss": "1.5"},
    {"loss": True}, {"loss": None}, {"loss": [1.0]}, {"loss": {}}, {"step": 7.0}, {"step": 7.5},
    {"step": True}, {"step": "7"}, {"v": True}, {"v": 2}, {"rank": True}, {"rank": 1.0},
    {"rank": 9}, {"overflow": 1}, {"overflow": 0.0}, {"type": "nope"}, {"run": 3},
    {"t": False}, {"tokens": 1}, {"tokens": 0}, {"micro_steps": True}, {"extra": [1, {}]},
    {"data_wait_s": 0.0}, {"step_time_s": 1}, {"step": 2**62}, {"loss": 2**63},
]
OTHER_LINES = [
    encode(make("heartbeat", 0, t=5.0, step=3, dropped=0)),
    encode(make("run_start", 0, run="r", world_size=1, t=1.0)),
    encode(make("run_start", 0, run="other", world_size=1, t=1.0)),
    encode(make("checkpoint", 0, step=4, path="/x")),
    b'{"v":1,"type":"heartbeat","rank":0,"dropped":1.5}\n',
    b"not json\n", b"\n", b"[1, 2]\n", b"\xff\xfe\n",
]


@st.composite
def spools(draw) -> list:
    lines = []
    for n in range(1, draw(st.integers(1, 60)) + 1):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(OTHER_LINES)))
            continue
        twist = draw(st.sampled_from(TWISTS)) if draw(st.booleans()) else {}
        event = step(0, n, **twist)
        if draw(st.booleans()):
            event.pop(draw(st.sampled_from(["loss", "t", "run", "overflow", "step", "grad_norm"])))
        lines.append(orjson.dumps(event) + b"\n")
    return lines


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spools(), st.sampled_from([3, 64, 2048]))
@example([orjson.dumps({k: v for k, v in step(0, 2, extra=[1, {}]).items() if k != "loss"}) + b"\n",
          orjson.dumps(step(0, 4)) + b"\n"], 64)    # as many keys, an ignored one in place of the loss
def test_bulk_and_line_by_line_decoding_give_the_same_chunks_errors_and_positions(
        tmp_path_factory, monkeypatch, lines, block):
    run_dir = tmp_path_factory.mktemp("run")
    (run_dir / "events").mkdir()
    (run_dir / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    monkeypatch.setattr(spool_bulk, "BULK_LINES", block)      # also exercise several blocks per read
    got, bulk = read_all(run_dir, True, monkeypatch)
    expected, exact = read_all(run_dir, False, monkeypatch)
    assert_same_chunks(got, expected)
    assert bulk.state_dict() == exact.state_dict()


def test_a_clean_spool_is_decoded_in_bulk_without_per_event_checks(tmp_path, monkeypatch):
    lines = [orjson.dumps(step(2, n, **({"update_ratio": 1e-3} if n % 10 == 0 else {}))) + b"\n"
             for n in range(1, 5001)]
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-2.jsonl").write_bytes(b"".join(lines))
    checked = []
    monkeypatch.setattr(spool_bulk, "check_event", lambda event: checked.append(event) or event)
    [chunk] = SpoolTailer(tmp_path).poll(max_bytes=1 << 30)
    assert checked == [] and not chunk.errors
    assert chunk.steps.steps.tolist() == list(range(1, 5001))
    steps, ratio = chunk.steps.series("update_ratio")
    assert steps.tolist() == list(range(10, 5001, 10)) and ratio.tolist() == [1e-3] * 500
    assert "loss" not in chunk.steps.masks and chunk.steps.columns["overflow"].sum() == 0


@pytest.mark.parametrize("twist, message", [
    ({"loss": True},
     "field 'loss': expected a number or one of \"nan\", \"inf\", \"-inf\", got True"),
    ({"v": True}, "field 'v': expected an integer, got True"),
    ({"rank": 1}, "field 'rank': 1 in the file of rank 0; expected 0"),
    ({"overflow": 1}, "field 'overflow': expected true or false, got 1"),
])
def test_one_bad_event_among_thousands_is_reported_as_the_line_by_line_decoder_does(
        tmp_path, twist, message):
    lines = [orjson.dumps(step(0, n, **(twist if n == 1234 else {}))) + b"\n"
             for n in range(1, 3001)]
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    [chunk] = SpoolTailer(tmp_path).poll(max_bytes=1 << 30)
    assert [(e.line_no, e.message) for e in chunk.errors] == [(1234, message)]
    assert 1234 not in chunk.steps.steps.tolist() and len(chunk.steps) == 2999


def test_a_nan_string_in_a_block_is_normalised_like_the_schema_does(tmp_path):
    lines = [orjson.dumps(step(0, n, **({"loss": "nan"} if n == 7 else {}))) + b"\n"
             for n in range(1, 101)]
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    [chunk] = SpoolTailer(tmp_path).poll()
    assert not chunk.errors and math.isnan(chunk.events[6]["loss"])
    assert math.isnan(chunk.steps.columns["loss"][6]) and "loss" not in chunk.steps.masks


def test_only_the_lines_with_nan_strings_leave_the_bulk_path(tmp_path, monkeypatch):
    def twist(n: int) -> dict:
        return {"grad_norm": "inf"} if n % 997 == 0 else {"loss": "nan"} if n % 1999 == 0 else {}

    lines = [orjson.dumps(step(0, n, **twist(n))) + b"\n" for n in range(1, 6001)]
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    checked = []
    real = spool_bulk.check_event
    monkeypatch.setattr(spool_bulk, "check_event", lambda event: checked.append(event) or real(event))
    [chunk] = SpoolTailer(tmp_path).poll(max_bytes=1 << 30)
    assert sorted(e["step"] for e in checked) == sorted(
        n for n in range(1, 6001) if twist(n))
    assert not chunk.errors and chunk.steps.steps.tolist() == list(range(1, 6001))
    grad = chunk.steps.columns["grad_norm"]
    inf_rows = [n - 1 for n in range(1, 6001) if n % 997 == 0]
    assert np.isinf(grad[inf_rows]).all() and np.isfinite(np.delete(grad, inf_rows)).all()
    assert np.isnan(chunk.steps.columns["loss"][1998])


# -- the replay's typed decoder (msgspec structs straight into columns, no step dicts) -----
# Step lines no encoder writes: bytes that are not UTF-8 or escape a lone surrogate in a
# field the structs skip or keep, a byte order mark, NaN tokens, duplicate keys, huge ints.
ODD_STEP_LINES = [
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":1.5,"note":"\xff\xfe"}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":1.5,"note":"\\ud800"}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"run":"\\udfff","loss":1.5}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"run":"r\xc3","loss":1.5}\n',
    b'\xef\xbb\xbf{"v":1,"type":"step","rank":0,"step":5,"loss":1.5}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":NaN}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":1e999}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":"nan","loss":2.5}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":2.5,"loss":"nan"}\n',
    b'{"v":1,"type":"heartbeat","type":"step","rank":0,"step":5,"loss":2.5}\n',
    b'{"v":1,"type":"step","type":"heartbeat","rank":0,"step":5}\n',
    b'{"v":1,"type":"step","rank":0,"step":18446744073709551615,"loss":1}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":123456789012345678901234567890}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"loss":-0.0,"tokens":-0}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"overflow":null}\n',
    b'{"v":1,"type":"step","rank":0,"step":5,"t":1e-400,"loss":4.9e-324}\n',
    b' {"step":6, "rank":0, "type":"step", "v":1, "grad_norm":2} \r\n',
    *(b'{"v":1,"type":"step","rank":0,"step":5,"note":"' + text + b'"}\n'
      for text in (b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xc3\xa9")),
]


def read_typed(run_dir: Path) -> tuple:
    """Every chunk of the spool as a replay reads it (no step dicts), and the tailer."""
    return read_through(SpoolTailer(run_dir, step_events=False))


def assert_same_bits(got: list, expected: list) -> None:
    """The step columns bit for bit (-0.0 is not 0.0)."""
    for a, e in zip(got, expected):
        for name, column in (e.steps.columns.items() if e.steps is not None else ()):
            assert a.steps.columns[name].tobytes() == column.tobytes(), name
        if e.steps is not None:
            assert a.steps.t.tobytes() == e.steps.t.tobytes()


def as_replay_reads(chunks: list, got: list) -> list:
    """The exact decoder's chunks with a step event's dict replaced by STEP where the typed
    read has STEP (a read it hands back keeps its dicts)."""
    for chunk, typed in zip(chunks, got):
        if len(chunk.events) == len(typed.events):
            chunk.events = [STEP if t is STEP and e["type"] == "step" else e
                            for e, t in zip(chunk.events, typed.events)]
    return chunks


@st.composite
def typed_spools(draw) -> list:
    lines = draw(spools())
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(ODD_STEP_LINES)))
    return lines


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(typed_spools())
def test_typed_and_line_by_line_decoding_give_the_same_batches_errors_and_positions(
        tmp_path_factory, monkeypatch, lines):
    run_dir = tmp_path_factory.mktemp("run")
    (run_dir / "events").mkdir()
    (run_dir / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    got, typed = read_typed(run_dir)
    expected, exact = read_all(run_dir, False, monkeypatch)
    assert_same_chunks(got, as_replay_reads(expected, got))
    assert_same_bits(got, expected)
    assert typed.state_dict() == exact.state_dict()


numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**70, 2**70),
                    st.floats(min_value=-1e-300, max_value=1e-300), st.just(2**53 + 1))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(numbers, numbers), min_size=1, max_size=40))
def test_typed_decoding_gives_the_same_floats_as_the_exact_decoder(
        tmp_path_factory, monkeypatch, values):
    run_dir = tmp_path_factory.mktemp("run")
    (run_dir / "events").mkdir()
    (run_dir / "events" / "rank-0.jsonl").write_bytes(b"".join(
        json.dumps(step(0, n, loss=a, lr=b)).encode() + b"\n"       # ints beyond 64 bits too
        for n, (a, b) in enumerate(values, 1)))
    got, _ = read_typed(run_dir)
    expected, _ = read_all(run_dir, False, monkeypatch)
    assert_same_chunks(got, as_replay_reads(expected, got))
    assert_same_bits(got, expected)


def test_a_clean_spool_is_read_for_replay_without_a_dict_per_step(tmp_path):
    lines = [orjson.dumps(step(1, n, **({"update_ratio": 1e-3} if n % 10 == 0 else {}))) + b"\n"
             for n in range(1, 3001)]
    lines.insert(0, encode(make("run_start", 1, run="r", world_size=2, t=1.0)))
    lines.insert(1500, encode(make("heartbeat", 1, t=5.0, step=1499, dropped=0)))
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-1.jsonl").write_bytes(b"".join(lines))
    [chunk] = SpoolTailer(tmp_path, step_events=False).poll(max_bytes=1 << 30)
    assert [e["type"] for e in chunk.others] == ["run_start", "heartbeat"]
    assert sum(e is STEP for e in chunk.events) == 3000 and len(chunk.events) == 3002
    assert chunk.steps.steps.tolist() == list(range(1, 3001)) and not chunk.errors
    steps, ratio = chunk.steps.series("update_ratio")
    assert steps.tolist() == list(range(10, 3001, 10)) and ratio.tolist() == [1e-3] * 300


def test_a_replay_reads_negative_zeros_and_huge_integers_as_the_exact_decoder_does(
        tmp_path, monkeypatch):
    lines = [b'{"v":1,"type":"step","rank":0,"step":%d,"loss":-0,"lr":-0.0,"tokens":%s,'
             b'"grad_norm":1E+2,"step_time_s":%s}\n' % (n, big, small)
             for n, (big, small) in enumerate([(b"9007199254740993", b"5e-324"),
                                               (b"-18446744073709551617", b"2.5e-308"),
                                               (b"123456789012345678901234567890", b"-0E0")], 1)]
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    got, _ = read_typed(tmp_path)
    expected, _ = read_all(tmp_path, False, monkeypatch)
    assert all(e is STEP for e in got[0].events)          # the typed path took the read
    assert_same_chunks(got, as_replay_reads(expected, got))
    assert_same_bits(got, expected)
