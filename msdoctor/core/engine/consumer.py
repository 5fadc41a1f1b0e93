"""The engine as a sidecar consumer: alerts to ``alerts.jsonl``, the log, and stop requests.

Exactly-once notification across crashes: the snapshot records how far the journal
was when the engine's state was saved. A restarted engine resumes from that state and
re-evaluates the events read after it, re-finding the transitions it had already
appended; those (matched by alert, run, rank, state, step, first_step) are not handed
to the sinks again. :meth:`EngineConsumer.replace_rules` swaps the rule set in place
(``msdoctor serve`` on SIGHUP).
"""
from __future__ import annotations

import logging
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

from msdoctor.core.alerts.actions import ActionRequester
from msdoctor.core.alerts.journal import AlertJournal, Replayed
from msdoctor.core.alerts.model import Alert
from msdoctor.core.alerts.stop import write_stop_request
from msdoctor.core.engine.evaluator import Engine, Sink
from msdoctor.core.engine.lifecycle import FIRING, INACTIVE
from msdoctor.core.engine.model import Rule, RuleSet

log = logging.getLogger("msdoctor.core.alerts")


class StopRequester:
    """Sink: on a firing alert of a rule with ``action: stop_training``, write the stop request."""

    def __init__(self, run_dir: os.PathLike | str) -> None:
        self.run_dir = Path(run_dir)
        self.requested = 0

    def __call__(self, alert: Alert) -> None:
        if alert.state != "firing" or alert.action != "stop_training":
            return
        path = write_stop_request(self.run_dir, alert.summary or alert.alert, alert.alert,
                                  alert.rank, alert.step, alert.t, run=alert.run)
        self.requested += 1
        log.warning("requested the training to stop (%s): %s", path, alert.summary)


def log_alert(alert: Alert) -> None:
    """Sink: one log line per transition, with the fix when firing."""
    level = logging.WARNING if alert.state == "firing" else logging.INFO
    if alert.caused_by:
        level = logging.INFO
    elif alert.state == "firing" and alert.severity == "critical":
        level = logging.ERROR
    log.log(level, "%s", alert.describe())


class EngineConsumer(Engine):
    """An :class:`Engine` wired for ``msdoctor serve``: journal, log and stop-request sinks."""

    name = "engine"

    def __init__(self, rules: RuleSet | Sequence[Rule], run_dir: os.PathLike | str,
                 extra_sinks: Iterable[Sink] = (), log_transitions: bool = True,
                 clock: Callable[[], float] | None = None) -> None:
        self.journal = AlertJournal(run_dir)
        self._journal_held: Optional[int] = None
        self.stopper = StopRequester(run_dir)
        self.actions = ActionRequester(run_dir) if clock is None else ActionRequester(run_dir, clock)
        sinks: List[Sink] = [self.actions, self.journal, self.stopper]   # actions noted, then journalled
        if log_transitions:
            sinks.append(log_alert)
        sinks.extend(extra_sinks)
        if clock is None:
            super().__init__(rules, sinks)
        else:
            super().__init__(rules, sinks, clock=clock)
        self.replayed = Replayed(self.journal.recorded_since(0))
        if len(self.replayed):
            log.info("%s holds %d transitions; those found again will not be notified twice",
                     self.journal.path, len(self.replayed))

    # -- exactly-once notification across restarts ----------------------------
    def already_notified(self, alert: Alert) -> bool:
        return bool(self.replayed.offsets) and self.replayed.take(
            (alert.alert, alert.run, alert.rank, alert.state, alert.step, alert.first_step))

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        pending = [[offset, list(key)] for key, offsets in self.replayed.offsets.items()
                   for offset in offsets]
        offset = self.journal.size() if self._journal_held is None else self._journal_held
        state["journal"] = {"offset": offset, "pending": pending}
        state["rollbacks"] = self.actions.state_dict()
        return state

    @contextmanager
    def journal_held(self) -> Iterator[None]:
        """Inside the block, :meth:`state_dict` gives the journal's size as it is now (a
        snapshot written by a forked child reads its state while this process appends)."""
        self._journal_held = self.journal.size()
        try:
            yield
        finally:
            self._journal_held = None

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.actions.load_state_dict(state.get("rollbacks") if isinstance(state, dict) else None)
        journal = state.get("journal") if isinstance(state, dict) else None
        if not isinstance(journal, dict):
            return
        entries = [(int(o), tuple(k)) for o, k in journal.get("pending", [])]
        entries += self.journal.recorded_since(int(journal.get("offset", 0)))
        self.replayed = Replayed(entries)
        if entries:
            log.info("%d alert transitions were recorded after the snapshot; they will not be "
                     "notified again", len(entries))

    # -- rule reload ----------------------------------------------------------
    def replace_rules(self, rules: RuleSet | Sequence[Rule]) -> List[Alert]:
        """Evaluate ``rules`` from now on; return the transitions this causes.

        Alerts of removed rules end: a firing one is ``resolved``, a pending one
        ``inactive`` (both journalled, so the feed and Alertmanager drop them). Rules
        kept by name keep their alert state; operators whose expression is unchanged
        keep their windows, changed ones start fresh.
        """
        new = list(rules)
        names = {r.alert for r in new}
        out: List[Alert] = []
        for cr in self.program.rules:
            if cr.rule.alert in names:
                continue
            for rc in self.runs.values():
                for ctx in rc.ranks.values():
                    st = ctx.alerts.pop(cr.rule.alert, None)
                    if st is None or st.state == INACTIVE:
                        continue
                    state = "resolved" if st.state == FIRING else "inactive"
                    out.append(self._emit(cr, ctx, state, ctx.last_step, st.since_step,
                                          math.nan, self.clock(), {}))
        saved = Engine.state_dict(self)
        self._use_rules(new)
        Engine.load_state_dict(self, saved)
        out.extend(self.settle_all())      # consequences of a removed cause stand alone
        return out
