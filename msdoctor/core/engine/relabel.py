"""A firing alert whose ``first_rank`` was wrong when it fired gets it corrected.

Labels are given when an alert starts firing, from the ranks read so far. Live, a rank that
went first but is read later (it is slower, or its file is read in a later poll) changes the
answer: :meth:`msdoctor.core.layers.LayerBook.relabels` finds the firing alerts whose
``first_rank`` changed, and :func:`relabel` journals each as a new ``firing`` transition with
the corrected labels and a ``reason`` saying what changed (Alertmanager then gets the old label
set resolved and the new one firing). The alert itself stays as it was: same first step, same
value, still firing.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, List

from msdoctor.core.alerts.model import Alert


def relabel(engine: Any, runs: Iterable[str]) -> List[Alert]:
    """Correct ``first_rank`` on the firing alerts of ``runs``; the transitions journalled."""
    out: List[Alert] = []
    for run in runs:
        rc = engine.runs.get(run)
        if rc is None:
            continue
        for rank, alert, before in engine.layers.relabels(run):
            ctx, cr = rc.ranks.get(rank), engine._by_name.get(alert)
            if ctx is None or cr is None or alert not in ctx.firing:
                continue
            since = ctx.firing_since.get(alert)
            value, values = engine._last_values(ctx)(cr)
            now = engine.layers.assigned[(run, rank, alert)]["first_rank"]
            reason = (f"first_rank {before or 'unknown'} -> {now}: rank {now} went first "
                      "(its events were read after this alert fired)")
            t = ctx.last_t if ctx.last_t is not None else engine.clock()
            out.append(engine._emit(cr, ctx, "firing", ctx.last_step,
                                    math.nan if since is None else since, value, t, values,
                                    reason=reason))
    return out
