"""The end of a run for the engine: when every rank of a run has ended (``run_end``, or gone
for good, :mod:`msdoctor.core.liveness`), its pending and firing alerts end with the reason
``run ended``: a firing one is ``resolved``, a pending one ``inactive`` (Alertmanager never
saw it), as when a rule is removed. The transitions stay in the journal and the history."""
from __future__ import annotations

from typing import Any, List

from msdoctor.core.alerts.model import Alert
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.lifecycle import FIRING, INACTIVE, AlertState
from msdoctor.core.liveness import RUN_ENDED, gone_after, is_gone


def note_gone(ctx: RankContext, now: float) -> bool:
    """Mark ``ctx`` gone when it has not ended and nothing was read from it for the run's
    limit; True when it just went."""
    if ctx.gone or not ctx.running:
        return False
    if is_gone(True, ctx.heard_t, now, gone_after(ctx.run.expect)):
        ctx.gone = True
        return True
    return False


def run_over(rc: RunContext) -> bool:
    """Every rank of the run has ended or is gone for good."""
    return all(not c.running or c.gone for c in rc.ranks.values())


def end_run(engine: Any, rc: RunContext, t: float) -> List[Alert]:
    """End every pending or firing alert of ``rc`` (reason ``run ended``); gone ranks stop
    running, so clock-driven rules do not fire on them again."""
    out: List[Alert] = []
    for ctx in rc.ranks.values():
        if ctx.gone:
            ctx.running = False
        for name, st in list(ctx.alerts.items()):
            if st.state == INACTIVE:
                continue
            cr = engine._by_name.get(name)
            state = "resolved" if st.state == FIRING else "inactive"
            ctx.alerts[name] = AlertState()
            if cr is None:
                continue
            values = {k: ctx.last[i] for k, i in cr.values.items()}
            out.append(engine._emit(cr, ctx, state, ctx.last_step, st.since_step,
                                    ctx.last[cr.value], t, values, reason=RUN_ENDED))
    return out
