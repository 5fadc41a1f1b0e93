"""The plain snapshot objects every TUI widget renders.

A data source (:mod:`msdoctor.tui.source`) turns the sidecar's ``/api/v1``
answers into one :class:`Reading` per refresh; widgets never know whether it
came over HTTP, from an embedded engine, or from a test's fixed data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple

#: Rank health, worst first: decides the status colour and the "worst" sort order.
HEALTH = ("bad", "warn", "stale", "ok", "done")
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
STATE_ORDER = {"firing": 0, "pending": 1, "resolved": 2, "inactive": 3}

AlertKey = Tuple[str, str, Optional[int]]


@dataclass(frozen=True)
class AlertItem:
    """One alert instance (its latest transition)."""

    alert: str
    state: str
    severity: str
    run: str
    rank: Optional[int]
    step: Optional[int] = None
    first_step: Optional[int] = None
    value: Optional[float] = None
    summary: str = ""
    cause: str = ""
    fix: str = ""
    runbook_url: str = ""
    t: Optional[float] = None
    caused_by: Optional[str] = None       # the alert on this rank it is a consequence of

    @property
    def key(self) -> AlertKey:
        return (self.alert, self.run, self.rank)

    def order(self) -> Tuple[int, int, int, str, int]:
        """Sort key: firing before pending before resolved, root causes before their
        consequences, critical first."""
        return (STATE_ORDER.get(self.state, 9), 1 if self.caused_by else 0,
                SEVERITY_ORDER.get(self.severity, 9), self.alert,
                -1 if self.rank is None else self.rank)


@dataclass
class RankRow:
    """One rank's latest values, as a row of the rank table (``judge`` sets the health)."""

    rank: int
    status: str = "running"
    last_step: Optional[int] = None
    age_s: Optional[float] = None   # seconds since the rank's last step event
    values: Mapping[str, float] = field(default_factory=dict)
    firing: int = 0
    pending: int = 0
    critical: int = 0
    spark: Tuple[float, ...] = ()
    health: str = "ok"
    score: float = 0.0              # larger = worse; orders the "worst" sort
    alerts: Tuple[str, ...] = ()    # names of the active alerts on this rank, most severe first
    severities: Tuple[str, ...] = ()    # the severity of each of ``alerts``
    stale: bool = False             # running, no step for max(10 s, 10 median step times)

    def get(self, name: str) -> Optional[float]:
        return self.values.get(name)


@dataclass(frozen=True)
class RunSummary:
    """The run header: what, how far, how fast, how long to go, how many alerts."""

    run: str
    model: str = ""
    world_size: Optional[int] = None
    ranks: int = 0
    step: Optional[int] = None
    total_steps: Optional[int] = None
    elapsed_s: Optional[float] = None
    elapsed_estimated: bool = False
    tokens_per_s: Optional[float] = None
    eta_s: Optional[float] = None
    firing: int = 0
    pending: int = 0
    statuses: Mapping[str, int] = field(default_factory=dict)
    precision: str = ""
    worst_rank: Optional[int] = None
    goodput: Optional[float] = None          # productive time over wall time
    #: None while a rank runs; else ``outcome`` (ok / failed) and ``t`` (core.liveness)
    ended: Optional[Mapping[str, object]] = None


@dataclass(frozen=True)
class ChartData:
    """Step series of the picked ranks per signal, plus the steps where alerts fired."""

    ranks: Tuple[int, ...] = ()
    series: Mapping[str, Mapping[int, Tuple[Sequence[int], Sequence[float]]]] = \
        field(default_factory=dict)
    markers: Tuple[Tuple[int, str, str], ...] = ()     # (step, alert, severity)
    until: Optional[float] = None       # wall time of the newest event of the ranks (heartbeats too)
    window: Optional[int] = None        # the last this many steps only (None: every kept step)


