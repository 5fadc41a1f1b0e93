"""Per-rank diagnoses of a replay: steps seen, the alerts that fired, the first errors, and what
they add up to (a crash before the first step, errors after step N, a clean run).

The same for a spool and for logs: a spool's errors are its failed ``run_end`` events (the
exception ``DoctorCallback`` saw unwinding ``Model.train``), a log's are its ERROR lines and
tracebacks (:mod:`msdoctor.replay.crashes`).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from msdoctor.replay.crashes import ErrorLine, known_cause, merge

Key = Tuple[str, int]
#: Errors shown per rank.
SHOWN = 3


class SpoolErrors:
    """Collects the failed ``run_end`` events of a spool's ranks, as errors."""

    def __init__(self) -> None:
        self.found: Dict[Key, List[ErrorLine]] = {}

    def observe(self, run: str, rank: int, others: Iterable[Dict[str, Any]]) -> None:
        for event in others:
            if event.get("type") != "run_end" or event.get("status") != "failed":
                continue
            text = str(event.get("exception") or "failed (no exception recorded)")
            last = [ln for ln in text.splitlines() if ln.strip()][-1:] or [text]
            cause, hint = known_cause(text)
            t = event.get("t")
            line = ErrorLine(f"events/rank-{rank}.jsonl", 0, float(t) if isinstance(t, (int, float)) else None,
                             last[0].strip()[:500], cause, hint)
            self.found[(run, rank)] = merge(self.found.get((run, rank), []), [line])


def diagnose(result: Dict[str, Any], errors: Dict[Key, Tuple[List[ErrorLine], int]],
             ranks: Iterable[Key] = ()) -> List[Dict[str, Any]]:
    """One entry per rank seen (with steps, errors, or named in ``ranks``), in rank order."""
    stats = {(p["run"], p["rank"]): p for p in result["summary"].get("stats", {}).get("per_rank", [])}
    alerts: Dict[Key, List[Dict[str, Any]]] = {}
    for a in result["alerts"]:
        alerts.setdefault((a["run"], a["rank"]), []).append(
            {"alert": a["alert"], "severity": a["severity"], "step": a["step"]})
    keys = sorted(set(stats) | set(alerts) | set(errors) | set(ranks), key=lambda k: (k[1], k[0]))
    out = []
    for key in keys:
        p = stats.get(key, {})
        found, count = errors.get(key, ([], 0))
        steps = int(p.get("steps") or 0)
        fired = alerts.get(key, [])
        text, verdict = _verdict(steps, p.get("last_step"), fired, found)
        first = found[0] if found else None
        hint = next((e.hint for e in found if e.hint), None)
        out.append({"run": key[0], "rank": key[1], "steps": steps,
                    "first_step": p.get("first_step"), "last_step": p.get("last_step"),
                    "alerts": fired, "errors": [e.to_dict() for e in found[:SHOWN]],
                    "error_count": count, "diagnosis": text, "verdict": verdict,
                    "cause": next((e.cause for e in found if e.cause), None), "hint": hint,
                    "first_error": first.to_dict() if first else None})
    return out


def _verdict(steps: int, last: Optional[int], fired: List[Dict[str, Any]],
             found: List[ErrorLine]) -> Tuple[str, Optional[str]]:
    """(one sentence, the kind) for one rank."""
    names = sorted({a["alert"] for a in fired})
    alerts = f"; alerts: {', '.join(names)}" if names else ""
    if found and not steps:
        return f"crashed before its first step: {found[0].text[:200]}", "crash-before-first-step"
    if found:
        return (f"{steps} step(s) up to step {last}{alerts}; first error: {found[0].text[:200]}",
                "errors")
    if not steps:
        return "no step lines and no errors", "no-steps"
    return f"{steps} step(s) up to step {last}{alerts or '; no alerts'}", None
