"""The alert lifecycle of one (rule, run, rank): inactive -> pending -> firing -> resolved.

A pending alert whose condition turns false before its ``for`` has elapsed goes back to
``inactive`` with a transition of its own, so whoever holds the active set drops it (the
alert stops being pending, as Prometheus drops it from ``ALERTS``).

:func:`advance` takes a whole batch of condition values and finds the
transitions by jumping between the runs of true and false rows (``flatnonzero``
+ ``searchsorted``), so a batch costs O(number of condition changes), not
O(rows). Each transition is returned once; the state carries what is needed to
continue with the next batch or clock tick.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, NamedTuple

import numpy as np

INACTIVE, PENDING, FIRING = "inactive", "pending", "firing"


@dataclass(frozen=True)
class Duration:
    """``for``/``keep_firing_for``: an amount of steps (``unit="steps"``) or seconds (``"s"``)."""

    amount: float = 0.0
    unit: str = "steps"

    @property
    def in_seconds(self) -> bool:
        return self.unit == "s"

    def __str__(self) -> str:
        if self.unit == "steps":
            return f"{int(self.amount)} step{'' if self.amount == 1 else 's'}"
        return f"{self.amount:g}s"


@dataclass
class AlertState:
    state: str = INACTIVE
    since_step: float = math.nan     # where the current activation began
    since_t: float = math.nan
    last_true_step: float = math.nan
    last_true_t: float = math.nan

    def to_dict(self) -> Dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "AlertState":
        def number(key: str) -> float:
            value = d.get(key)
            return math.nan if value is None else value

        return cls(state=d.get("state", INACTIVE), since_step=number("since_step"),
                   since_t=number("since_t"), last_true_step=number("last_true_step"),
                   last_true_t=number("last_true_t"))


class Transition(NamedTuple):
    state: str          # pending | firing | resolved | inactive (pending, then false)
    row: int            # index of the row of the batch where it happened
    first_step: float   # step where the activation began


def _elapsed_index(clock: np.ndarray, start: int, end: int, origin: float, amount: float) -> int:
    """First index in [start, end) with clock >= origin + amount (``end`` if none)."""
    if amount <= 0:
        return start
    k = int(np.searchsorted(clock[start:end], origin + amount, side="left"))
    return start + k


def advance(st: AlertState, cond: np.ndarray, steps: np.ndarray, t: np.ndarray,
            for_: Duration, keep: Duration) -> List[Transition]:
    """Run the lifecycle over one batch; return the transitions in order."""
    n = cond.shape[0]
    out: List[Transition] = []
    if n == 0:
        return out
    if st.state == INACTIVE and not cond.any():
        return out
    if st.state == FIRING and cond.all():
        st.last_true_step, st.last_true_t = float(steps[-1]), float(t[-1])
        return out
    trues = np.flatnonzero(cond)
    falses = np.flatnonzero(~cond)
    fclock = t if for_.in_seconds else steps
    kclock = t if keep.in_seconds else steps

    def next_in(idx: np.ndarray, i: int) -> int:
        k = int(np.searchsorted(idx, i, side="left"))
        return int(idx[k]) if k < idx.shape[0] else n

    i = 0
    while i < n:
        if st.state == INACTIVE:
            j = next_in(trues, i)
            if j >= n:
                break
            st.since_step, st.since_t = float(steps[j]), float(t[j])
            if for_.amount <= 0:
                st.state = FIRING
                out.append(Transition("firing", j, st.since_step))
            else:
                st.state = PENDING
                out.append(Transition("pending", j, st.since_step))
            i = j
        elif st.state == PENDING:
            end = next_in(falses, i)
            origin = st.since_t if for_.in_seconds else st.since_step
            k = _elapsed_index(fclock, i, end, origin, for_.amount)
            if k < end:
                st.state = FIRING
                out.append(Transition("firing", k, st.since_step))
                i = k
            else:
                if end < n:
                    st.state = INACTIVE
                    out.append(Transition("inactive", end, st.since_step))
                i = end
        else:  # FIRING
            end = next_in(falses, i)
            if end > i:
                st.last_true_step, st.last_true_t = float(steps[end - 1]), float(t[end - 1])
            if end >= n:
                break
            again = next_in(trues, end)
            origin = st.last_true_t if keep.in_seconds else st.last_true_step
            if math.isnan(origin):
                origin = float(kclock[end])
            k = _elapsed_index(kclock, end, again, origin, keep.amount)
            if k < again:
                st.state = INACTIVE
                out.append(Transition("resolved", k, st.since_step))
                i = k + 1
            else:
                i = again
    return out