@dataclass(frozen=True)
class Reading:
    """Everything one refresh shows: a reading of the source (the word "snapshot" is kept for
    the sidecar's saved state, :mod:`msdoctor.core.snapshot`)."""

    source: str
    runs: Tuple[str, ...] = ()
    run: Optional[RunSummary] = None
    ranks: Tuple[RankRow, ...] = ()
    active: Tuple[AlertItem, ...] = ()
    resolved: Tuple[AlertItem, ...] = ()
    charts: Optional[ChartData] = None
    empty_hint: str = ""
    #: the run's checkpoints (``CheckpointView``), when the checkpoints pane asked for them
    checkpoints: Optional[Tuple[Any, ...]] = None
    #: one rank's per-layer rows (``LayersView``), when the layers pane asked for them
    layers: Optional[Any] = None

    @property
    def alerts(self) -> Tuple[AlertItem, ...]:
        return tuple(sorted(self.active, key=AlertItem.order)) + self.resolved


def by_severity(items: Sequence[AlertItem]) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The alert names of ``items`` most severe first (then by name), once each, and their
    severities: what a rank's ALERTS cell lists."""
    worst_of: dict = {}
    for a in items:
        rank = SEVERITY_ORDER.get(a.severity, 9)
        if a.alert not in worst_of or rank < SEVERITY_ORDER.get(worst_of[a.alert], 9):
            worst_of[a.alert] = a.severity
    names = sorted(worst_of, key=lambda n: (SEVERITY_ORDER.get(worst_of[n], 9), n))
    return tuple(names), tuple(worst_of[n] for n in names)


# -- health ----------------------------------------------------------------------

def _median(values: List[float]) -> Optional[float]:
    if not values:
        return None
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])


def _finite(value: object) -> bool:
    if type(value) is float:                # the common case, without the isinstance calls
        return value - value == 0.0
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: Score of each health, worst highest (``judge``).
_HEALTH_SCORE = {h: 10_000.0 * (len(HEALTH) - i) for i, h in enumerate(HEALTH)}


def judge(rows: Sequence[RankRow], stale_after_s: float = 120.0) -> List[RankRow]:
    """Set ``health`` and ``score`` of every row (in place; returns them): alerts,
    failures and non-finite losses first, then the ranks furthest from the median loss
    and step time."""
    pairs = [(r.values.get("loss"), r.values.get("step_time_s")) for r in rows]
    losses = [x for x, _ in pairs if _finite(x)]
    times = [t for _, t in pairs if _finite(t)]
    med_loss, med_time = _median(losses), _median(times)
    spread = _median([abs(x - med_loss) for x in losses]) if med_loss is not None else None
    scale = 1.0
    if med_loss is not None:
        scale = max(spread or 0.0, 1e-6 * abs(med_loss), 1e-12)
    out = []
    for r, (loss, step_time) in zip(rows, pairs):
        nonfinite = isinstance(loss, float) and not loss - loss == 0.0
        if r.critical or r.status == "failed" or nonfinite:
            health = "bad"
        elif r.firing or r.pending or r.status == "stopped":
            health = "warn"
        elif r.status == "completed":
            health = "done"
        elif r.stale or r.status == "gone" or r.age_s is not None and r.age_s > stale_after_s:
            health = "stale"
        else:
            health = "ok"
        score = _HEALTH_SCORE[health] + 100.0 * r.critical + 10.0 * r.firing + r.pending
        if med_loss is not None and _finite(loss):
            score += min(9.0, abs(loss - med_loss) / scale)
        if _finite(step_time) and med_time:
            score += min(9.0, max(0.0, step_time / med_time - 1.0) * 10.0)
        r.health, r.score = health, score
        out.append(r)
    return out


def worst(rows: Sequence[RankRow]) -> Optional[RankRow]:
    """The rank most in need of a look (highest score; lowest rank on ties)."""
    return max(rows, key=lambda r: (r.score, -r.rank), default=None)
