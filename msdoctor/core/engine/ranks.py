"""The step batches of many ranks evaluated together (one poll of a live sidecar).

:meth:`Engine.process_many` hands this module the ranks whose batch continues their
stream (no step going back); every operator runs once over all their rows
(:mod:`.segments`), then each rank's alert lifecycle runs on its own rows, only for the
rules whose condition is true somewhere in them or whose alert is active. The alerts
and states are those of evaluating the ranks one after the other.
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from msdoctor.core.alerts.model import Alert
from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.carries import release
from msdoctor.core.engine.context import RankContext
from msdoctor.core.engine.lifecycle import INACTIVE, AlertState, advance
from msdoctor.core.engine.nodes import Frame, truthy
from msdoctor.core.engine.segments import fits, join_batches, segments_of


def joinable(ctx: RankContext, batch: StepBatch) -> bool:
    """True when ``batch`` continues ``ctx``'s stream: one segment, keyable step numbers."""
    steps = batch.steps
    if not len(batch) or not fits(steps):
        return False
    if ctx.last_step is not None and steps[0] < ctx.last_step:
        return False
    return steps.shape[0] < 2 or bool((steps[1:] >= steps[:-1]).all())


def evaluate_ranks(engine: Any, ctxs: Sequence[RankContext],
                   batches: Sequence[StepBatch]) -> List[Alert]:
    """Evaluate each ``batches[r]`` (joinable) as ``ctxs[r]``'s next rows; the transitions,
    rank after rank."""
    frames = []
    for ctx, batch in zip(ctxs, batches):
        t = engine._times(ctx, batch.t)
        frames.append(Frame(batch.steps, batch.steps.astype(np.float64), t, batch, ctx))
    segs = segments_of(frames)
    joined = join_batches(batches)
    t_all = np.concatenate([f.t for f in frames])
    frame = Frame(joined.steps, joined.steps.astype(np.float64), t_all, joined, ctxs[0],
                  segments=segs)
    failed: Dict[int, str] = {}
    program = engine.program
    lasts: Dict[int, np.ndarray] = {}
    outs = program.evaluate_ranks(frame, [ctx.states for ctx in ctxs], failed, lasts)
    if _release_others(engine.viewing, ctxs):
        program.held.clear()                # their arrays can go once no rank views them
    _keep_last(ctxs, lasts, len(outs))
    bounds = segs.bounds.tolist()
    found: List[List[Any]] = [[] for _ in ctxs]
    records: List[Optional[np.ndarray]] = [None] * len(ctxs)   # each rank's record count
    for order, cr in enumerate(program.rules):
        if failed and engine._failed(cr, failed):
            continue
        condition = outs[cr.condition]
        assert condition is not None
        cond = truthy(condition[0])
        name = cr.rule.alert
        rows = np.flatnonzero(cond)
        todo = set(np.unique(segs.seg[rows]).tolist()) if rows.shape[0] else set()
        for r, ctx in enumerate(ctxs):
            st = ctx.alerts.get(name)
            if st is not None and st.state != INACTIVE:
                todo.add(r)
        for r in sorted(todo):
            ctx = ctxs[r]
            a, z = bounds[r], bounds[r + 1]
            st = ctx.alerts.get(name)
            if st is None:
                st = ctx.alerts[name] = AlertState()
            if records[r] is None:
                records[r] = np.arange(ctx.rows, ctx.rows + (z - a), dtype=np.float64)
            for tr in advance(st, cond[a:z], frames[r].steps, frames[r].t, cr.rule.for_,
                              cr.rule.keep_firing_for, records[r]):
                found[r].append((tr.row, order, tr, cr))
    out: List[Alert] = []
    for r, ctx in enumerate(ctxs):
        if found[r]:
            out.extend(engine._emit_found(ctx, found[r], outs, bounds[r], frames[r].steps,
                                          frames[r].t))
        last = frames[r]
        ctx.last_step = int(last.steps[-1])
        ctx.last_t = ctx.last_step_t = float(last.t[-1])
        ctx.note_time(float(last.t[-1]))
        ctx.rows += last.n
        engine.rows += last.n
    return out


def _release_others(viewing: "weakref.WeakValueDictionary[int, RankContext]",
                    ctxs: Sequence[RankContext]) -> bool:
    """The ranks of the last many-rank evaluation that are not in this one release their
    carries (views of that evaluation's arrays, :func:`.carries.release`); ``viewing``
    then holds this one's. True when some rank released them."""
    now = {id(ctx): ctx for ctx in ctxs}
    left = [ctx for key, ctx in list(viewing.items()) if key not in now]
    for ctx in left:
        release(ctx.states)
    viewing.clear()
    viewing.update(now)
    return bool(left)


def _keep_last(ctxs: Sequence[RankContext], lasts: Dict[int, np.ndarray], count: int) -> None:
    """Each rank's ``last``: every operator's value at its last row (``lasts``: per operator
    its values at the ranks' last rows; failed ones unchanged)."""
    done = sorted(lasts)
    if not done:
        return
    table = np.empty((len(done), len(ctxs)))
    for k, i in enumerate(done):
        table[k] = lasts[i]
    columns = table.T.tolist()
    everything = len(done) == count
    for ctx, values in zip(ctxs, columns):
        if everything:
            ctx.last = values
        else:
            last = ctx.last
            for i, v in zip(done, values):
                last[i] = v
