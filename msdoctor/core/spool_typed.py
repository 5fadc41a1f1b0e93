"""The replay's fast path: step lines decoded by msgspec straight into columns, no dicts.

A replay needs the step events only as columns (:class:`~msdoctor.core.batch.StepBatch`);
the live sidecar's store needs them as dicts too. A :class:`~msdoctor.core.spool.SpoolTailer`
with ``step_events`` off decodes a read's lines with a msgspec decoder of the step schema
(a typed struct per line, built from :data:`msdoctor.wire.schema.FIELDS`: what the schema
accepts unchanged, and nothing else), and the structs' fields into a float table in one
pass in C. The chunk's ``events`` holds :data:`STEP` where a step event was; the other
events, and the step events holding something to normalise ("nan", "inf"), are parsed and
checked one by one as the bulk decoder does.

Anything else (a wrong type, an integral float for an int, a bad line, bytes that are not
UTF-8, a wrong rank, a new run mid-read) returns None before any state
changes, and :func:`msdoctor.core.spool_bulk.decode_bulk` does the work (then the exact
line-by-line decoder). ``tests/msdoctor/core/test_spool_bulk.py`` proves the three give the
same batches, events, errors and positions. Without msgspec (an optional dependency at import
time) this path is off.
"""
from __future__ import annotations

from operator import attrgetter
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch, Table, step_block
from msdoctor.core.spool_bulk import batch_of_blocks, check_event
from msdoctor.wire.schema import FIELDS, EventError

try:
    import msgspec
    from orjson import loads as _raw_loads
except ImportError:  # pragma: no cover - exercised only without msgspec or orjson
    msgspec = None  # type: ignore[assignment]

#: Stands for a step event in ``Chunk.events`` (its values are in ``Chunk.steps``).
STEP: Mapping[str, Any] = MappingProxyType({"type": "step"})

#: Field kind of the schema -> the one Python type msgspec takes for it (a JSON number of
#: either kind becomes a float; ints, bools, strings, objects and arrays only as themselves).
_TYPES = {"int": int, "number": float, "bool": bool, "string": str, "object": dict,
          "numbers": list, "names": list}


def _decoder() -> Any:
    """A msgspec decoder of one step line into a struct, or None (no msgspec, or a schema
    field of a kind without a type here). Optional fields default to NaN: JSON has no NaN
    number, so NaN in a column means "not recorded"."""
    if msgspec is None:
        return None
    fields = []
    for name, (kind, required) in FIELDS["step"].items():
        if kind not in _TYPES:
            return None
        fields.append((name, _TYPES[kind]) if required else (name, _TYPES[kind], float("nan")))
    fields.sort(key=len)                 # required fields first
    struct = msgspec.defstruct("WireStep", fields, gc=False)
    return msgspec.json.Decoder(struct)


_DECODER = _decoder()
#: The float columns of a step: its time first, then the signals and the overflow flag.
_NUMS = tuple(name for name, (kind, _) in FIELDS["step"].items() if kind in ("number", "bool"))
_COLUMNS = ("t",) + tuple(name for name in _NUMS if name != "t")
_get_columns = attrgetter(*_COLUMNS)
_get_type, _get_v, _get_rank, _get_step = (attrgetter(name) for name in ("type", "v", "rank",
                                                                         "step"))


def decode_typed(lines: List[bytes], rank: int, run: str, default_run: str
                 ) -> Optional[Tuple[List[Any], List[Dict[str, Any]], Optional[StepBatch],
                                     str, bool]]:
    """``(events, others, steps, run, started)`` of a read as
    :func:`~msdoctor.core.spool_bulk.decode_bulk` gives them, except that ``events`` holds
    :data:`STEP` for each step line the structs took; None when this path does not take
    the read."""
    if _DECODER is None or not lines or not all(map(_utf8, lines)):
        return None
    decode, error = _DECODER.decode, msgspec.DecodeError
    rows: List[Any] = []
    at: List[int] = []
    rest: List[int] = []
    for i, line in enumerate(lines):
        try:
            row = decode(line)
        except error:                    # another event type, or something to look at
            rest.append(i)
            continue
        if row.type == "step":
            rows.append(row)
            at.append(i)
        else:
            rest.append(i)
    events: List[Any] = [STEP] * len(lines)
    others: List[Dict[str, Any]] = []
    loose: List[int] = []                # step events normalised by the schema ("nan")
    started = False
    for i in rest:
        try:
            event = events[i] = check_event(_raw_loads(lines[i]))
        except (ValueError, EventError):  # orjson's errors are ValueErrors
            return None
        if event["rank"] != rank:
            return None
        if event["type"] == "step":
            loose.append(i)
            continue
        if event["type"] == "run_start":
            new_run = event.get("run") or default_run
            if new_run != run and i > 0:  # a new run mid-read: split, line by line
                return None
            run, started = new_run, True
        others.append(event)
    blocks = []
    if rows:
        block = _block(rows, rank)
        if block is None:
            return None
        blocks.append((np.asarray(at, dtype=np.intp), *block))
    if loose:
        blocks.append((np.asarray(loose, dtype=np.intp), *step_block([events[i] for i in loose])))
    if not blocks:
        return events, others, None, run, started
    is_step = np.zeros(len(lines), dtype=bool)
    is_step[at] = True
    is_step[loose] = True
    return events, others, batch_of_blocks(run, rank, is_step, blocks), run, started


def _utf8(line: bytes) -> bool:
    """Whether ``line`` is UTF-8 (msgspec skips the strings of unknown fields unchecked)."""
    if line.isascii():
        return True
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


def _block(rows: List[Any], rank: int) -> Optional[Tuple[np.ndarray, np.ndarray, List[Table]]]:
    """``(steps, t, tables)`` of the step structs ``rows``; None unless every one is of
    version 1, of ``rank`` and has a step number that fits in 64 bits."""
    n = len(rows)
    if list(map(_get_v, rows)).count(1) != n or list(map(_get_rank, rows)).count(rank) != n:
        return None
    try:
        steps = np.fromiter(map(_get_step, rows), dtype=np.int64, count=n)
        table = np.array(list(map(_get_columns, rows)), dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        return None
    recorded = ~np.isnan(table)
    counts = recorded.sum(axis=0)
    full = [j for j in range(1, len(_COLUMNS)) if counts[j] == n]
    tables: List[Table] = [(None, tuple(_COLUMNS[j] for j in full), table[:, full])] \
        if full else []
    for j in range(1, len(_COLUMNS)):
        if 0 < counts[j] < n:
            where = np.flatnonzero(recorded[:, j])
            tables.append((where, (_COLUMNS[j],), table[where, j:j + 1]))
    return steps, table[:, 0].copy(), tables
