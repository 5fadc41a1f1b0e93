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

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from msdoctor.core.engine.context import pack, unpack

_INT_MAX = np.iinfo(np.int64).max
#: State keys of window carries (:mod:`.gathers`): never written in place, so operators that
#: kept equal ones share the arrays again after a restore (others get their own copy).
CARRIES = frozenset({"s", "v"})
_INT, _FLOAT = np.dtype(np.int64), np.dtype(np.float64)


def stack(ranks: Sequence[Sequence[Tuple[int, Dict[str, Any]]]]) -> List[Dict[str, Any]]:
    """The ``(operator, state)`` pairs of each rank (a rank's position in ``ranks`` is its
    index) as columns: ``{"op", "key", "at", and "n" + "a" | "f" | "i" | "x"}``."""
    grouped = _by_operator(ranks)
    columns: List[Dict[str, Any]] = []
    same: Dict[Tuple[int, ...], int] = {}      # arrays held by several operators: saved once
    for (i, key), (at, values) in grouped.items():
        if values and type(values[0]) is np.ndarray:
            held = tuple(map(id, values)) + tuple(at)
            first = same.get(held)
            if first is not None and "a" in columns[first]:
                columns.append({"op": i, "key": str(key), "at": np.asarray(at, dtype=np.int64),
                                "like": first})
                continue
            same[held] = len(columns)
        columns.append(_column(i, key, at, values))
    columns = _shared(columns)
    for column in columns:             # a column held by identity may since refer to another
        like = column.get("like")
        while like is not None and "like" in columns[like]:
            like = column["like"] = columns[like]["like"]
    return columns


def _by_operator(ranks: Sequence[Sequence[Tuple[int, Dict[str, Any]]]]
                 ) -> Dict[Tuple[int, str], Tuple[List[int], List[Any]]]:
    """``(operator, state key) -> (ranks, values)``; ranks that keep the same operators with
    the same keys (all of them, as a rule) are taken a column at a time."""
    grouped: Dict[Tuple[int, str], Tuple[List[int], List[Any]]] = {}
    layout = [(i, tuple(state)) for i, state in ranks[0]] if ranks else []
    alike = [r for r, states in enumerate(ranks)
             if len(states) == len(layout) and all(i == j and len(state) == len(keys)
                                                  for (i, state), (j, keys) in zip(states, layout))
             and all(tuple(state) == keys for (_, state), (_, keys) in zip(states, layout))]
    if alike:
        for k, (i, keys) in enumerate(layout):
            column = [ranks[r][k][1] for r in alike]
            for key in keys:
                grouped[(i, key)] = (list(alike), [st[key] for st in column])
    done = set(alike)
    for r, pairs in enumerate(ranks):
        if r in done:
            continue
        for op, state in pairs:
            for key, value in state.items():
                found = grouped.get((op, key))
                if found is None:
                    found = grouped[(op, key)] = ([], [])
                found[0].append(r)
                found[1].append(value)
    return grouped


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


def _column(i: int, key: str, at: List[int], values: List[Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"op": i, "key": str(key), "at": np.asarray(at, dtype=np.int64)}
    kinds = {type(v) for v in values}
    if kinds <= {float, np.float64}:
        out["f"] = np.asarray(values, dtype=np.float64)
    elif kinds <= {int, np.int64} and all(-_INT_MAX <= v <= _INT_MAX for v in values):
        out["i"] = np.asarray(values, dtype=np.int64)
    elif kinds == {np.ndarray} and {v.ndim for v in values} == {1} and all(
            kind in "iubf" for kind in {v.dtype.kind for v in values}):
        dtypes = {v.dtype for v in values}
        packed = values if dtypes in ({_INT}, {_FLOAT}) else [pack(v) for v in values]
        if len({v.dtype for v in packed}) == 1:
            out["n"] = np.fromiter((v.shape[0] for v in packed), np.int64, len(packed))
            out["a"] = np.concatenate(packed)
        else:
            out["x"] = packed
    else:
        out["x"] = [pack(v) for v in values]
    return out


def unstack(columns: Any, count: int) -> List[List[List[Any]]]:
    """Each of ``count`` ranks' ``[[i, state], ...]`` from :func:`stack`'s columns; a column
    that does not fit (a damaged snapshot) raises ``ValueError``."""
    states: List[Dict[int, Dict[str, Any]]] = [{} for _ in range(count)]
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
                for r, value in zip(at.tolist(), held[1]):     # the same arrays, as when saved
                    states[r].setdefault(i, {})[key] = value
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
        for r, value in zip(at.tolist(), values):
            states[r].setdefault(i, {})[key] = value
    return [[[i, state] for i, state in sorted(rank.items())] for rank in states]


def _split(flat: np.ndarray, lengths: np.ndarray, count: int) -> List[np.ndarray]:
    if lengths.ndim != 1 or lengths.shape[0] != count or (count and int(lengths.min()) < 0) \
            or int(lengths.sum()) != flat.shape[0]:
        raise ValueError(f"array lengths {lengths.tolist()[:8]}... do not fit {flat.shape[0]} "
                         f"values")
    ends = np.cumsum(lengths).tolist()
    return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]
