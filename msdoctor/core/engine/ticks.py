"""The clock-driven rules on a tick: one rank (:func:`tick_one`), or every rank of a run
at once (:func:`tick_run`, what a live poll does).

A tick re-evaluates the operators that read the clock or the run's facts (and those built
on them only) for one instant; every other operator keeps its value at the rank's last
row. :func:`tick_run` evaluates each such operator once over a vector of the run's ranks
instead of once per rank, then runs each rank's alert lifecycle in rank order, as
:func:`tick_one` rank after rank would: the same transitions, states and alerts.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from msdoctor.core.alerts.model import Alert
from msdoctor.core.engine.context import RankContext
from msdoctor.core.engine.lifecycle import INACTIVE, AlertState, advance
from msdoctor.core.engine.nodes import Clock, Frame, RunFact, truthy
from msdoctor.core.engine.runend import end_run, note_gone, run_over


def tick_one(engine: Any, ctx: RankContext, now: float) -> List[Alert]:
    """Judge one rank's clock-driven rules as of ``now`` (and note it gone if it is)."""
    if run_over(ctx.run):           # its alerts ended with it; the clock raises no new ones
        return []
    out = _rules_of(engine, ctx, now) if engine._tick_rules else []
    if note_gone(ctx, now) and run_over(ctx.run):   # after its rules: it was judged alive
        out.extend(end_run(engine, ctx.run, now))
    return out


def _rules_of(engine: Any, ctx: RankContext, now: float) -> List[Alert]:
    step = ctx.last_step if ctx.last_step is not None else 0
    frame = Frame(np.array([step], dtype=np.int64), np.array([float(step)]),
                  np.array([now]), None, ctx, now=now)
    failed: Dict[int, str] = {}
    fresh = engine.program.tick(frame, ctx.states, ctx.last, failed, engine._tick_nodes)
    return _judge(engine, ctx, now, frame, failed, lambda i: fresh.get(i, ctx.last[i]))


def _judge(engine: Any, ctx: RankContext, now: float, frame: Frame, failed: Dict[int, str],
           value_of: Any) -> List[Alert]:
    """One rank's lifecycle on a tick; ``value_of(i)`` is operator i's value for it."""
    out: List[Alert] = []
    for cr in engine._tick_rules:
        if failed and engine._failed(cr, failed):
            continue
        name = cr.rule.alert
        cond = truthy(np.array([value_of(cr.condition)], dtype=np.float64))
        st = ctx.alerts.get(name)
        if st is None:
            if not cond[0]:
                continue
            st = ctx.alerts[name] = AlertState()
        for tr in advance(st, cond, frame.fsteps, frame.t, cr.rule.for_,
                          cr.rule.keep_firing_for, np.array([ctx.rows - 1.0])):
            values = {k: value_of(i) for k, i in cr.values.items()}
            out.append(engine._emit(cr, ctx, tr.state, ctx.last_step, tr.first_step,
                                    value_of(cr.value), now, values))
    if out:
        out.extend(engine._settle(ctx, ctx.last_step, now, lambda cr: (
            value_of(cr.value), {k: value_of(i) for k, i in cr.values.items()})))
    return out


def tick_run(engine: Any, ctxs: Sequence[RankContext], now: "float | Sequence[float]"
             ) -> List[Alert]:
    """:func:`tick_one` for ``ctxs`` (ranks of one run), in their order, with each ticked
    operator evaluated once for all of them; ``now`` is one instant for all, or one per rank
    (a first read ticks each rank through its own pauses)."""
    t = np.broadcast_to(np.asarray(now, dtype=np.float64), (len(ctxs),)).copy()
    if len(ctxs) < 2 or not engine._tick_rules:
        return [a for r, ctx in enumerate(ctxs) for a in tick_one(engine, ctx, float(t[r]))]
    steps = np.array([0 if c.last_step is None else c.last_step for c in ctxs], dtype=np.int64)
    fsteps = steps.astype(np.float64)

    def frame_of(r: int) -> Frame:
        return Frame(steps[r:r + 1], fsteps[r:r + 1], t[r:r + 1], None, ctxs[r], now=float(t[r]))

    whole = Frame(steps, fsteps, t, None, ctxs[0], now=float(t[0]))     # a row per rank
    fresh = _evaluate(engine, ctxs, whole, frame_of(0))
    if fresh is None:                # an operator raised, or is of no kind known here
        return [a for r, ctx in enumerate(ctxs) for a in tick_one(engine, ctx, float(t[r]))]
    need = np.zeros(len(ctxs), dtype=bool)       # a condition holds: the lifecycle moves
    for cr in engine._tick_rules:
        i = cr.condition
        need |= truthy(fresh[i] if i in fresh else np.array([c.last[i] for c in ctxs]))
    names = [cr.rule.alert for cr in engine._tick_rules]
    out: List[Alert] = []
    for r, ctx in enumerate(ctxs):
        if run_over(ctx.run):
            break                    # every rank of this run: the run it belongs to is over
        last, now_r = ctx.last, float(t[r])
        if need[r] or any((st := ctx.alerts.get(n)) is not None and st.state != INACTIVE
                          for n in names):
            out.extend(_judge(engine, ctx, now_r, frame_of(r), {},
                              lambda i, r=r, last=last: float(fresh[i][r]) if i in fresh
                              else last[i]))
        if note_gone(ctx, now_r) and run_over(ctx.run):
            out.extend(end_run(engine, ctx.run, now_r))
    return out


def _evaluate(engine: Any, ctxs: Sequence[RankContext], frame: Frame,
              first: Frame) -> Optional[Dict[int, np.ndarray]]:
    """Each ticked operator over the vector of ranks (the clock's, the run's facts, and
    row-wise operators over them) over ``frame``, a row per rank (``first``: the first
    rank's own); None when one raised or is of another kind."""
    program = engine.program
    R = len(ctxs)
    lasts = [ctx.last for ctx in ctxs]
    fresh: Dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for i in engine._tick_nodes:
            node = program.nodes[i]
            args = [(fresh[a] if a in fresh
                     else np.array([last[a] for last in lasts], dtype=np.float64), None)
                    for a in program.args[i]]
            try:
                if isinstance(node, Clock):
                    values = _clock(node.name, ctxs, frame.t)
                elif isinstance(node, RunFact):     # one run: the same fact for every rank
                    values = np.full(R, float(node.evaluate(first, [], {})[0][0]))
                elif node.rowwise:
                    values = node.evaluate(frame, args, {})[0]
                else:           # an operator of another kind: judged rank by rank
                    return None
            except Exception:  # noqa: BLE001 - judged rank by rank, where it is reported
                return None
            fresh[i] = np.asarray(values, dtype=np.float64)
    return fresh


def _clock(name: str, ctxs: Sequence[RankContext], now: np.ndarray) -> np.ndarray:
    """:class:`~msdoctor.core.engine.nodes.Clock`'s value on a tick, for each rank (``now``:
    each rank's instant)."""
    if name == "running":
        return np.array([1.0 if c.running else 0.0 for c in ctxs])
    if name == "seconds_since_step":
        since = [c.last_step_t if c.last_step_t is not None else c.first_event_t for c in ctxs]
    else:
        since = [c.last_event_t for c in ctxs]
    return np.array([math.nan if s is None else float(n) - s for s, n in zip(since, now)],
                    dtype=np.float64)
