"""Columnar step batches: how decoded step events travel inside the sidecar.

The ingest turns each rank's newly read step events into one :class:`StepBatch`
(numpy columns), so the state and the rule engine work on arrays, not on one
Python dict per event. This is what keeps the sidecar and replay fast.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from msdoctor.wire.schema import FIELDS, STEP_SIGNALS

#: Series the sidecar keeps per rank: the wire signals plus derived ones.
DERIVED = ("tokens_per_s", "overflow", "data_wait_share")
SIGNALS = STEP_SIGNALS + DERIVED

#: ``(rows or None for all, signal names, float64 table rows x names)``
Table = Tuple[Optional[np.ndarray], tuple, np.ndarray]


@dataclass
class StepBatch:
    """Step events of one (run, rank), in arrival order.

    ``columns[name]`` is aligned with ``steps``; ``masks[name]`` is True where
    the signal was recorded (a signal absent from every event has no column;
    a column recorded on every event has no mask).
    """

    run: str
    rank: int
    steps: np.ndarray                       # int64
    t: np.ndarray                           # float64 wall-clock seconds, NaN if absent
    columns: Dict[str, np.ndarray] = field(default_factory=dict)   # float64
    masks: Dict[str, np.ndarray] = field(default_factory=dict)     # bool

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def series(self, name: str) -> Optional[tuple]:
        """``(steps, values)`` of the rows where ``name`` was recorded, or None."""
        values = self.columns.get(name)
        if values is None:
            return None
        mask = self.masks.get(name)
        if mask is None:
            return self.steps, values
        return self.steps[mask], values[mask]

    def slice(self, start: int, stop: int) -> "StepBatch":
        """Rows ``start:stop`` as a new batch (views, no copies)."""
        return StepBatch(self.run, self.rank, self.steps[start:stop], self.t[start:stop],
                         {k: v[start:stop] for k, v in self.columns.items()},
                         {k: m[start:stop] for k, m in self.masks.items()})


def columnize(run: str, rank: int, events: Sequence[Mapping[str, Any]]) -> StepBatch:
    """Build a :class:`StepBatch` from validated step events of one rank.

    Events are grouped by their *shape* (their key tuple: a hook writes the
    same few shapes over and over), and each group's signals are pulled out
    with one ``itemgetter`` call per event into a 2-D array. Every pass runs
    in C: this function is on the hot path of ingest and replay.
    """
    return assemble(run, rank, *step_block(events))


def step_block(events: Sequence[Mapping[str, Any]]) -> Tuple[np.ndarray, np.ndarray, List[Table]]:
    """``(steps, t, tables)`` of validated step events: the parts :func:`assemble` takes."""
    n = len(events)
    steps = np.fromiter(map(_get_step, events), dtype=np.int64, count=n)
    t = np.fromiter(map(_get_t, events), dtype=np.float64, count=n)
    return steps, t, signal_tables(events)


def signal_tables(events: Sequence[Mapping[str, Any]]) -> List[Table]:
    """``(rows, names, table)`` per group of events recording the same signals."""
    tables = []
    for names, index in _shape_groups(events).items():
        rows = events if index is None else [events[i] for i in index]
        table = np.array(list(map(itemgetter(*names), rows)), dtype=np.float64)
        tables.append((None if index is None else np.asarray(index, dtype=np.intp), names,
                       table.reshape(len(rows), len(names))))
    return tables


def assemble(run: str, rank: int, steps: np.ndarray, t: np.ndarray,
             tables: List[Table]) -> StepBatch:
    """A batch from its step numbers, times and signal tables (see :func:`signal_tables`).

    ``rows`` of a table are the (ascending) rows it fills, None for every row;
    a signal missing from some rows gets a mask, derived series are added.
    """
    n = steps.shape[0]
    pieces: Dict[str, list] = {}
    for index, names, table in tables:
        for j, name in enumerate(names):
            pieces.setdefault(name, []).append((index, table[:, j]))
    columns: Dict[str, np.ndarray] = {}
    masks: Dict[str, np.ndarray] = {}
    for name, parts in pieces.items():
        if len(parts) == 1 and parts[0][0] is None:     # one table covering every row
            columns[name] = np.ascontiguousarray(parts[0][1])
            continue
        index = (np.concatenate([np.arange(n) if rows is None else rows for rows, _ in parts])
                 if len(parts) > 1 else parts[0][0])
        column = columns[name] = np.full(n, np.nan)
        column[index] = np.concatenate([v for _, v in parts]) if len(parts) > 1 else parts[0][1]
        if index.shape[0] < n:                  # tables cover disjoint rows
            mask = masks[name] = np.zeros(n, dtype=bool)
            mask[index] = True
    _derive(columns, masks)
    return StepBatch(run, rank, steps, t, columns, masks)


_get_step = itemgetter("step")
_get_t = methodcaller("get", "t", np.nan)
_SOURCES = frozenset(STEP_SIGNALS + ("overflow",))


def _shape_groups(events: Sequence[Mapping[str, Any]]) -> Dict[tuple, Optional[List[int]]]:
    """Signal names of each event shape -> row indices (None: every row has that shape)."""
    shapes = list(map(tuple, events))
    if not shapes:
        return {}
    if shapes.count(shapes[0]) == len(shapes):
        names = tuple(k for k in shapes[0] if k in _SOURCES)
        return {names: None} if names else {}
    by_shape: Dict[tuple, List[int]] = {}
    for i, shape in enumerate(shapes):
        rows = by_shape.get(shape)
        if rows is None:
            rows = by_shape[shape] = []
        rows.append(i)
    groups: Dict[tuple, List[int]] = {}
    for shape, rows in by_shape.items():
        names = tuple(k for k in shape if k in _SOURCES)
        if names:
            groups.setdefault(names, []).extend(rows)
    return {names: sorted(rows) if len(rows) > 1 else rows for names, rows in groups.items()}


def _derive(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray]) -> None:
    """Add ``tokens_per_s`` and ``data_wait_share`` where their inputs were recorded."""
    seconds = columns.get("step_time_s")
    if seconds is None:
        return
    positive = seconds > 0
    for name, numerator in (("tokens_per_s", "tokens"), ("data_wait_share", "data_wait_s")):
        if numerator not in columns:
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = np.where(positive, columns[numerator] / seconds, np.nan)
        mask = _and(masks.get(numerator), masks.get("step_time_s"), positive)
        _store(columns, masks, name, value, mask)


def _and(*masks: Optional[np.ndarray]) -> Optional[np.ndarray]:
    result = None
    for mask in masks:
        if mask is not None:
            result = mask if result is None else (result & mask)
    return result


def _store(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray], name: str,
           column: np.ndarray, mask: Optional[np.ndarray]) -> None:
    if mask is not None and not mask.any():
        return
    columns[name] = column
    if mask is not None and not mask.all():
        masks[name] = mask


# -- bulk validation of raw step events (the ingest's fast path) ----------------
_STEP_FIELDS = FIELDS["step"]
_NUMS = frozenset(name for name, (kind, _) in _STEP_FIELDS.items() if kind == "number")
_REQUIRED = frozenset(name for name, (_, required) in _STEP_FIELDS.items() if required)
_INT = {int}
#: the keys wire_steps reads from every row (and so proves present in each)
_READ = _NUMS | {"v", "type", "rank", "step", "run", "overflow", "t"}
_NUMBER = frozenset((int, float))
_get_v, _get_rank, _get_type = itemgetter("v"), itemgetter("rank"), itemgetter("type")


def wire_steps(rows: List[Mapping[str, Any]], keys: tuple, rank: int
               ) -> Optional[Tuple[np.ndarray, np.ndarray, List[Table], Optional[np.ndarray]]]:
    """Validate step events with the same keys as a block and columnize them.

    ``rows`` are decoded JSON objects that all have exactly the keys ``keys``
    (in any order; a missing one raises KeyError). Every known field must
    already have its exact wire type (``v`` 1, ``rank`` = ``rank``, ints, a
    bool ``overflow``, strings ``type`` "step" and ``run``, numbers), i.e.
    what :func:`msdoctor.wire.schema.validate` accepts unchanged. Returns
    ``(steps, t, tables, good)``: the columns of the rows ``good`` (None: all
    of them); the other rows hold something else than an int or a float in a
    numeric field ("nan", a bool, null...) and are left to the caller, who
    validates them one by one, so normalising and error messages stay the
    schema's own. None when the block as a whole does not pass.
    """
    n = len(rows)
    if not n or not _REQUIRED.issubset(keys):
        return None
    if list(map(_get_type, rows)).count("step") != n:
        return None
    steps = list(map(_get_step, rows))
    versions = list(map(_get_v, rows))
    ranks = list(map(_get_rank, rows))
    if versions.count(1) != n or ranks.count(rank) != n:
        return None
    if set(map(type, chain(steps, versions, ranks))) != _INT:
        return None
    if "run" in keys and set(map(type, map(itemgetter("run"), rows))) != {str}:
        return None
    for name in keys:                # a key read below: a row without it raises KeyError;
        if name not in _READ:        # any other key (ignored) must be looked up here
            list(map(itemgetter(name), rows))
    flags = None
    if "overflow" in keys:
        flags = list(map(itemgetter("overflow"), rows))
        if set(map(type, flags)) != {bool}:
            return None
    nums = tuple(k for k in keys if k in _NUMS and k != "t")
    first = 1 if "t" in keys else 0             # column 0 is the time when recorded
    nums = ("t",) * first + nums
    table: Any = list(map(itemgetter(*nums), rows)) if nums else [()] * n
    flat = table if len(nums) == 1 else list(chain.from_iterable(table))
    try:
        step_numbers = np.fromiter(steps, dtype=np.int64, count=n)
        # float64 at once (never slow, whatever is inside); exactness comes from the types
        values = np.fromiter(flat, dtype=np.float64, count=n * len(nums)).reshape(n, len(nums))
    except (ValueError, TypeError, OverflowError):
        return None
    good = None
    if nums and not set(map(type, flat)) <= _NUMBER:
        ok = np.ones(n, dtype=bool)       # rows with another type in a column: one by one
        for j in range(len(nums)):
            column = flat[j::len(nums)]
            if not set(map(type, column)) <= _NUMBER:
                ok[[i for i, x in enumerate(column) if type(x) not in _NUMBER]] = False
        if not ok.any():
            return None
        good = np.flatnonzero(ok)
        values, step_numbers = values[good], step_numbers[good]
        if flags is not None:
            flags = [flags[i] for i in good.tolist()]
    tables: List[Table] = []
    if len(nums) > first:
        tables.append((None, nums[first:], values[:, first:]))
    if flags is not None:
        tables.append((None, ("overflow",), np.array(flags, dtype=np.float64).reshape(-1, 1)))
    t = values[:, 0].copy() if first else np.full(values.shape[0], np.nan)
    return step_numbers, t, tables, good
