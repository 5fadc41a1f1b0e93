"""The spool's fast path: a read of valid events decoded in bulk.

Step events are parsed with orjson, grouped by shape, validated and columnized a block at a
time (:func:`msdoctor.core.batch.wire_steps`); other events, and step events holding
something to normalise ("nan") or to reject, are checked one by one. Anything unusual
returns None and the exact line-by-line decoder of :mod:`msdoctor.core.spool` does the
work; ``tests/msdoctor/core/test_spool_bulk.py`` proves both give the same result.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch, assemble, step_block, wire_steps
from msdoctor.wire.codec import loads
from msdoctor.wire.schema import FIELDS, INT64_MAX, INT64_MIN, EventError, validate

try:  # the bulk path parses with orjson directly (errors are left to the exact path)
    from orjson import loads as _raw_loads
except ImportError:  # pragma: no cover - exercised only without orjson
    _raw_loads = None  # type: ignore[assignment]

MAX_BULK_SHAPES = 64              # more distinct key tuples in one read: decode line by line
BULK_LINES = 2048                 # lines parsed and checked together by the bulk decoder


def _fast_decode_table() -> Dict[str, Tuple[Dict[str, tuple], frozenset]]:
    """Per event type: field -> exact types that validate() accepts unchanged; required fields."""
    accept = {"int": (int,), "number": (float, int), "bool": (bool,), "string": (str,),
              "object": (dict,), "numbers": (list,), "names": (list,)}
    table = {}
    for kind, spec in FIELDS.items():
        types = {name: accept[fkind] for name, (fkind, _) in spec.items()}
        required = frozenset(name for name, (_, req) in spec.items() if req)
        table[kind] = (types, required)
    return table


_FAST = _fast_decode_table()


_ACCEPTED: Dict[tuple, bool] = {}   # (type, keys, value types) -> passes the fast check
_ACCEPTED_MAX = 1024


def _fast_ok(kind: str, event: Dict[str, Any]) -> bool:
    entry = _FAST.get(kind)
    if entry is None:
        return False
    types, required = entry
    for name, value in event.items():
        allowed = types.get(name)
        if allowed is not None and type(value) not in allowed:
            return False
    return required.issubset(event.keys())


def decode_line(line: bytes) -> Dict[str, Any]:
    """Same result as :func:`msdoctor.wire.decode`, faster for the common case.

    An event whose known fields already have their exact wire types needs no
    normalising: such shapes (type, field names, value types) are checked once
    and remembered. Anything else (non-finite strings, integral floats, errors)
    goes through :func:`msdoctor.wire.schema.validate`, so normalising and
    error messages stay the schema's own.
    """
    return check_event(loads(line))


def check_event(event: Any) -> Dict[str, Any]:
    """:func:`decode_line` after the JSON parse: validate (and normalise) a parsed event."""
    if type(event) is dict and event.get("v") == 1:
        kind = event.get("type")
        if type(kind) is str:
            shape = (kind, tuple(event), tuple(map(type, event.values())))
            ok = _ACCEPTED.get(shape)
            if ok is None:
                if len(_ACCEPTED) >= _ACCEPTED_MAX:
                    _ACCEPTED.clear()
                ok = _ACCEPTED[shape] = _fast_ok(kind, event)
            # ints must fit in 64 bits (numpy columns): the one check a shape cannot carry
            if ok and kind == "step" and INT64_MIN <= event["step"] <= INT64_MAX \
                    and INT64_MIN <= event["rank"] <= INT64_MAX:
                return event
    return validate(event)


def _groups(events: List[Dict[str, Any]], by_keys: bool = False) -> Optional[List[Any]]:
    """Row indices of events with the same number of keys (or the same key tuple);
    ``[None]`` when that is every row; None when there are too many kinds."""
    n = len(events)
    shapes: List[Any] = list(map(tuple, events)) if by_keys else list(map(len, events))
    if shapes.count(shapes[0]) == n:
        return [None]
    unique = list(dict.fromkeys(shapes))
    if len(unique) > MAX_BULK_SHAPES:
        return None
    code = {shape: i for i, shape in enumerate(unique)}
    codes = np.fromiter(map(code.__getitem__, shapes), dtype=np.intp, count=n)
    return [np.flatnonzero(codes == i) for i in range(len(unique))]


def decode_bulk(lines: List[bytes], rank: int, run: str, default_run: str
                ) -> Optional[Tuple[List[Dict[str, Any]], List[Dict[str, Any]],
                                    Optional[StepBatch], str, bool]]:
    """The common case in bulk: every line a valid event of this file's rank.

    Lines are parsed in cache-sized blocks, grouped by key count (then key
    tuple), and each group of step events is validated and columnized as a
    block (:func:`wire_steps`); other events, and the step events holding
    something to normalise ("nan") or to reject, are checked one by one.
    Anything unusual (a bad line, a wrong rank, a new run starting mid-read)
    returns None *before* any state changes, and the exact line-by-line
    decoder does the work, with its own errors.
    """
    n = len(lines)
    if _raw_loads is None or not n:
        return None
    events: List[Dict[str, Any]] = []
    is_step = np.zeros(n, dtype=bool)
    blocks: List[Any] = []               # (line rows or None, steps, t, tables)
    single: List[int] = []               # lines checked one by one
    for start in range(0, n, BULK_LINES):   # blocks small enough to stay in the CPU cache
        part = _bulk_part(lines[start:start + BULK_LINES], rank, start, n,
                               is_step, blocks, single)
        if part is None:
            return None
        events.extend(part)
    started = False
    if single:
        single.sort()
        loose = []
        for i in single:
            try:
                event = check_event(events[i])
            except EventError:
                return None
            if event["rank"] != rank:
                return None
            if event["type"] == "step":
                is_step[i] = True
                loose.append(i)
            elif event["type"] == "run_start":
                new_run = event.get("run") or default_run
                if new_run != run and i > 0:     # a new run mid-read: split, line by line
                    return None
                run, started = new_run, True
        if loose:
            blocks.append((np.asarray(loose, dtype=np.intp),
                           *step_block([events[i] for i in loose])))
    others = [events[i] for i in np.flatnonzero(~is_step).tolist()]
    steps = batch_of_blocks(run, rank, is_step, blocks) if blocks else None
    return events, others, steps, run, started

def _bulk_part(lines: List[bytes], rank: int, start: int, total: int, is_step: np.ndarray,
               blocks: list, single: List[int]) -> Optional[List[Dict[str, Any]]]:
    """Parse lines ``start:start + len(lines)`` of a read; add their step blocks."""
    try:
        events = list(map(_raw_loads, lines))
    except ValueError:
        return None
    if set(map(type, events)) != {dict}:
        return None
    groups = _groups(events)
    if groups is None:
        return None
    n = len(events)
    for index in groups:
        rows = events if index is None else [events[i] for i in index.tolist()]
        try:
            block = wire_steps(rows, tuple(rows[0]), rank)
        except KeyError:                 # same length, other keys: split by key tuple
            more = _groups(rows, by_keys=True)
            if more is None or more == [None]:
                return None
            groups.extend(sub if index is None else index[sub] for sub in more)
            continue
        lines_at = (None if n == total else np.arange(start, start + n)) if index is None \
            else index + start
        if block is None:
            single.extend(range(start, start + n) if lines_at is None else lines_at.tolist())
            continue
        *columns, good = block
        if good is not None:             # rows with "nan" & co: those one by one
            at = np.arange(start, start + n) if lines_at is None else lines_at
            odd = np.ones(len(rows), dtype=bool)
            odd[good] = False
            single.extend(at[odd].tolist())
            lines_at = at[good]
        blocks.append((lines_at, *columns))
        is_step[slice(start, start + n) if lines_at is None else lines_at] = True
    return events

def batch_of_blocks(run: str, rank: int, is_step: np.ndarray, blocks: list) -> StepBatch:
    """One StepBatch from blocks of step lines (rows given as line numbers in the read)."""
    if len(blocks) == 1 and blocks[0][0] is None:
        _, steps, t, tables = blocks[0]
        return assemble(run, rank, steps, t, tables)
    where = np.cumsum(is_step) - 1           # line -> row among the step lines
    total = int(where[-1]) + 1
    steps = np.empty(total, dtype=np.int64)
    t = np.empty(total)
    tables = []
    for lines, b_steps, b_t, b_tables in blocks:
        rows = where[lines]
        steps[rows], t[rows] = b_steps, b_t
        for sub, names, table in b_tables:
            tables.append((rows if sub is None else rows[sub], names, table))
    return assemble(run, rank, steps, t, tables)
