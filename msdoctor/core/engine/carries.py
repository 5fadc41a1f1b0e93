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

from msdoctor.core.engine.nodes import Frame

State = Dict[str, Any]


def carry_key(child: str, span: int, extra: int) -> Tuple[Hashable, ...]:
    return ("carry", child, span, extra)


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
    """``state`` holds ``owner``'s arrays if both keep the same points."""
    if state["s"] is owner["s"]:
        return
    if np.array_equal(state["s"], owner["s"]) and np.array_equal(state["v"], owner["v"]):
        state["s"], state["v"] = owner["s"], owner["v"]


def take(owners: List[State], states: List[State]) -> None:
    """Each rank's state holds its owner's kept arrays."""
    for owner, state in zip(owners, states):
        state["s"], state["v"] = owner["s"], owner["v"]
