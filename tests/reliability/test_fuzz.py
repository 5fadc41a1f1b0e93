"""Fuzzing (hypothesis) of everything that reads untrusted input: the event decoders, the spool
tailer + store, the rule loader, the expression parser, and every reader of a run directory
with file-system objects in place of its files. Only the project's typed errors
(``EventError``, ``RuleSetError``, ``ExprError``, ``MsdoctorError``) may come out, never
another exception, and nothing may hang or spin. Then the bounds: nesting depth, the number
of run ids, timestamps and step numbers at the limits (the pipeline with the shipped rules,
the MindFormers reader), and HTTP framing (random request heads and bodies against the real
``msdoctor serve``)."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.clock import MAX_GAP_TICKS, gap_ticks
from msdoctor.core.engine.errors import ExprError, RuleSetError
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.runlock import RunLock
from msdoctor.core.spool import decode_line
from msdoctor.core.views import runs
from msdoctor.http.framing import MAX_BODY
from msdoctor.replay.mindformers import parse_block
from msdoctor.replay.recording import Recording
from msdoctor.wire import EventError, decode, encode, make
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.schema import MAX_DEPTH
from tests.reliability.helpers import Serve, http_exchange, http_request, http_responses, wait_for
from trainer_hooks.callback import _read_stop as read_stop

# ast.parse warns about e.g. "1and" before the parser rejects it; not an error
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")
FUZZ = settings(deadline=None, max_examples=2000, suppress_health_check=list(HealthCheck))
KINDS = ["run_start", "step", "checkpoint", "run_end", "heartbeat", "stop", "other"]
FIELDS = ["v", "type", "rank", "step", "t", "run", "loss", "grad_norm", "loss_scale", "lr",
          "tokens", "step_time_s", "data_wait_s", "update_ratio", "overflow", "status", "config",
          "expect", "world_size", "path", "reason", "micro_steps", "mem_host_rss_bytes", "x"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["nan", "inf", "-inf", "", "1", "completed", "failed"]),
                    st.text(max_size=8))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)
EVENTS = st.builds(
    lambda kind, rank, extra, v: {"v": v, "type": kind, "rank": rank, **extra},
    st.sampled_from(KINDS), st.one_of(st.just(0), st.integers(-3, 3), SCALARS),
    st.dictionaries(st.sampled_from(FIELDS), st.one_of(SCALARS, JSONISH), max_size=6),
    st.one_of(st.just(1), SCALARS))


def mutate(data: bytes, rnd: random.Random) -> bytes:
    """Flip, cut, duplicate or insert bytes of a valid line."""
    data = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op, i = rnd.randrange(4), rnd.randrange(len(data) + 1)
        if op == 0 and i < len(data):
            data[i] = rnd.randrange(256)
        elif op == 1:
            del data[i:i + rnd.randint(1, 8)]
        elif op == 2:
            data[i:i] = data[max(0, i - 8):i]
        else:
            data[i:i] = rnd.choice([b"\xff", b"\x00", b'"', b"{", b"}", b",", b"nan", b"1e999",
                                    b"\\ud800", b"[", b"-"])
    return bytes(data)


@FUZZ
@given(st.binary(max_size=300))
def test_the_event_decoders_raise_only_event_error_on_random_bytes(line):
    for decoder in (decode, decode_line):
        try:
            event = decoder(line)
        except EventError:
            continue
        assert isinstance(event, dict) and event["v"] == 1


@FUZZ
@given(EVENTS, st.randoms(use_true_random=False))
def test_the_event_decoders_raise_only_event_error_on_odd_and_mutated_events(event, rnd):
    line = json.dumps(event).encode()
    for candidate in (line, mutate(line, rnd)):
        results = []
        for decoder in (decode, decode_line):
            try:
                results.append(("ok", decoder(candidate)))
            except EventError as exc:
                results.append(("error", str(exc)))
        assert results[0][0] == results[1][0]          # both paths agree on good vs bad


@settings(deadline=None, max_examples=400, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(st.binary(max_size=120),
                          EVENTS.map(lambda e: json.dumps(e).encode() + b"\n")), max_size=40),
       st.randoms(use_true_random=False))
def test_the_tailer_and_the_store_survive_any_spool_bytes(parts, rnd):
    good = [encode(make("step", 0, step=n, t=float(n), loss=1.0)) for n in range(1, 4)]
    blob = b"".join(good + [mutate(p, rnd) if p and rnd.random() < 0.3 else p for p in parts]
                    + [encode(make("step", 0, step=10**6, t=1.0, loss=2.0))])
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp) / "events" / "rank-0.jsonl"
        spool.parent.mkdir()
        cut = rnd.randrange(len(blob) + 1)
        spool.write_bytes(blob[:cut])                   # written in two pieces, cut anywhere
        sidecar = Pipeline(tmp, persist=False)
        sidecar.poll_once()
        with open(spool, "ab") as fh:
            fh.write(blob[cut:])
        while sidecar.poll_once():
            pass
        ranks = list(sidecar.store.ranks())
        assert ranks and any(state.last_step is not None for _, _, state in ranks)


SHIPPED = sorted(default_rules_dir().glob("*.yaml"))
RULES = load_rules([default_rules_dir()])


def load_text(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rules.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_rules([path])
        except RuleSetError as exc:
            assert exc.errors and all(str(path) in str(e) for e in exc.errors)


@settings(deadline=None, max_examples=1000, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=400))
def test_the_rule_loader_raises_only_rule_set_error_on_random_text(text):
    load_text(text)


@settings(deadline=None, max_examples=600, suppress_health_check=list(HealthCheck))
@given(st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["version", "groups", "name", "rules", "alert", "expr", "for",
                                     "keep_firing_for", "labels", "annotations", "severity",
                                     "summary", "action", "values", "value", "x"]),
                    inner, max_size=5)), max_leaves=20))
def test_the_rule_loader_raises_only_rule_set_error_on_random_yaml_documents(doc):
    import yaml
    load_text(yaml.safe_dump(doc))


@settings(deadline=None, max_examples=800, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SHIPPED), st.randoms(use_true_random=False))
def test_the_rule_loader_raises_only_rule_set_error_on_mutated_shipped_rules(path, rnd):
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(lines))
        op = rnd.randrange(5)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines[i] = " " * rnd.randint(0, 6) + lines[i].lstrip()        # break indentation
        elif op == 2:
            k = rnd.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:k] + rnd.choice(["__import__('os')", ".__class__", "**99",
                                                  "(" * 50, "{{", "[", ": ", "'", "lambda: 1",
                                                  "&anchor", "*alias", "!!python/object"]) \
                + lines[i][k:]
        elif op == 3:
            lines.insert(i, lines[rnd.randrange(len(lines))])                # duplicate a line
        else:
            k = rnd.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:k]                                          # cut a line
    load_text("".join(lines))


TOKENS = ["loss", "grad_norm", "mean(", "robust_z(", "nonfinite(", "(", ")", ",", "+", "-",
          "*", "/", "**", "%", "<", ">=", "==", "and", "or", "not", "1", "2.5", "1e308", "nan",
          "inf", "true", "__import__", ".", "[", "]", "lambda", ":", "for", "in", "x", "'s'",
          "9", " ", "expected(", "config(", "rank_median(", "seconds_since_step()"]


@settings(deadline=None, max_examples=3000, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join) | st.text(max_size=60))
def test_the_expression_parser_raises_only_expr_error(text):
    try:
        parse(text)
    except ExprError as exc:
        assert str(exc)


# -- filesystem objects in place of files ------------------------------------------------
PLACES = ["events/rank-0.jsonl", "events/rank-1.jsonl", "events/rank-01.jsonl", "alerts.jsonl",
          ".msdoctor/snapshot.npz", "control/stop.json", "events"]
OBJECTS = ["absent", "spool", "garbage", "directory", "FIFO", "link to itself", "link loop",
           "link to /dev/zero", "dangling link", "link to a directory"]
GOOD_LINES = b"".join(encode(make("step", 0, step=n, t=float(n), loss=1.0)) for n in range(1, 4))


class Hung(Exception):
    """A file-system object made a reader wait."""


def place(path: Path, kind: str, rnd: random.Random) -> None:
    """Put an object of ``kind`` at ``path`` (replacing what is there), when its parent is
    (or can be made) a directory."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:                                    # "events" is something else now
        return
    if path.is_symlink() or path.is_file() or path.is_fifo():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if kind == "spool":
        path.write_bytes(GOOD_LINES)
    elif kind == "garbage":
        path.write_bytes(bytes(rnd.randrange(256) for _ in range(rnd.randrange(200))))
    elif kind == "directory":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "link to itself":
        path.symlink_to(path.name)
    elif kind == "link loop":
        other = path.with_name(path.name + ".other")
        if not other.is_symlink():
            other.symlink_to(path.name)
        path.symlink_to(other.name)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling link":
        path.symlink_to(path.name + ".missing")
    elif kind == "link to a directory":
        path.symlink_to("/")


