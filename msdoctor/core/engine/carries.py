"""One carry-over for window operators that keep the same points.

``mean(loss, 1000)`` and ``count(loss, 1000)`` keep the same points of ``loss`` between
batches (the same child, span and extra points). The first of them evaluated in a frame
gathers and keeps its carry as usual and leaves the gather in ``frame.memo``; a later one
whose carry *is* that operator's (the same array objects) takes the gather from there and,
after its own reduction, the first one's kept arrays. Their results are exactly those of
gathering their own carry, since it is the same one; the points are held once, and a poll
of many ranks gathers and keeps them once.

Operators start with the same (empty) arrays, so they share from their first batch. Where
the carries are separate objects (restored from a snapshot, a rule reloaded, an operator
reset after an error), the later operator gathers its own and takes the first one's arrays
as soon as they hold the same points.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Optional, Tuple

import numpy as np

from msdoctor.core.engine.nodes import Frame, Node

State = Dict[str, Any]
#: ``frame.memo`` key of the program's keep groups (:func:`join_group`)
KEEPS = "keeps"


#: A keep group: the longest span, the most extra points, and the past windows
#: ``(k, n, m)`` of fused ``delta(mean(x, n, m), k)`` operators (:mod:`.meandelta`).
Group = Tuple[int, int, Tuple[Tuple[int, int, int], ...]]


def join_group(groups: Dict[str, Group], node: Node) -> None:
    """Add what ``node`` keeps (if it is a window over an argument) to ``groups``: per
    argument (its key), what the window operators over it keep between batches, the longest
    span, the most extra points and every past window. All of them keep that, so their
    carries hold the same points (``mean(loss, 60)`` keeps the points ``mean(loss, 1e5)``
    keeps, as one array)."""
    spec = getattr(node, "carry_spec", None)
    if spec is None:
        return
    child, span, extra, lags = spec()
    had = groups.get(child, (0, 0, ()))
    groups[child] = (max(had[0], span), max(had[1], extra), tuple(sorted({*had[2], *lags})))


def kept(frame: Frame, child: str, span: int, extra: int,
         lags: Tuple[Tuple[int, int, int], ...] = ()) -> Group:
    """What an operator over ``child`` keeps: its group's (at least its own needs: an
    operator evaluated outside its program keeps what it needs)."""
    group = frame.memo.get(KEEPS, {}).get(child)
    if group is None:
        return span, extra, lags
    return max(group[0], span), max(group[1], extra), tuple(sorted({*group[2], *lags}))


def carry_key(child: str, group: Group) -> Tuple[Hashable, ...]:
    return ("carry", child, group)


def last_gathers(nodes: List[Node]) -> List[List[str]]:
    """Per operator, the arguments whose carry group no later operator gathers or takes
    (it is the group's last window operator)."""
    last: Dict[str, int] = {}
    for i, node in enumerate(nodes):
        spec = getattr(node, "carry_spec", None)
        if spec is not None:
            last[spec()[0]] = i
    out: List[List[str]] = [[] for _ in nodes]
    for child, i in last.items():
        out[i].append(child)
    return out


def forget(memo: Dict[Any, Any], child: str, group: Group) -> None:
    """Free a carry group's gather (and the cumulative sums over it) once its last operator
    has run: it holds the carries before the batch and every point gathered, as long again
    as what the group keeps, until the frame ends."""
    entry = memo.pop(carry_key(child, group), None)
    if entry is not None:
        sums = memo.get(("sums", id(entry[2])))
        if sums is not None and sums.get("V") is entry[2]:
            del memo[("sums", id(entry[2]))]


def shared_gather(frame: Frame, key: Hashable, states: List[State]) -> Optional[Any]:
    """``(S, V, hi, ...)`` of an earlier operator whose carries are ``states``' (one state per
    rank of the frame; for many ranks ``(K, V, hi, start, owners)``, for one ``(S, V, hi,
    owners)``), or None."""
    memo = frame.memo.get(key)
    if memo is None or len(memo[0]) != len(states):
        return None
    if all(a is st["s"] for a, st in zip(memo[0], states)):
        return memo[1:]
    return None


def share(frame: Frame, key: Hashable, before: List[np.ndarray], gathered: Tuple[Any, ...],
          states: List[State]) -> None:
    """After an operator gathered and kept its own carries: offer the gather to later ones
    (``before``: its carries' steps before this batch), or take the first one's kept arrays
    where a carry holds the same points."""
    memo = frame.memo.get(key)
    if memo is None:
        frame.memo[key] = (before, *gathered, states)
        return
    for owner, state in zip(memo[-1], states):
        adopt(owner, state)


def adopt(owner: State, state: State) -> None:
    """Both hold the longer one's arrays if the other's points are its last ones (carries
    restored from a snapshot of another program, or reset after an error, hold fewer
    points; more history changes no window's values)."""
    if state["s"] is owner["s"]:
        return
    long, short = (owner, state) if owner["s"].shape[0] >= state["s"].shape[0] else (state, owner)
    n = short["s"].shape[0]
    if np.array_equal(long["s"][long["s"].shape[0] - n:], short["s"]) \
            and np.array_equal(long["v"][long["v"].shape[0] - n:], short["v"]):
        for held in (owner, state):
            held["s"], held["v"] = long["s"], long["v"]


def release(states: List[State]) -> None:
    """Carries that are views of a many-rank batch's kept points become copies of their
    own (a view keeps all ranks' points of that batch alive); operators that held the same
    view hold the same copy."""
    copies: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
    for state in states:
        if not isinstance(state, dict):
            continue
        for name in ("s", "v"):
            held = state.get(name)
            if isinstance(held, np.ndarray) and held.base is not None:
                pair = copies.get(id(held))
                if pair is None:
                    pair = copies[id(held)] = (held, held.copy())
                state[name] = pair[1]


def take(owners: List[State], states: List[State]) -> None:
    """Each rank's state holds its owner's kept arrays."""
    for owner, state in zip(owners, states):
        state["s"], state["v"] = owner["s"], owner["v"]
