"""``GET /api/v1/runs/{run}/overview``: every rank of a run in one columnar answer.

What a rank table needs per refresh, for all ranks at once and in arrays (one
entry per rank, in the order of ``ranks``) rather than one object per rank:
status, last step, age, the latest value of the asked signals (``null`` when a
rank never recorded one), alert counts, and the last few points of one signal
for a sparkline. ``alerts_version`` changes whenever the alert feed changes, so
a poller can skip ``/alerts`` and ``/alerts/history`` while it stays the same.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from msdoctor.core.views import _run_state, number, numbers

#: Most sparkline points per rank a request may ask for.
MAX_SPARK_POINTS = 256


def alerts_version(feed: Any, active: Optional[List[Dict[str, Any]]] = None) -> str:
    """A token that changes whenever the feed's active set or history changes.

    Uses the feed's ``version`` counter when it has one, else a fingerprint of its
    newest transition and its active counts (every change appends a transition)."""
    if feed is None:
        return "none"
    version = getattr(feed, "version", None)
    if version is not None:
        return f"v{version}"
    last = feed.history(1)
    newest = last[-1] if last else {}
    active = feed.active() if active is None else active
    keys = ("t", "alert", "run", "rank", "state", "step", "value")
    return "f" + "|".join(str(newest.get(k)) for k in keys) + f"|{len(active)}"


def _column(values: List[Any]) -> List[Any]:
    """JSON-safe copy: floats that are not finite become their wire strings."""
    return [v if v is None or type(v) is int or v - v == 0.0 else number(v) for v in values]


def _spark(states: Sequence[Any], signal: str, points: int) -> List[List[Any]]:
    """The last ``points`` values of ``signal`` per rank (empty when not recorded)."""
    if points <= 0:
        return [[] for _ in states]
    parts = []
    for state in states:
        series = state.series.get(signal)
        parts.append(series.values[-points:] if series is not None else np.empty(0))
    flat = numbers(np.concatenate(parts)) if parts else []
    out, i = [], 0
    for part in parts:
        n = int(part.shape[0])
        out.append(flat[i:i + n])
        i += n
    return out


def overview(store: Any, feed: Any, run_id: str, signals: Sequence[str], spark: Optional[str],
             spark_points: int, now: Optional[float] = None) -> Dict[str, Any]:
    """Every rank of ``run_id`` as parallel arrays (see the module docstring)."""
    run_state = _run_state(store, run_id)
    ids = sorted(list(run_state.ranks))
    states = [run_state.ranks[r] for r in ids]
    now = time.time() if now is None else now
    active = feed.active() if feed is not None else []
    firing = dict.fromkeys(ids, 0)
    pending = dict.fromkeys(ids, 0)
    for a in active:
        if a.get("run") == run_id and a.get("rank") in firing:
            counts = firing if a.get("state") == "firing" else pending
            if a.get("state") in ("firing", "pending"):
                counts[a["rank"]] += 1
    names = list(signals) or sorted(set().union(*(s.latest for s in states)))
    body: Dict[str, Any] = {
        "run": run_id, "ranks": ids, "status": [s.status for s in states],
        "last_step": [s.last_step for s in states],
        "age_s": [None if s.t is None else now - s.t for s in states],
        "latest": {name: _column([s.latest.get(name) for s in states]) for name in names},
        "alerts": {"firing": [firing[r] for r in ids], "pending": [pending[r] for r in ids]},
        "alerts_version": alerts_version(feed, active),
    }
    if spark:
        body["spark"] = {"signal": spark, "points": spark_points,
                         "values": _spark(states, spark, spark_points)}
    return body
