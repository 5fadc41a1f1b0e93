"""Read-only JSON views of the sidecar's state (what ``/api/v1`` returns).

Pure functions over the :class:`~msdoctor.core.state.Store` and the alert feed;
they copy what they return and never change the state. Non-finite numbers are
sent as the strings ``"nan"``, ``"inf"`` and ``"-inf"``, as on the event wire
(JSON has no NaN). The shapes are documented in ``docs/api.md`` and
``msdoctor.api.openapi``.
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

from msdoctor import __version__
from msdoctor.core.downsample import minmax

#: Most points a series request may ask for.
MAX_POINTS_LIMIT = 100_000


class NotFound(LookupError):
    """A run, rank or signal that the state does not have."""


def number(value: Any) -> Any:
    """A JSON-safe number: non-finite floats become their wire strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def numbers(values: np.ndarray) -> List[Any]:
    """A float array as a JSON-safe list (vectorised; only non-finite entries are touched)."""
    out = values.astype(np.float64).tolist()
    for i in np.flatnonzero(~np.isfinite(values)).tolist():
        out[i] = number(out[i])
    return out


def _alert_counts(alerts: Iterable[Dict[str, Any]]) -> Dict[str, int]:
    counts = {"firing": 0, "pending": 0}
    for a in alerts:
        if a.get("state") in counts:
            counts[a["state"]] += 1
    return counts


def _run_state(store: Any, run: str) -> Any:
    state = store.runs.get(run)
    if state is None:
        raise NotFound(f"no run {run!r}; known runs: {', '.join(sorted(store.runs)) or 'none'}")
    return state


def _rank_state(store: Any, run: str, rank: int) -> Any:
    state = _run_state(store, run).ranks.get(rank)
    if state is None:
        raise NotFound(f"run {run!r} has no rank {rank}")
    return state


def rank_view(run: str, state: Any, active: Sequence[Dict[str, Any]],
              now: Optional[float] = None, detail: bool = False) -> Dict[str, Any]:
    """One rank: status, last step, latest value of every signal, counters, its alerts."""
    mine = [a for a in active if a.get("run") == run and a.get("rank") == state.rank]
    view = {
        "run": run, "rank": state.rank, "status": state.status, "last_step": state.last_step,
        "t": state.t, "age_s": state.age(now),
        "latest": {k: number(v) for k, v in sorted(dict(state.latest).items())},
        "counters": dict(state.counters), "alerts": _alert_counts(mine),
    }
    if detail:
        view.update(run_end=state.run_end, checkpoint=state.checkpoint, stop=state.stop,
                    signals=sorted(state.series), active_alerts=[alert_view(a) for a in mine])
    return view


