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
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

INACTIVE, PENDING, FIRING = "inactive", "pending", "firing"


@dataclass(frozen=True)
class Duration:
    """``for``/``keep_firing_for``: an amount of steps (``unit="steps"``) or seconds (``"s"``),
    and at least ``records`` recorded steps of the rank (``"500 steps and 10 records"``: in a
    log of every 500th step, 500 steps are one record)."""

    amount: float = 0.0
    unit: str = "steps"
    records: int = 0

    @property
    def in_seconds(self) -> bool:
        return self.unit == "s"

    def __str__(self) -> str:
        if self.unit == "steps":
            text = f"{int(self.amount)} step{'' if self.amount == 1 else 's'}"
        else:
            text = f"{self.amount:g}s"
        if self.records:
            text += f" and {self.records} record{'' if self.records == 1 else 's'}"
        return text


@dataclass
class AlertState:
    state: str = INACTIVE
    since_step: float = math.nan     # where the current activation began
    since_t: float = math.nan
    last_true_step: float = math.nan
    last_true_t: float = math.nan
    since_record: float = math.nan      # the rank's record count, where records are counted
    last_true_record: float = math.nan

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
                   last_true_t=number("last_true_t"), since_record=number("since_record"),
                   last_true_record=number("last_true_record"))


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


def _elapsed(clock: np.ndarray, records: Optional[np.ndarray], start: int, end: int,
             origin: float, since_record: float, span: Duration) -> int:
    """First index in [start, end) where ``span`` has elapsed on its clock and, if it asks for
    records, on the record count (``end`` if none)."""
    k = _elapsed_index(clock, start, end, origin, span.amount)
    if span.records and records is not None and k < end:
        if math.isnan(since_record):
            since_record = float(records[start])
        k = max(k, _elapsed_index(records, start, end, since_record, float(span.records)))
    return k


def advance(st: AlertState, cond: np.ndarray, steps: np.ndarray, t: np.ndarray,
            for_: Duration, keep: Duration, records: Optional[np.ndarray] = None
            ) -> List[Transition]:
    """Run the lifecycle over one batch; return the transitions in order. ``records``: the
    rank's record count at each row (a clock tick repeats the last), for durations in records."""
    n = cond.shape[0]
    out: List[Transition] = []
    if n == 0:
        return out
    if st.state == INACTIVE and not cond.any():
        return out
    if st.state == FIRING and cond.all():
        st.last_true_step, st.last_true_t = float(steps[-1]), float(t[-1])
        if records is not None:
            st.last_true_record = float(records[-1])
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
            st.since_record = math.nan if records is None else float(records[j])
            if for_.amount <= 0 and not for_.records:
                st.state = FIRING
                out.append(Transition("firing", j, st.since_step))
            else:
                st.state = PENDING
                out.append(Transition("pending", j, st.since_step))
            i = j
        elif st.state == PENDING:
            end = next_in(falses, i)
            origin = st.since_t if for_.in_seconds else st.since_step
            k = _elapsed(fclock, records, i, end, origin, st.since_record, for_)
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
                if records is not None:
                    st.last_true_record = float(records[end - 1])
            if end >= n:
                break
            again = next_in(trues, end)
            origin = st.last_true_t if keep.in_seconds else st.last_true_step
            if math.isnan(origin):
                origin = float(kclock[end])
            k = _elapsed(kclock, records, end, again, origin, st.last_true_record, keep)
            if k < again:
                st.state = INACTIVE
                out.append(Transition("resolved", k, st.since_step))
                i = k + 1
            else:
                i = again
    return out
