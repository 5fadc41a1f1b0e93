"""The fast path: step lines decoded by msgspec straight into columns, no dicts.

A replay and the live sidecar need the step events only as columns
(:class:`~msdoctor.core.batch.StepBatch`): a dict per step line held ~550 bytes of small
objects per line until the read was applied (a drain's first poll of 1024 ranks reads 256 MiB,
and its objects left ~0.5 GiB of Python arenas resident afterwards). A
:class:`~msdoctor.core.spool.SpoolTailer` with ``step_events`` off decodes a read's lines with
a msgspec decoder of the step schema (a typed struct per line, built from
:data:`msdoctor.wire.schema.FIELDS`: what the schema accepts unchanged and nothing else, no
unknown field either) and turns the structs into a float table in one pass in C. The chunk's
``events`` holds :data:`STEP` where such a step event was. The other lines (other event types,
step events with something to normalise such as "nan", or with a field the structs do not know)
are parsed and checked one by one as the bulk decoder does.

A read with a bad line, bytes that are not UTF-8, a wrong rank or a new run mid-read returns
None before any state changes, and :func:`msdoctor.core.spool_bulk.decode_bulk` does the
work (then the exact line-by-line decoder). ``tests/msdoctor/core/test_spool_bulk.py`` proves
the typed and the exact decoders give the same batches (bit for bit), events, errors and
positions. Without msgspec (imported when a tailer first reads; optional at import time)
this path is off.
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch, Table, step_block
from msdoctor.core.spool_bulk import batch_of_blocks, check_event
from msdoctor.wire.codec import loads
from msdoctor.wire.schema import FIELDS, EventError


class _Step(Dict[str, Any]):
    """The type of :data:`STEP`: pickled as a reference to it (a parallel replay's workers
    send their chunks to the parent), never to be changed."""

    def __reduce__(self) -> str:
        return "STEP"


#: Stands for a step event in ``Chunk.events`` (its values are in ``Chunk.steps``).
STEP: Mapping[str, Any] = _Step(type="step")

#: Field kind of the schema -> the one Python type msgspec takes for it (a JSON number of
#: either kind becomes a float; ints, bools, strings, objects and arrays only as themselves).
_TYPES = {"int": int, "number": float, "bool": bool, "string": str, "object": dict,
          "numbers": list, "names": list}


class _Decoder:
    """msgspec's decoder of one step line into a struct and its error type, built when a
    tailer first needs it; ``decode`` None without msgspec, or for a schema field of a kind
    without a type here. Optional fields default to NaN: JSON has no NaN number, so NaN in a
    column means "not recorded"."""

    decode: Any = None
    error: Any = None
    built = False

    @classmethod
    def build(cls) -> Any:
        cls.built = True
        try:
            import msgspec
        except ImportError:  # pragma: no cover - exercised only without msgspec
            return None
        fields: List[Any] = []
        for name, (kind, required) in FIELDS["step"].items():
            if kind not in _TYPES:
                return None
            fields.append((name, _TYPES[kind]) if required else
                          (name, _TYPES[kind], float("nan")))
        fields.sort(key=len)             # required fields first
        # an unknown field would be skipped unchecked (msgspec does not parse its numbers,
        # nor check its UTF-8): such a line is parsed and checked one by one instead
        struct = msgspec.defstruct("WireStep", fields, gc=False, forbid_unknown_fields=True)
        cls.decode, cls.error = msgspec.json.Decoder(struct).decode, msgspec.DecodeError
        return cls.decode


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
    decode = _Decoder.decode if _Decoder.built else _Decoder.build()
    if decode is None or not lines \
            or not all(map(bytes.isascii, lines)) and not all(map(_utf8, lines)):
        return None
    rows, at, rest = _structs(lines)
    events: List[Any] = [STEP] * len(lines)
    others: List[Dict[str, Any]] = []
    loose: List[int] = []                # step events normalised by the schema ("nan")
    started = False
    for i in rest:
        try:
            event = events[i] = check_event(loads(lines[i]))
        except EventError:
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
    blocks: List[Any] = []
    if rows:
        block = _block(rows, rank)
        if block is None:
            return None
        every = len(at) == len(lines)    # rows given as line numbers; None: every line
        blocks.append((None if every else np.asarray(at, dtype=np.intp), *block))
    if loose:
        blocks.append((np.asarray(loose, dtype=np.intp), *step_block([events[i] for i in loose])))
    if not blocks:
        return events, others, None, run, started
    is_step = np.zeros(len(lines), dtype=bool)
    is_step[at] = True
    is_step[loose] = True
    return events, others, batch_of_blocks(run, rank, is_step, blocks), run, started


class _Other:
    """Stands for a line the structs did not take."""

    type = ""                # a str, as every struct's: "step".__eq__ compares it


_OTHER = _Other()


def _structs(lines: List[bytes]) -> Tuple[List[Any], List[int], List[int]]:
    """The step structs of ``lines``, their line numbers, and the lines left to look at
    (other event types, or lines the structs do not take)."""
    decode, error = _Decoder.decode, _Decoder.error
    rows: List[Any] = []
    source = iter(lines)
    while True:              # list.extend keeps the items taken before an error: go on after it
        try:
            rows.extend(map(decode, source))
            break
        except error:
            rows.append(_OTHER)
    if len(rows) != len(lines):          # (not so in some other Python: line by line)
        return _one_by_one(lines)
    kinds = list(map(_get_type, rows))
    if kinds.count("step") == len(rows):
        return rows, list(range(len(rows))), []
    step = np.fromiter(map("step".__eq__, kinds), dtype=bool, count=len(kinds))
    at = np.flatnonzero(step).tolist()
    return list(map(rows.__getitem__, at)), at, np.flatnonzero(~step).tolist()


def _one_by_one(lines: List[bytes]) -> Tuple[List[Any], List[int], List[int]]:
    """:func:`_structs` line by line."""
    decode, error = _Decoder.decode, _Decoder.error
    rows: List[Any] = []
    at: List[int] = []
    rest: List[int] = []
    for i, line in enumerate(lines):
        try:
            row = decode(line)
        except error:
            rest.append(i)
            continue
        if row.type == "step":
            rows.append(row)
            at.append(i)
        else:
            rest.append(i)
    return rows, at, rest


def _utf8(line: bytes) -> bool:
    """Whether ``line`` is UTF-8 (as orjson requires of every byte of a line)."""
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
        table = np.fromiter(chain.from_iterable(map(_get_columns, rows)), dtype=np.float64,
                            count=n * len(_COLUMNS)).reshape(n, len(_COLUMNS))
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
