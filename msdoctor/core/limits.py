"""Bounds on what untrusted input can make the sidecar keep: the number of run ids.

Every distinct run id in a spool costs state (the store's ring buffers, the rule engine's
windows, the snapshot, ``/metrics`` series). A spool can name any number of them (one
``run_start`` line each), so the pipeline keeps at most :data:`MAX_RUNS`; the events of any
further run are refused, counted (``refused_events``, ``refused_run_starts``), shown in
``/api/v1/status`` and ``/metrics``, and logged (the first, then at each power of ten).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, Set

log = logging.getLogger("msdoctor.sidecar")

#: Run ids kept per pipeline (a run directory normally holds one; restarts keep it).
MAX_RUNS = 64


@dataclass
class RunLimit:
    """The run ids admitted so far and what was refused beyond :attr:`max_runs`."""

    max_runs: int = MAX_RUNS
    runs: Set[str] = field(default_factory=set)
    refused_events: int = 0
    refused_run_starts: int = 0
    refused_chunks: int = 0

    def know(self, runs: Iterable[str]) -> None:
        """Runs already kept (restored from a snapshot) count against the bound."""
        self.runs.update(runs)

    def admit(self, run: str, events: Iterable[Mapping[str, Any]], count: int,
              path: str) -> bool:
        """True when ``run`` is kept; otherwise count the refusal of its ``count`` events
        (``events``: those decoded one by one, run_starts among them) and report it."""
        if run in self.runs:
            return True
        if len(self.runs) < self.max_runs:
            self.runs.add(run)
            return True
        self.refused_chunks += 1
        self.refused_events += count
        self.refused_run_starts += sum(1 for e in events if e.get("type") == "run_start")
        n = self.refused_chunks
        if str(n).rstrip("0") == "1":          # the 1st, 10th, 100th, ... refused read
            log.warning("%srun %r refused: %d runs are kept already (the bound, --max-runs); "
                        "the events of further runs are counted, not kept (%d refused so far)",
                        f"{path}: " if path else "", run, self.max_runs, self.refused_events)
        return False

    def to_json(self) -> Dict[str, int]:
        return {"max_runs": self.max_runs, "runs": len(self.runs),
                "refused_events": self.refused_events,
                "refused_run_starts": self.refused_run_starts}

    def load(self, doc: Mapping[str, Any]) -> None:
        """Counters from :meth:`to_json` of a snapshot (the bound stays this one's)."""
        self.refused_events = int(doc.get("refused_events", 0))
        self.refused_run_starts = int(doc.get("refused_run_starts", 0))
