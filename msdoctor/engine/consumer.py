"""The engine as a sidecar consumer: alerts to ``alerts.jsonl``, the log, and stop requests."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, Iterable, Sequence

from msdoctor.alerts.journal import AlertJournal
from msdoctor.alerts.model import Alert
from msdoctor.alerts.stop import write_stop_request
from msdoctor.engine.evaluator import Engine, Sink
from msdoctor.engine.model import Rule, RuleSet

log = logging.getLogger("msdoctor.alerts")


class StopRequester:
    """Sink: on a firing alert of a rule with ``action: stop_training``, write the stop request."""

    def __init__(self, run_dir: os.PathLike | str) -> None:
        self.run_dir = Path(run_dir)
        self.requested = 0

    def __call__(self, alert: Alert) -> None:
        if alert.state != "firing" or alert.action != "stop_training":
            return
        path = write_stop_request(self.run_dir, alert.summary or alert.alert, alert.alert,
                                  alert.rank, alert.step, alert.t)
        self.requested += 1
        log.warning("requested the training to stop (%s): %s", path, alert.summary)


def log_alert(alert: Alert) -> None:
    """Sink: one log line per transition, with the fix when firing."""
    level = logging.WARNING if alert.state == "firing" else logging.INFO
    if alert.state == "firing" and alert.severity == "critical":
        level = logging.ERROR
    log.log(level, "%s", alert.describe())


class EngineConsumer(Engine):
    """An :class:`Engine` wired for ``msdoctor serve``: journal, log and stop-request sinks."""

    name = "engine"

    def __init__(self, rules: RuleSet | Sequence[Rule], run_dir: os.PathLike | str,
                 extra_sinks: Iterable[Sink] = (), log_transitions: bool = True,
                 clock: Callable[[], float] | None = None) -> None:
        self.journal = AlertJournal(run_dir)
        self.stopper = StopRequester(run_dir)
        sinks = [self.journal, self.stopper]
        if log_transitions:
            sinks.append(log_alert)
        sinks.extend(extra_sinks)
        if clock is None:
            super().__init__(rules, sinks)
        else:
            super().__init__(rules, sinks, clock=clock)
