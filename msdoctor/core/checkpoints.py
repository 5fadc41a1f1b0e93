"""Checkpoints as the spool reports them: the last good one before an anomaly, and the poisoned.

A checkpoint of step N holds the weights after N optimizer updates. An anomaly whose first
bad step is S (a NaN loss, a spike, a plateau, stalled updates) damaged the update of step S,
so the last good checkpoint is the newest one saved at a step before S, and every checkpoint
saved from S on, while the anomaly lasted, is poisoned.
"""
from __future__ import annotations

import bisect
from typing import Any, Dict, Iterable, List, Mapping, Optional

#: Checkpoints remembered per rank (the newest ones; a job keeps far fewer on disk).
MAX_KEPT = 256
#: The fields of a checkpoint event kept in the list.
KEPT_FIELDS = ("step", "path", "t", "size_bytes", "save_s")


def note(checkpoints: List[Dict[str, Any]], event: Mapping[str, Any]) -> None:
    """Fold one ``checkpoint`` event into ``checkpoints`` (ordered by step; a save of a step
    already listed replaces it; a load is not a new checkpoint)."""
    if event.get("op", "save") != "save" or not isinstance(event.get("step"), int):
        return
    item = {k: event[k] for k in KEPT_FIELDS if event.get(k) is not None}
    steps = [c["step"] for c in checkpoints]
    i = bisect.bisect_left(steps, item["step"])
    if i < len(checkpoints) and checkpoints[i]["step"] == item["step"]:
        checkpoints[i] = item
    else:
        checkpoints.insert(i, item)
    del checkpoints[:-MAX_KEPT]


def last_before(checkpoints: List[Dict[str, Any]], step: Optional[float]) -> Optional[Dict[str, Any]]:
    """The newest checkpoint saved at a step before ``step`` (None: none known, or no step)."""
    if step is None or step != step:
        return None
    steps = [c["step"] for c in checkpoints]
    i = bisect.bisect_left(steps, step)
    return dict(checkpoints[i - 1]) if i > 0 else None


def describe(checkpoint: Optional[Mapping[str, Any]]) -> str:
    """The sentence ``{{ $checkpoint }}`` renders: ``Last good checkpoint: step 400 (PATH). ``,
    or nothing when no checkpoint before the anomaly is known."""
    if not checkpoint:
        return ""
    path = checkpoint.get("path")
    return f"Last good checkpoint: step {checkpoint['step']}" + (f" ({path})" if path else "") + ". "


def poisoning(records: Iterable[Mapping[str, Any]], run: str,
              rank: Optional[int] = None) -> List[Dict[str, Any]]:
    """The anomalies of ``run`` (and ``rank``) that poison checkpoints: alert transitions that
    named a last good checkpoint, as ``{alert, rank, first_step, until}`` (``until``: the step
    it resolved at, None while firing)."""
    spans: Dict[tuple, Dict[str, Any]] = {}
    for rec in records:
        if rec.get("run") != run or "checkpoint" not in rec:
            continue
        if rank is not None and rec.get("rank") != rank:
            continue
        key = (rec.get("alert"), rec.get("rank"), rec.get("first_step"))
        if rec.get("first_step") is None:
            continue
        span = spans.setdefault(key, {"alert": rec.get("alert"), "rank": rec.get("rank"),
                                      "first_step": rec.get("first_step"), "until": None,
                                      "checkpoint": rec.get("checkpoint")})
        if rec.get("state") == "resolved":
            span["until"] = rec.get("step")
    return sorted(spans.values(), key=lambda s: s["first_step"])


def mark(checkpoints: Iterable[Mapping[str, Any]],
         spans: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each checkpoint with ``poisoned_by`` (the alert whose anomaly it was saved during, or
    None) and ``last_good`` (the checkpoint an alert named as the one to resume from)."""
    named = {(s["checkpoint"] or {}).get("step") for s in spans if s.get("checkpoint")}
    out = []
    for c in checkpoints:
        item = dict(c)
        step = item["step"]
        item["poisoned_by"] = next((s["alert"] for s in spans if s["first_step"] <= step and (
            s["until"] is None or step <= s["until"])), None)
        item["last_good"] = step in named and item["poisoned_by"] is None
        out.append(item)
    return out
