"""The operator states of many ranks as columns: what the snapshot saves of a run's ranks.

Every rank of a run runs the same operators, so state ``k`` of operator ``i`` has the same
kind on every rank: a window's step array, a float, a count. Saved rank by rank, 1024 ranks
of ~140 operator states are ~500k JSON nodes and ~200k small arrays to walk; saved as one
column per ``(i, k)`` they are a few hundred arrays:

- 1-D numeric arrays: their values end to end and their lengths (int64 or float64, as
  :func:`~msdoctor.core.engine.context.pack` keeps them);
- floats (non-finite included) and ints: one float64 or int64 array;
- anything else: a list of packed values.

A column whose arrays equal an earlier column's refers to it (operators over the same signal
and window keep the same points: two thirds of the bytes at 1024 ranks).

Each column also holds the positions of the ranks that have that state. :func:`unstack` gives
back each rank's ``[[i, state], ...]`` with the values :func:`~msdoctor.core.engine.context.unpack`
gives of a state saved rank by rank (a rank's arrays are views of its column's own copy; window
carries equal to an earlier column's are that column's arrays, held once as when saved).
"""
from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from msdoctor.core.engine.context import pack, unpack

_INT_MAX = np.iinfo(np.int64).max
#: State keys of window carries (:mod:`.gathers`): never written in place, so operators that
#: kept equal ones share the arrays again after a restore (others get their own copy).
CARRIES = frozenset({"s", "v"})
_INT, _FLOAT = np.dtype(np.int64), np.dtype(np.float64)
#: one operator's state on each rank (None: that rank keeps none)
OpColumn = List[Optional[Dict[str, Any]]]


def stack(ranks: Sequence[Sequence[Tuple[int, Dict[str, Any]]]]) -> List[Dict[str, Any]]:
    """The ``(operator, state)`` pairs of each rank (a rank's position in ``ranks`` is its
    index) as columns: ``{"op", "key", "at", and "n" + "a" | "f" | "i" | "x"}``."""
    by_op: Dict[int, OpColumn] = {}
    for r, pairs in enumerate(ranks):
        for i, state in pairs:
            column = by_op.get(i)
            if column is None:
                column = by_op[i] = [None] * len(ranks)
            column[r] = state
    return stack_ops(sorted(by_op.items()), len(ranks))


def stack_ops(ops: Sequence[Tuple[int, OpColumn]], count: int) -> List[Dict[str, Any]]:
    """:func:`stack` of the states of ``count`` ranks given operator by operator (the
    engine's layout: each rank's states are a list by operator)."""
    columns: List[Dict[str, Any]] = []
    same: Dict[Tuple[Any, ...], int] = {}      # arrays held by several operators: saved once
    everyone = np.arange(count, dtype=np.int64)
    for i, states in ops:
        for key, at, values in _keys(states, everyone):
            if values and type(values[0]) is np.ndarray:
                held = (tuple(map(id, values)), at.tobytes())
                first = same.get(held)
                if first is not None and "a" in columns[first]:
                    columns.append({"op": i, "key": str(key), "at": at, "like": first})
                    continue
                same[held] = len(columns)
            columns.append(_column(i, key, at, values))
    columns = _shared(columns)
    for column in columns:             # a column held by identity may since refer to another
        like = column.get("like")
        while like is not None and "like" in columns[like]:
            like = column["like"] = columns[like]["like"]
    return columns


def _keys(states: OpColumn, everyone: np.ndarray) -> List[Tuple[str, np.ndarray, List[Any]]]:
    """One operator's states as ``(key, ranks, values)``: at once when every rank keeps a
    state with the same keys (as a rule), else key by key."""
    if states and set(map(type, states)) == {dict}:
        dicts = cast(List[Dict[str, Any]], states)
        layouts = list(map(tuple, dicts))
        first = layouts[0]
        if first and layouts.count(first) == len(layouts):
            return [(key, everyone.copy(), list(map(itemgetter(key), dicts))) for key in first]
    grouped: Dict[str, Tuple[List[int], List[Any]]] = {}
    for r, state in enumerate(states):
        if not state or type(state) is not dict:
            continue
        for key, value in state.items():
            found = grouped.get(key)
            if found is None:
                found = grouped[key] = ([], [])
            found[0].append(r)
            found[1].append(value)
    return [(key, np.asarray(at, dtype=np.int64), values)
            for key, (at, values) in grouped.items()]