def guarded(what: str, call, *args):
    """``call(*args)``; a reader that blocks for 20 s fails the test instead of hanging it."""
    def alarm(_signum, _frame):
        raise Hung(f"{what} blocked on a file-system object")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    try:
        return call(*args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def read_everything(run_dir: Path) -> None:
    """Everything that reads a run directory: serve's pipeline (journal, snapshot, lock),
    replay's drain, the journal feed and the hook's stop-file reader."""
    lock = RunLock(run_dir)
    try:
        lock.acquire()
    except (MsdoctorError, OSError):
        pass
    try:
        pipeline = Pipeline(run_dir, rules=RULES, journal=True)
    except MsdoctorError as exc:                       # the journal is not a file: refused
        assert "alerts.jsonl" in str(exc) and "expected a regular file" in str(exc)
        pipeline = Pipeline(run_dir, rules=RULES, persist=False)
    for _ in range(8):                                 # no spin: polls settle
        if not pipeline.poll_once():
            break
    else:
        raise AssertionError("the tailer reports something on every poll")
    pipeline.save_snapshot()
    pipeline.drain()
    AlertFeed(run_dir / "alerts.jsonl").poll()
    read_stop(str(run_dir / "control" / "stop.json"))
    lock.release()


@settings(deadline=None, max_examples=150, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(PLACES), st.sampled_from(OBJECTS), max_size=5),
       st.dictionaries(st.sampled_from(PLACES), st.sampled_from(OBJECTS), max_size=2),
       st.randoms(use_true_random=False))
