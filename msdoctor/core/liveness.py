"""Whether a rank is live, stale, ended or gone, and what its rates are as of now.

One rule, read by every front end (``/metrics``, ``/api/v1``, the TUI) and by the engine:

- A rank's **age** is the wall time since its last *step* event (heartbeats do not count:
  a hung process keeps heartbeating).
- A running rank is **stale** once its age exceeds ``max(STALE_MIN_S, STALE_STEPS x its
  median step time)``, the median over its last ``MEDIAN_POINTS`` recorded step times.
- Its **rates are computed over wall time up to now**: while it is live they are the last
  step's; a stale or ended rank reports 0 tokens/s (so it drops out of every sum), and a
  stale rank's step time is its age (the step in progress has lasted at least that long).
- A rank has **ended** when it wrote ``run_end``, or when it is **gone for good**: the
  sidecar has read no event of any kind from it (heartbeats included) for ``GONE_AFTER_S``
  of its own clock (a run may set its own limit in ``run_start.expect.gone_after_s``). It
  counts from when the sidecar *read* the rank's last line, so a sidecar started on an old
  spool (or ``replay``) watches it that long before calling it gone, and a live rank that
  heartbeats is never gone. A run has ended when every rank it has has ended.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional

import numpy as np

#: A rank is stale after this many median step times without a step...
STALE_STEPS = 10.0
#: ... and never sooner than this many seconds.
STALE_MIN_S = 10.0
#: How many of the last step times the median is taken over.
MEDIAN_POINTS = 64
#: A rank with no event of any kind (heartbeats included) for this long is gone for good.
GONE_AFTER_S = 3600.0
#: The reason a run's alerts resolve with when it has ended.
RUN_ENDED = "run ended"
#: Signals that are rates: 0 once the rank is stale or ended.
RATE_SIGNALS = ("tokens_per_s",)


def stale_after(median_step_s: Optional[float]) -> float:
    """Seconds without a step after which a running rank is stale."""
    if median_step_s is None or not math.isfinite(median_step_s) or median_step_s <= 0:
        return STALE_MIN_S
    return max(STALE_MIN_S, STALE_STEPS * median_step_s)


def gone_after(expect: Optional[Mapping[str, Any]] = None) -> float:
    """Seconds without any event after which a rank is gone for good."""
    value = (expect or {}).get("gone_after_s")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return GONE_AFTER_S


def median_of(values: np.ndarray) -> Optional[float]:
    """The median of the last :data:`MEDIAN_POINTS` finite values, or None."""
    tail = values[-MEDIAN_POINTS:]
    tail = np.sort(tail[np.isfinite(tail)])       # np.median's value, without its overhead
    n = tail.shape[0]
    return float((tail[(n - 1) // 2] + tail[n // 2]) / 2.0) if n else None


def is_gone(running: bool, heard_t: Optional[float], now: float, limit: float) -> bool:
    """A rank that has not ended and from which nothing at all was read (``heard_t``: the
    sidecar's clock when it read the rank's last line) for ``limit`` seconds."""
    return running and heard_t is not None and now - heard_t > limit


def live_values(latest: Mapping[str, float], running: bool, stale: bool,
                age_s: Optional[float]) -> Dict[str, float]:
    """``latest`` with the rates as of now (see the module docstring)."""
    if running and not stale:
        return dict(latest)
    out = dict(latest)
    for name in RATE_SIGNALS:
        if name in out:
            out[name] = 0.0
    if stale and age_s is not None and "step_time_s" in out:
        out["step_time_s"] = stale_step_time(out["step_time_s"], age_s)
    return out


def stale_step_time(value: float, age_s: float) -> float:
    """A stale rank's step time: its age, the least the step in progress has taken."""
    return max(value, age_s) if math.isfinite(value) else age_s


def rank_status(status: str, gone: bool) -> str:
    """A rank's status as the views show it: ``gone`` for a running rank gone for good."""
    return "gone" if gone and status == "running" else status


def run_end_of(ranks: Any, now: float, expect: Optional[Mapping[str, Any]] = None
               ) -> Optional[Dict[str, Any]]:
    """How a run ended, or None while one of its ranks runs: ``outcome`` ``ok`` when every
    rank completed, else ``failed``; ``t`` the last rank's end (its ``run_end`` time, or its
    last event when gone); ``statuses`` rank count per final status (``gone`` included).

    ``ranks``: objects with ``status``, ``run_end``, ``t`` and ``received``
    (:class:`~msdoctor.core.state.RankState`)."""
    limit = gone_after(expect)
    statuses: Dict[str, int] = {}
    last = -math.inf
    found = False
    for r in ranks:
        found = True
        status = r.status
        if status == "running":
            if not is_gone(True, r.received, now, limit):
                return None
            status, t = "gone", r.t
        else:
            t = (r.run_end or {}).get("t", r.t)
        statuses[status] = statuses.get(status, 0) + 1
        if isinstance(t, (int, float)) and t > last:
            last = float(t)
    if not found:
        return None
    outcome = "ok" if set(statuses) == {"completed"} else "failed"
    return {"outcome": outcome, "t": last if math.isfinite(last) else None, "statuses": statuses}