def run_view(run_state: Any, active: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One run: world size, config, expectations, rank count and status, step range, alerts."""
    ranks = list(run_state.ranks.values())
    steps = [r.last_step for r in ranks if r.last_step is not None]
    statuses: Dict[str, int] = {}
    for r in ranks:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "run": run_state.run, "world_size": run_state.world_size,
        "config": run_state.config, "expect": run_state.expect, "ranks": len(ranks),
        "status": statuses,
        "last_step": {"min": min(steps), "max": max(steps)} if steps else None,
        "alerts": _alert_counts(a for a in active if a.get("run") == run_state.run),
    }


def alert_view(a: Dict[str, Any]) -> Dict[str, Any]:
    """An alert transition as the API shows it (cause and fix included)."""
    keys = ("alert", "state", "severity", "run", "rank", "step", "first_step", "value",
            "summary", "cause", "fix", "runbook_url", "t", "active_since")
    view = {k: number(a.get(k)) for k in keys}
    extra = {k: v for k, v in a.items() if k not in keys}
    if extra:
        view["extra"] = {k: number(v) for k, v in extra.items()}
    return view


# -- endpoints ------------------------------------------------------------------

def status(store: Any, feed: Any, deliverers: Sequence[Any], started: float,
           run_dir: str) -> Dict[str, Any]:
    active = feed.active() if feed is not None else []
    return {
        "version": __version__, "run_dir": run_dir, "uptime_s": time.time() - started,
        "runs": len(store.runs), "ranks": sum(len(r.ranks) for r in list(store.runs.values())),
        "alerts": _alert_counts(active),
        "delivery": [{"receiver": d.receiver, **dict(d.stats)} for d in deliverers],
    }


def runs(store: Any, feed: Any) -> Dict[str, Any]:
    active = feed.active() if feed is not None else []
    return {"runs": [run_view(r, active) for r in list(store.runs.values())]}


def run(store: Any, feed: Any, run_id: str) -> Dict[str, Any]:
    active = feed.active() if feed is not None else []
    return run_view(_run_state(store, run_id), active)


def ranks(store: Any, feed: Any, run_id: str) -> Dict[str, Any]:
    run_state = _run_state(store, run_id)
    active = feed.active() if feed is not None else []
    now = time.time()
    by_rank: Dict[Any, List[Dict[str, Any]]] = {}     # one pass, not one per rank
    for a in active:
        if a.get("run") == run_id:
            by_rank.setdefault(a.get("rank"), []).append(a)
    return {"run": run_id, "ranks": [rank_view(run_id, run_state.ranks[r], by_rank.get(r, ()),
                                               now) for r in sorted(list(run_state.ranks))]}


def rank(store: Any, feed: Any, run_id: str, rank_id: int) -> Dict[str, Any]:
    active = feed.active() if feed is not None else []
    return rank_view(run_id, _rank_state(store, run_id, rank_id), active, detail=True)


def _series(state: Any, signal: str, since: int, max_points: Optional[int]) -> Dict[str, Any]:
    series = state.series.get(signal)
    if series is None:
        raise NotFound(f"rank {state.rank} has no signal {signal!r}; it has: "
                       f"{', '.join(sorted(state.series)) or 'none'}")
    steps, values = series.since(since)
    total = int(steps.shape[0])
    if max_points is not None and total > max_points:
        steps, values = minmax(steps, values, max_points)
    return {"steps": steps.tolist(), "values": numbers(values), "points": total,
            "downsampled": int(steps.shape[0]) < total}


def rank_series(store: Any, run_id: str, rank_id: int, signals: Sequence[str], since: int,
                max_points: Optional[int]) -> Dict[str, Any]:
    state = _rank_state(store, run_id, rank_id)
    wanted = list(signals) or sorted(state.series)
    return {"run": run_id, "rank": rank_id, "since": since, "last_step": state.last_step,
            "series": {s: _series(state, s, since, max_points) for s in wanted}}


def run_series(store: Any, run_id: str, signal: str, since: int,
               max_points: Optional[int]) -> Dict[str, Any]:
    run_state = _run_state(store, run_id)
    out = {}
    for r in sorted(list(run_state.ranks)):
        state = run_state.ranks[r]
        if signal in state.series:
            out[str(r)] = _series(state, signal, since, max_points)
    if not out:
        raise NotFound(f"no rank of run {run_id!r} has signal {signal!r}")
    return {"run": run_id, "signal": signal, "since": since, "ranks": out}


def alerts(feed: Any, state: str, run_id: Optional[str], rank_id: Optional[int]) -> Dict[str, Any]:
    items = feed.active() if feed is not None else []
    if state != "active":
        items = [a for a in items if a.get("state") == state]
    if run_id is not None:
        items = [a for a in items if a.get("run") == run_id]
    if rank_id is not None:
        items = [a for a in items if a.get("rank") == rank_id]
    return {"alerts": [alert_view(a) for a in items]}


def alert_history(feed: Any, limit: int, run_id: Optional[str]) -> Dict[str, Any]:
    items = feed.history(limit if run_id is None else 10**9) if feed is not None else []
    if run_id is not None:
        items = [a for a in items if a.get("run") == run_id][-limit:]
    return {"transitions": [alert_view(a) for a in items]}
