"""The rule engine: evaluates a rule set over each rank's step batches and on clock ticks.

Feed it with :meth:`Engine.process` (or, as a sidecar consumer, ``on_chunk``)
and :meth:`Engine.on_tick`; every alert transition is handed to the sinks
(callables taking an :class:`~msdoctor.core.alerts.Alert`) exactly once. Its whole
memory (operator carry-overs, alert states) is bounded by the rules' windows
and is saved/restored with ``state_dict``/``load_state_dict``.
"""
from __future__ import annotations

import logging
import math
import time
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from msdoctor.core import checkpoints
from msdoctor.core.alerts.model import Alert
from msdoctor.core.batch import StepBatch, columnize
from msdoctor.core.engine import persist
from msdoctor.core.engine.causes import CauseGraph
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.lifecycle import FIRING, INACTIVE, AlertState, advance
from msdoctor.core.engine.model import Rule, RuleSet
from msdoctor.core.engine.nodes import Frame, Signal, truthy
from msdoctor.core.engine.program import CompiledRule, Program
from msdoctor.core.engine.runend import end_run, run_over
from msdoctor.core.engine.ticks import tick_one, tick_run
from msdoctor.core.layers import LayerBook
from msdoctor.core.spool import Chunk
from msdoctor.core.state import Store

log = logging.getLogger("msdoctor.core.engine")
Sink = Callable[[Alert], None]
#: A rule's value and named values at the row being emitted.
ValuesAt = Callable[[CompiledRule], Tuple[float, Dict[str, float]]]
#: Batches up to this many rows are evaluated together with other ranks' (a live poll, a
#: first read of many ranks); longer ones rank by rank, where the per-operator cost is
#: amortised. A group is evaluated once it holds GROUP_ROWS rows: every operator's values
#: over the group's rows are held at once (~5 KB a row with the shipped rules).
MANY_ROWS = 4096
GROUP_ROWS = 8192
#: ... and once its ranks' new rows plus the rows they have carried (each rank's rows so
#: far, an upper bound of the points its window operators keep) reach GROUP_CARRIED: the
#: evaluation gathers every carry of the group with the new rows, so a poll of 1024 ranks
#: x 1 new step at 10k steps each would otherwise hold all of them twice at once.
GROUP_CARRIED = 1 << 21