def test_no_file_system_object_in_a_run_directory_hangs_spins_or_crashes_a_reader(first, then,
                                                                                 rnd):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        (run_dir / "events").mkdir(parents=True)
        for where, kind in first.items():
            place(run_dir / where, kind, rnd)
        guarded("a first read", read_everything, run_dir)
        for where, kind in then.items():              # replaced after a first read
            place(run_dir / where, kind, rnd)
        guarded("a second read", read_everything, run_dir)

# -- bounds: nesting depth, run ids, timestamps, step numbers ----------------------------
RULES = load_rules([default_rules_dir()])
BOUNDS = settings(deadline=None, max_examples=150, suppress_health_check=list(HealthCheck))


def nest(depth: int, kind: str) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


def spool_of(tmp: str, lines: list) -> None:
    events = Path(tmp) / "events"
    events.mkdir(exist_ok=True)
    (events / "rank-0.jsonl").write_bytes(b"".join(lines))


@BOUNDS
@given(st.integers(0, 600), st.sampled_from(["dict", "list"]),
       st.sampled_from(["config", "expect", "x"]))
def test_values_nested_at_and_beyond_the_bound_are_kept_or_refused_and_the_state_saves(
        depth, kind, name):
    event = {"v": 1, "type": "run_start", "rank": 0, "run": "r", name: nest(depth, kind)}
    line = json.dumps(event).encode()
    deep = depth > MAX_DEPTH or (name != "x" and (kind == "list" or depth == 0))
    for decoder in (decode, decode_line):
        try:
            decoder(line)
            assert not deep
        except EventError as exc:
            assert deep and repr(name) in str(exc)
    with tempfile.TemporaryDirectory() as tmp:
        spool_of(tmp, [line + b"\n", encode(make("step", 0, step=1, t=1.0, loss=1.0))])
        sidecar = Pipeline(tmp, rules=RULES)
        sidecar.poll_once()
        orjson.dumps(runs(sidecar.store, sidecar.alerts).to_json())
        assert sidecar.save_snapshot() is not None and sidecar.snapshot_error is None