def _shared(columns: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Columns of arrays equal to an earlier column's (operators over the same signal and
    window keep the same points) refer to it (``"like": its index``) instead of repeating it."""
    seen: Dict[Tuple[Any, ...], List[int]] = {}
    for index, column in enumerate(columns):
        flat = column.get("a")
        if flat is None or not flat.shape[0]:
            continue
        n = flat.shape[0]
        sign = (flat.dtype.str, n, column["n"].shape[0], flat[0].item(), flat[n // 3].item(),
                flat[n // 2].item(), flat[-1].item())
        for other in seen.setdefault(sign, []):
            earlier = columns[other]
            if np.array_equal(earlier["a"], flat) and np.array_equal(earlier["n"], column["n"]):
                del column["a"], column["n"]
                column["like"] = other
                break
        else:
            seen[sign].append(index)
    return columns


def _column(i: int, key: str, at: np.ndarray, values: List[Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"op": i, "key": str(key), "at": at}
    kinds = set(map(type, values))
    if kinds <= {float, np.float64}:
        out["f"] = np.array(values, dtype=np.float64)
    elif kinds <= {int, np.int64} and -_INT_MAX <= min(values) and max(values) <= _INT_MAX:
        out["i"] = np.array(values, dtype=np.int64)
    elif kinds == {np.ndarray} and set(map(attrgetter("ndim"), values)) == {1} and all(
            dtype.kind in "iubf" for dtype in set(map(attrgetter("dtype"), values))):
        dtypes = set(map(attrgetter("dtype"), values))
        packed = values if dtypes in ({_INT}, {_FLOAT}) else [pack(v) for v in values]
        if len(set(map(attrgetter("dtype"), packed))) == 1:
            out["n"] = np.fromiter(map(len, packed), np.int64, len(packed))
            out["a"] = np.concatenate(packed)
        else:
            out["x"] = packed
    else:
        out["x"] = [pack(v) for v in values]
    return out


def unstack(columns: Any, count: int) -> List[List[List[Any]]]:
    """Each of ``count`` ranks' ``[[i, state], ...]`` from :func:`stack`'s columns; a column
    that does not fit (a damaged snapshot) raises ``ValueError``."""
    ops = unstack_ops(columns, count)
    order = sorted(ops.items())
    return [[[i, states[r]] for i, states in order if states[r] is not None]
            for r in range(count)]


def unstack_ops(columns: Any, count: int) -> Dict[int, OpColumn]:
    """:func:`unstack` operator by operator: each operator's state on each rank (None where
    a rank keeps none), the layout the engine holds them in."""
    found: Dict[int, List[Tuple[str, np.ndarray, Sequence[Any]]]] = {}
    split: Dict[int, Tuple[np.ndarray, Sequence[Any]]] = {}    # column -> (ranks, arrays)
    for index, column in enumerate(columns):
        i, key, at = column["op"], column["key"], np.asarray(column["at"], dtype=np.int64)
        if not isinstance(i, int) or not isinstance(key, str) or at.ndim != 1 or (
                at.shape[0] and (int(at.min()) < 0 or int(at.max()) >= count)):
            raise ValueError(f"operator state column {i!r}/{key!r} does not fit {count} ranks")
        like = column.get("like")
        if like is not None:
            if not (isinstance(like, int) and 0 <= like < len(columns) and "a" in columns[like]):
                raise ValueError(f"operator state column {i}/{key} refers to column {like!r}, "
                                 f"which holds no arrays")
            held = split.get(like)
            if key in CARRIES and held is not None and np.array_equal(held[0], at):
                found.setdefault(i, []).append((key, at, held[1]))   # the same arrays, as saved
                continue
            column = dict(columns[like], at=at, a=np.array(columns[like]["a"]))   # its own
        if "a" in column:
            lengths = np.asarray(column["n"], dtype=np.int64)
            values: Sequence[Any] = _split(np.asarray(column["a"]), lengths, at.shape[0])
            split[index] = (at, values)
        elif "f" in column or "i" in column:
            values = np.asarray(column["f" if "f" in column else "i"]).tolist()
        else:
            values = [unpack(v) for v in column["x"]]
        if len(values) != at.shape[0]:
            raise ValueError(f"operator state column {i}/{key}: {len(values)} values for "
                             f"{at.shape[0]} ranks")
        found.setdefault(i, []).append((key, at, values))
    everyone = np.arange(count, dtype=np.int64)
    ops: Dict[int, OpColumn] = {}
    for i, keys in found.items():
        whole = [at.shape[0] == count and np.array_equal(at, everyone) for _, at, _ in keys]
        states: List[Any] = [{} for _ in range(count)] if any(whole) else [None] * count
        for (key, at, values), every in zip(keys, whole):
            if every:
                for state, value in zip(states, values):
                    state[key] = value
                continue
            for r, value in zip(at.tolist(), values):
                state = states[r]
                if state is None:
                    state = states[r] = {}
                state[key] = value
        ops[i] = states
    return ops


def _split(flat: np.ndarray, lengths: np.ndarray, count: int) -> List[np.ndarray]:
    if lengths.ndim != 1 or lengths.shape[0] != count or (count and int(lengths.min()) < 0) \
            or int(lengths.sum()) != flat.shape[0]:
        raise ValueError(f"array lengths {lengths.tolist()[:8]}... do not fit {flat.shape[0]} "
                         f"values")
    ends = np.cumsum(lengths).tolist()
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]