class Engine:
    """Evaluate ``rules`` per (run, rank); hand transitions to ``sinks``."""

    name = "engine"

    def __init__(self, rules: RuleSet | Sequence[Rule], sinks: Iterable[Sink] = (),
                 clock: Callable[[], float] = time.time) -> None:
        self._use_rules(rules)
        self.sinks: List[Sink] = list(sinks)
        self.clock = clock
        self.runs: Dict[str, RunContext] = {}
        self.errors: List[str] = []
        self._reported: Set[Tuple[str, str]] = set()
        self.transitions = 0
        self.rows = 0
        self.layers = LayerBook()
        #: the ranks whose carries are views of the last many-rank evaluation's arrays
        self.viewing: "weakref.WeakValueDictionary[int, RankContext]" = \
            weakref.WeakValueDictionary()

    def _use_rules(self, rules: RuleSet | Sequence[Rule]) -> None:
        """Compile ``rules`` into the program evaluated from now on."""
        self.rules: List[Rule] = list(rules)
        self.program = Program(self.rules)
        self.causes = CauseGraph.of(self.rules)
        self._by_name = {cr.rule.alert: cr for cr in self.program.rules}
        self._tick_rules = sorted((cr for cr in self.program.rules if cr.rule.time_based),
                                  key=lambda cr: self.causes.depth.get(cr.rule.alert, 0))
        ticked = {i for cr in self._tick_rules for i in cr.uses}    # what a tick re-judges
        self._tick_nodes = [i for i in self.program.clock_nodes if i in ticked]
        self._kept_nodes = [i for i, n in enumerate(self.program.nodes)
                            if isinstance(n, Signal) or n.run_scoped]

    # -- contexts -----------------------------------------------------------
    def rank_context(self, run: str, rank: int) -> RankContext:
        rc = self.runs.get(run)
        if rc is None:
            rc = self.runs[run] = RunContext(run)
        ctx = rc.ranks.get(rank)
        if ctx is None:
            ctx = rc.ranks[rank] = RankContext(rc, rank, self.program.new_states(),
                                               self.program.initial_values())
        return ctx

    # -- input ------------------------------------------------------------
    def on_chunk(self, chunk: Chunk, store: Optional[Store] = None) -> List[Alert]:
        """Sidecar consumer hook: one spool chunk of one (run, rank)."""
        events = getattr(chunk, "others", None)
        if events is None:
            events = [e for e in chunk.events if e.get("type") != "step"]
        steps = getattr(chunk, "steps", None)
        if steps is None and any(e.get("type") == "step" for e in chunk.events):
            steps = columnize(chunk.run, chunk.rank, [e for e in chunk.events if e["type"] == "step"])
        return self.process(chunk.run, chunk.rank, events, steps)

    def process(self, run: str, rank: int, events: Iterable[Dict[str, Any]] = (),
                steps: Optional[StepBatch] = None) -> List[Alert]:
        """Fold non-step ``events`` and evaluate the step batch; return the transitions."""
        ctx = self.rank_context(run, rank)
        ends = self._fold(ctx, events)
        out: List[Alert] = []
        if steps is not None and len(steps):
            self._back(ctx)
            out = self._evaluate_batch(ctx, steps)
        out.extend(self._end(ctx, ends))
        return out

    def process_many(self, items: Sequence[Tuple[str, int, List[Dict[str, Any]],
                                                 Optional[StepBatch]]]) -> List[Alert]:
        """:meth:`process` for several ``(run, rank, events, steps)`` at once (one poll):
        the batches of up to ``MANY_ROWS`` rows that continue their rank's stream are
        evaluated together (:mod:`.ranks`), ``GROUP_ROWS`` rows at a time, the others one by
        one; the same transitions and states as processing the items in order, rank after
        rank."""
        from msdoctor.core.engine.ranks import evaluate_ranks, joinable
        out: List[Alert] = []
        ctxs: List[RankContext] = []
        batches: List[StepBatch] = []
        ends: List[Tuple[RankContext, List[Dict[str, Any]]]] = []
        pending: Set[int] = set()

        def flush() -> None:
            if len(ctxs) == 1:
                out.extend(self._evaluate_batch(ctxs[0], batches[0]))
            elif ctxs:
                out.extend(evaluate_ranks(self, ctxs, batches))
            for ctx, run_ends in ends:
                out.extend(self._end(ctx, run_ends))
            ctxs.clear()
            batches.clear()
            ends.clear()
            pending.clear()

        rows = carried = 0
        for run, rank, events, steps in items:
            ctx = self.runs[run].ranks.get(rank) if run in self.runs else None
            more = 0 if steps is None else len(steps)
            held = more + (ctx.rows if ctx is not None else 0)
            if ctx is not None and id(ctx) in pending or steps is not None \
                    and (rows + more > GROUP_ROWS or ctxs and carried + held > GROUP_CARRIED):
                flush()                                 # a rank's batches stay in order
                rows = carried = 0
            if ctx is None and steps is not None and 0 < more <= MANY_ROWS:
                ctx = self.rank_context(run, rank)      # a new rank joins the others
            if ctx is None or steps is None or more > MANY_ROWS or not joinable(ctx, steps):
                out.extend(self.process(run, rank, events, steps))
                continue
            ends.append((ctx, self._fold(ctx, events)))
            self._back(ctx)
            pending.add(id(ctx))
            ctxs.append(ctx)
            batches.append(steps)
            rows += more
            carried += held
        flush()
        return out

    def _fold(self, ctx: RankContext, events: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Fold the non-step events before a batch; return the run_end ones (after it)."""
        ctx.heard_t = self.clock()
        ends = []
        for event in events:
            kind = event.get("type")
            if kind == "run_end":
                ends.append(event)
                continue
            if kind == "run_start":
                ctx.run.note_run_start(event)
                ctx.running = True
                self.layers.note_start(ctx.run.run, ctx.rank, event)
            elif kind == "layers":
                self.layers.note(ctx.run.run, ctx.rank, event)
            elif kind == "checkpoint":
                checkpoints.note(ctx.checkpoints, event)
            self._back(ctx)
            ctx.note_time(event.get("t"))
        return ends

    def _end(self, ctx: RankContext, ends: List[Dict[str, Any]]) -> List[Alert]:
        """Fold the run_end events after a batch (and end the run when it is over)."""
        for event in ends:
            ctx.running = ctx.gone = False
            ctx.note_time(event.get("t"))
        if ends and run_over(ctx.run):
            t = ctx.last_event_t
            return end_run(self, ctx.run, self.clock() if t is None else t)
        return []

    @staticmethod
    def _back(ctx: RankContext) -> None:
        """A rank gone for good that writes again runs again."""
        if ctx.gone:
            ctx.gone, ctx.running = False, True

    def on_tick(self, now: float, store: Optional[Store] = None) -> List[Alert]:
        """Clock-driven evaluation of the time-based rules of every rank."""
        return [a for run, rc in list(self.runs.items())
                for a in self.tick_ranks(run, list(rc.ranks), now)]

    def tick_rank(self, run: str, rank: int, now: float) -> List[Alert]:
        """Clock-driven evaluation of one rank only (replay: a gap inside that rank's record)."""
        ctx = self.runs[run].ranks.get(rank) if run in self.runs else None
        if ctx is None:
            return []
        return tick_one(self, ctx, float(now))

    def tick_ranks(self, run: str, ranks: Sequence[int],
                   now: "float | Sequence[float]") -> List[Alert]:
        """:meth:`tick_rank` for ``ranks`` of ``run``, in order, evaluated together; ``now``
        is one instant, or one per rank."""
        rc = self.runs.get(run)
        if rc is None:
            return []
        if isinstance(now, (int, float)):
            ctxs = [c for c in (rc.ranks.get(rank) for rank in ranks) if c is not None]
            return tick_run(self, ctxs, float(now))
        pairs = [(c, float(n)) for c, n in zip((rc.ranks.get(rank) for rank in ranks), now)
                 if c is not None]
        return tick_run(self, [c for c, _ in pairs], [n for _, n in pairs])

    # -- evaluation -------------------------------------------------------
    def _times(self, ctx: RankContext, t: np.ndarray) -> np.ndarray:
        t = np.array(t, dtype=np.float64)
        bad = np.isnan(t)
        if bad.any():
            idx = np.where(~bad, np.arange(t.shape[0]), -1)
            np.maximum.accumulate(idx, out=idx)
            fill = ctx.last_t if ctx.last_t is not None else self.clock()
            t = np.where(idx >= 0, t[np.maximum(idx, 0)], fill)
        if ctx.last_t is not None:
            t[0] = max(t[0], ctx.last_t)
        return np.maximum.accumulate(t)

    def _evaluate_batch(self, ctx: RankContext, batch: StepBatch) -> List[Alert]:
        steps = batch.steps
        t = self._times(ctx, batch.t)
        cuts = list(np.flatnonzero(steps[1:] < steps[:-1]) + 1)
        starts = [0] + [int(c) for c in cuts]
        ends = starts[1:] + [len(batch)]
        out: List[Alert] = []
        for k, (a, b) in enumerate(zip(starts, ends)):
            backwards = k > 0 or (ctx.last_step is not None and steps[0] < ctx.last_step)
            if backwards:
                self._restart_windows(ctx, int(steps[a]))
            sub = batch if (a, b) == (0, len(batch)) else batch.slice(a, b)
            out.extend(self._evaluate_segment(ctx, sub, t[a:b], ctx.rows + a))
            ctx.last_step = int(steps[b - 1])
        ctx.last_t = ctx.last_step_t = float(t[-1])
        ctx.note_time(float(t[-1]))
        ctx.rows += len(batch)
        self.rows += len(batch)
        return out

    def _restart_windows(self, ctx: RankContext, step: int) -> None:
        keep = {i: ctx.states[i] for i in self._kept_nodes}
        ctx.states = self.program.new_states()
        for i, state in keep.items():
            ctx.states[i] = state
        for st in ctx.alerts.values():
            if st.state != INACTIVE:
                st.since_step = float(step)
                st.last_true_step = float(step)

    def _evaluate_segment(self, ctx: RankContext, batch: StepBatch, t: np.ndarray,
                          base: int) -> List[Alert]:
        """Evaluate one segment (no step going back) whose first row is the rank's record ``base``."""
        steps = batch.steps
        records = np.arange(base, base + steps.shape[0], dtype=np.float64)
        frame = Frame(steps, steps.astype(np.float64), t, batch, ctx)
        failed: Dict[int, str] = {}
        lasts: Dict[int, np.ndarray] = {}
        outs = self.program.evaluate(frame, ctx.states, failed, lasts)
        last = ctx.last
        for i, v in lasts.items():
            last[i] = float(v[0])
        found = []
        for order, cr in enumerate(self.program.rules):
            name = cr.rule.alert
            if failed and self._failed(cr, failed):
                continue
            condition = outs[cr.condition]
            assert condition is not None        # only a failed operator (or its users) has none
            cond = truthy(condition[0])
            st = ctx.alerts.get(name)
            if st is None:
                if not cond.any():
                    continue
                st = ctx.alerts[name] = AlertState()
            for tr in advance(st, cond, steps, t, cr.rule.for_, cr.rule.keep_firing_for,
                              records):
                found.append((tr.row, order, tr, cr))
        return self._emit_found(ctx, found, outs, 0, steps, t)

    def _emit_found(self, ctx: RankContext, found: List[Any], outs: List[Any], base: int,
                    steps: np.ndarray, t: np.ndarray) -> List[Alert]:
        """Emit the transitions ``found`` (row, order, transition, rule) of one rank's rows,
        chronologically, causes first; operator values are read at ``base + row``."""
        depth = self.causes.depth
        found.sort(key=lambda f: (f[0], depth.get(f[3].rule.alert, 0), f[1]))  # causes first
        out: List[Alert] = []
        for k, (row, _, tr, cr) in enumerate(found):               # chronological

            def at(cr: CompiledRule, row: int = row + base) -> Tuple[float, Dict[str, float]]:
                value = outs[cr.value]
                assert value is not None
                return float(value[0][row]), {n: float(o[0][row]) for n, i in cr.values.items()
                                              if (o := outs[i]) is not None}

            value, values = at(cr)
            out.append(self._emit(cr, ctx, tr.state, int(steps[row]), tr.first_step, value,
                                  float(t[row]), values))
            if k + 1 == len(found) or found[k + 1][0] != row:
                out.extend(self._settle(ctx, int(steps[row]), float(t[row]), at))
        return out

    def _failed(self, cr: CompiledRule, failed: Dict[int, str]) -> bool:
        bad = [i for i in cr.uses if i in failed]
        if not bad:
            return False
        i = bad[0]
        key = (cr.rule.alert, failed[i].split(":")[0])
        if key not in self._reported:
            self._reported.add(key)
            message = (f"rule {cr.rule.alert}: evaluating {self.program.keys[i]} failed: "
                       f"{failed[i]} (the other rules go on; reported once)")
            self.errors.append(message)
            log.error("%s", message)
        return True

    # -- output -------------------------------------------------------------
    def _settle(self, ctx: RankContext, step: Optional[int], t: float,
                at: ValuesAt) -> List[Alert]:
        """After the transitions of one step: consequences whose cause ended are marked
        with another firing cause or become alerts of their own (a new firing transition)."""
        out: List[Alert] = []
        if not ctx.firing:
            return out
        for name, _cause in self.causes.settle(ctx.firing):
            cr = self._by_name.get(name)
            if cr is None:                      # its rule is gone: nothing fires it any more
                ctx.firing.pop(name, None)
                continue
            since = ctx.firing_since.get(name)
            value, values = at(cr)
            out.append(self._emit(cr, ctx, "firing", step, math.nan if since is None else since,
                                  value, t, values))
        return out

    def settle_all(self) -> List[Alert]:
        """Re-judge every rank's consequences (after the rules changed), as of the clock."""
        out: List[Alert] = []
        now = self.clock()
        for rc in self.runs.values():
            for ctx in rc.ranks.values():
                out.extend(self._settle(ctx, ctx.last_step, now, self._last_values(ctx)))
        return out

    @staticmethod
    def _last_values(ctx: RankContext) -> ValuesAt:
        """A rule's value and named values as the rank's last evaluation left them."""
        def at(cr: CompiledRule) -> Tuple[float, Dict[str, float]]:
            return ctx.last[cr.value], {k: ctx.last[i] for k, i in cr.values.items()}
        return at

    def _caused_by(self, ctx: RankContext, alert: str, state: str) -> Optional[str]:
        """The root cause a transition is marked with; keeps ``ctx.firing`` up to date."""
        if state == FIRING:
            if alert not in ctx.firing:
                ctx.firing[alert] = self.causes.cause_of(alert, ctx.firing)
            return ctx.firing[alert]
        if state == "resolved":
            return ctx.firing.pop(alert, None)
        return self.causes.cause_of(alert, ctx.firing)

    def _emit(self, cr: CompiledRule, ctx: RankContext, state: str, step: Optional[int],
              first_step: float, value: float, t: float, values: Dict[str, float],
              reason: Optional[str] = None) -> Alert:
        rule = cr.rule
        run = ctx.run.run
        caused_by = self._caused_by(ctx, rule.alert, state)
        labels = {"alertname": rule.alert, "rank": str(ctx.rank), "run": run, **rule.labels,
                  **self.layers.labels(rule.alert, state, run, ctx.rank, step)}
        first = None if first_step is None or math.isnan(first_step) else int(first_step)
        if state == FIRING:
            ctx.firing_since[rule.alert] = first
        elif state == "resolved":
            ctx.firing_since.pop(rule.alert, None)
        good = checkpoints.last_before(ctx.checkpoints, first) if cr.names_checkpoint else None
        scope = {"value": value, "step": step, "first_step": first, "run": run,
                 "labels": labels, "values": values, "checkpoint": checkpoints.describe(good)}
        annotations = {k: tpl.render(scope) for k, tpl in rule.templates.items()}
        alert = Alert(alert=rule.alert, state=state, severity=rule.severity, run=run,
                      rank=ctx.rank, step=step, first_step=first, value=value, t=t,
                      summary=annotations.get("summary", ""), cause=annotations.get("cause", ""),
                      fix=annotations.get("fix", ""), runbook_url=annotations.get("runbook_url", ""),
                      labels=labels, annotations=annotations, values=values, action=rule.action,
                      caused_by=caused_by, reason=reason, checkpoint=good,
                      names_checkpoint=cr.names_checkpoint)
        self.transitions += 1
        if self.already_notified(alert):
            return alert
        for sink in self.sinks:
            try:
                sink(alert)
            except Exception as exc:  # noqa: BLE001 - a sink must not stop the engine
                key = ("sink", f"{getattr(sink, '__name__', type(sink).__name__)}:{type(exc).__name__}")
                if key not in self._reported:
                    self._reported.add(key)
                    message = f"alert sink {key[1]} failed: {exc} (reported once)"
                    self.errors.append(message)
                    log.error("%s", message)
        return alert

    def already_notified(self, alert: Alert) -> bool:
        """True to keep a transition from the sinks (it was notified before a restart)."""
        return False

    # -- snapshot -----------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Operator carry-overs and alert states of every (run, rank): JSON values and numpy
        arrays (``msdoctor.core.snapshot`` stores the arrays natively, see ``split_arrays``)."""
        return persist.state_of(self)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`; operators of changed rules start fresh."""
        persist.restore(self, state)