@BOUNDS
@given(st.lists(st.integers(0, 150), max_size=200), st.integers(1, 40))
def test_any_number_of_run_ids_keeps_at_most_the_bound_and_counts_each_refused_event(ids, bound):
    kept: list = []
    refused = 0
    for i in ids:                             # what the bound must do, event by event
        if f"r{i}" in kept or len(kept) < bound:
            kept += [] if f"r{i}" in kept else [f"r{i}"]
        else:
            refused += 2
    with tempfile.TemporaryDirectory() as tmp:
        spool_of(tmp, [b for n, i in enumerate(ids) for b in (
            encode(make("run_start", 0, t=1.0, run=f"r{i}")),
            encode(make("step", 0, step=n + 1, t=1.0, loss=1.0)))])
        sidecar = Pipeline(tmp, persist=False, max_runs=bound)
        sidecar.drain()
        assert sorted(sidecar.store.runs) == sorted(kept)
        assert sidecar.run_limit.refused_events == refused


TIMES = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                  st.sampled_from([0.0, 1.0, 1.7e9, 1.7e12, 253402300799.0, 1e300, -1e300]))
STEPS = st.one_of(st.integers(-2**63, 2**63 - 1),
                  st.sampled_from([2**63 - 1, 2**63 - 2, -2**63, 0, 1]))


@settings(deadline=None, max_examples=500, suppress_health_check=list(HealthCheck))
@given(TIMES, TIMES)
def test_the_ticks_of_a_pause_are_bounded_for_any_two_times(before, after):
    ticks = gap_ticks(before, after)
    assert ticks.shape[0] <= MAX_GAP_TICKS + 1
    if ticks.shape[0]:
        assert np.isfinite(ticks).all() and before <= ticks.min() and ticks.max() <= after


@BOUNDS
@given(st.lists(st.tuples(STEPS, TIMES), min_size=1, max_size=12))
def test_steps_and_timestamps_at_the_limits_run_through_the_rules_in_bounded_time(rows):
    rows = sorted(rows, key=lambda r: r[0])
    with tempfile.TemporaryDirectory() as tmp:
        spool_of(tmp, [encode(make("step", 0, step=s, t=t, loss=1.0 + k / 10))
                       for k, (s, t) in enumerate(rows)])
        sidecar = Pipeline(tmp, rules=RULES, persist=False)
        sidecar.drain()
        sidecar.finish()
        assert sidecar.store.runs[Path(tmp).resolve().name].ranks[0].counters["steps"] == len(rows)


DIGITS = st.one_of(st.integers(0, 10**25).map(str),
                   st.sampled_from(["9223372036854775807", "9223372036854775808", "0" * 30 + "5"]))
MF = ("2024-05-01 10:00:{s:02d},123 - mindformers[callback.py:323] - INFO - {{ Epoch:[{e}/"
      "{ee}], step:[{st}/{pe}], loss:[2.5/2.5], per_step_time: 1000ms, lr: 1e-4, overflow cond: "
      "False, loss_scale: 1.0, global_norm: [1.0]")


@BOUNDS
@given(st.lists(st.tuples(DIGITS, DIGITS, DIGITS), min_size=1, max_size=20))
def test_mindformers_step_numbers_at_the_limits_are_exact_or_a_located_error(rows):
    text = "\n".join(MF.format(s=k, e=e, ee=e, st=s, pe=p) for k, (e, s, p) in enumerate(rows))
    out = Recording("mindformers")
    block = parse_block(text + "\n", "info.log", 1, out, None)
    want = [(int(e) - 1) * int(p) + int(s) for e, s, p in rows]
    fits = [v for v in want if -2**63 <= v < 2**63]
    assert ([] if block is None else block.steps.tolist()) == fits
    bad = [f"info.log:{k + 1}:" for k, v in enumerate(want) if not -2**63 <= v < 2**63]
    assert [e.split(" ")[0] for e in out.problems.examples] == bad


# -- HTTP framing: random request heads and bodies against the real ``msdoctor serve`` --------
@pytest.fixture(scope="module")
def http_sidecar(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("http-fuzz")
    (tmp / "run" / "events").mkdir(parents=True)
    (tmp / "run" / "events" / "rank-0.jsonl").write_bytes(
        encode(make("run_start", 0, t=1.0, run="run"))
        + encode(make("step", 0, step=1, t=1.0, loss=1.0)))
    serve = Serve(tmp / "run", tmp / "serve.log")
    try:
        assert wait_for(serve.up, 60), serve.text()
        yield serve
    finally:
        serve.stop()


SENTINEL = http_request("/-/healthy", "Host: 127.0.0.1", "Connection: close")
LENGTHS = st.one_of(st.none(), st.integers(0, 2000), st.integers(MAX_BODY - 2, MAX_BODY + 2),
                    st.integers(MAX_BODY + 3, 10**12),
                    st.sampled_from(["-1", "0x10", "1e3", "", " 5", "+5", "\u0663", "5, 5"]),
                    st.lists(st.integers(0, 20), min_size=2, max_size=3))
HEADER_TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e,
                                    blacklist_characters=":"), min_size=1, max_size=20)


def body_framing(length):
    """(headers, refused status or None, declared length) for one Content-Length choice."""
    if length is None:
        return [], None, 0
    if isinstance(length, list):
        ok = len(set(length)) == 1
        return [f"Content-Length: {n}" for n in length], None if ok else 400, length[0]
    if isinstance(length, str):
        text = length.strip()
        ok = text.isdigit() and text.isascii()
        return [f"Content-Length: {length}"], None if ok else 400, int(text) if ok else 0
    return [f"Content-Length: {length}"], 413 if length > MAX_BODY else None, length


@pytest.mark.slow
@settings(deadline=None, max_examples=250, suppress_health_check=list(HealthCheck))
@given(method=st.sampled_from(["GET", "POST", "DELETE", "OPTIONS", "PATCH"]),
       path=st.sampled_from(["/-/healthy", "/metrics", "/api/v1/status", "/api/v1/runs",
                             "/nowhere", "/api/v1/runs/run/ranks/0/series?signal=loss,loss"]),
       host=st.sampled_from([None, "127.0.0.1", "localhost:9089", "[::1]", "evil.example"]),
       length=LENGTHS, chunked=st.booleans(),
       junk=st.lists(st.tuples(HEADER_TEXT, HEADER_TEXT), max_size=4),
       smuggle=st.booleans(), rnd=st.randoms(use_true_random=False))
def test_any_request_framing_gets_one_answer_and_its_body_is_never_taken_for_a_request(
        http_sidecar, method, path, host, length, chunked, junk, smuggle, rnd):
    headers, refused, declared = body_framing(length)
    if chunked:
        headers.append("Transfer-Encoding: chunked")
        refused = 400
    if host is not None:
        headers.append(f"Host: {host}")
    headers += [f"X-{name}: {value}" for name, value in junk]
    body = b""
    if refused is None and declared:
        inner = http_request("/api/v1/status", "Host: 127.0.0.1") if smuggle else b""
        body = (inner + bytes(rnd.randrange(256) for _ in range(declared)))[:declared]
    raw = http_exchange(http_sidecar.port, http_request(path, *headers, method=method,
                                                        body=body), then=SENTINEL)
    got = http_responses(raw)
    assert got and all(status < 500 for status, _, _ in got), got
    if refused is not None:
        assert [status for status, _, _ in got] == [refused]
        assert got[0][1]["connection"] == "close"
    elif host == "evil.example":
        assert [status for status, _, _ in got] == [421]
    else:
        assert len(got) == 2 and got[1][:1] == (200,), got     # the request, the sentinel
        assert got[0][0] != 400 or path.startswith("/api"), got
