"""The run summary of a recording (a spool or a replayed log): steps, loss first/last/min,
throughput, memory, per rank."""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Optional

import numpy as np

from msdoctor.core.batch import StepBatch


class _Rank:
    __slots__ = ("rows", "first_step", "last_step", "restarts", "loss_first", "loss_last",
                 "loss_min", "loss_min_step", "nonfinite_loss", "overflows", "tps", "step_s",
                 "rss_max", "dev_peak_max", "loss_last_step", "nonfinite_since", "nonfinite_tail")

    def __init__(self) -> None:
        self.rows = 0
        self.first_step: Optional[int] = None
        self.last_step: Optional[int] = None
        self.restarts = 0
        self.loss_first = self.loss_last = self.loss_min = math.nan
        self.loss_min_step: Optional[int] = None
        self.nonfinite_loss = self.overflows = 0
        self.loss_last_step: Optional[int] = None      # of the last finite loss
        self.nonfinite_since: Optional[int] = None     # the loss is non-finite from this step on
        self.nonfinite_tail = 0                        # records in that trailing run
        self.tps: list = []
        self.step_s: list = []
        self.rss_max = self.dev_peak_max = math.nan


class RunStats:
    """Folds step batches (any order of ranks; each rank's in order) into a summary."""

    def __init__(self) -> None:
        self.ranks: Dict[tuple, _Rank] = {}

    def add(self, batch: Optional[StepBatch]) -> None:
        if batch is None or not len(batch):
            return
        r = self.ranks.get((batch.run, batch.rank))
        if r is None:
            r = self.ranks[(batch.run, batch.rank)] = _Rank()
        steps = batch.steps
        if r.first_step is None:
            r.first_step = int(steps[0])
        prev = r.last_step
        r.restarts += int((steps[1:] < steps[:-1]).sum()) + int(prev is not None and steps[0] < prev)
        r.last_step = int(steps[-1])
        r.rows += len(batch)
        loss = batch.series("loss")
        if loss is not None and len(loss[1]):
            s, v = loss
            finite = np.isfinite(v)
            r.nonfinite_loss += int((~finite).sum())
            if finite.any():
                fs, fv = s[finite], v[finite]
                if math.isnan(r.loss_first):
                    r.loss_first = float(fv[0])
                r.loss_last, r.loss_last_step = float(fv[-1]), int(fs[-1])
                last = int(np.flatnonzero(finite)[-1])
                r.nonfinite_tail = len(v) - 1 - last
                r.nonfinite_since = int(s[last + 1]) if r.nonfinite_tail else None
                i = int(np.argmin(fv))
                if math.isnan(r.loss_min) or fv[i] < r.loss_min:
                    r.loss_min, r.loss_min_step = float(fv[i]), int(fs[i])
            else:
                r.nonfinite_tail += len(v)
                if r.nonfinite_since is None:
                    r.nonfinite_since = int(s[0])
        over = batch.series("overflow")
        if over is not None:
            r.overflows += int(np.nansum(over[1] > 0))
        for name, bucket in (("tokens_per_s", r.tps), ("step_time_s", r.step_s)):
            got = batch.series(name)
            if got is not None:
                v = got[1][np.isfinite(got[1])]
                if v.size:
                    bucket.append(np.array(v[:: max(1, v.size // 2048)]))   # a bounded sample
        for name, attr in (("mem_host_rss_bytes", "rss_max"), ("mem_device_peak_bytes", "dev_peak_max")):
            got = batch.series(name)
            if got is not None and np.isfinite(got[1]).any():
                value = float(np.nanmax(got[1]))
                current = getattr(r, attr)
                setattr(r, attr, value if math.isnan(current) else max(current, value))

    def to_dict(self) -> Dict[str, Any]:
        per_rank = []
        for (run, rank), r in sorted(self.ranks.items()):
            per_rank.append({
                "run": run, "rank": rank, "steps": r.rows, "first_step": r.first_step,
                "last_step": r.last_step, "restarts": r.restarts,
                "loss_first": _num(r.loss_first), "loss_last": _num(r.loss_last),
                "loss_min": _num(r.loss_min), "loss_min_step": r.loss_min_step,
                "nonfinite_loss": r.nonfinite_loss, "overflow_steps": r.overflows,
                "loss_last_step": r.loss_last_step, "loss_nonfinite_since": r.nonfinite_since,
                "loss_nonfinite_tail": r.nonfinite_tail,
                "tokens_per_s_median": _median(r.tps), "step_time_s_median": _median(r.step_s),
                "mem_host_rss_max_bytes": _num(r.rss_max),
                "mem_device_peak_max_bytes": _num(r.dev_peak_max),
            })
        first = per_rank[0] if per_rank else {}
        mins = [p["loss_min"] for p in per_rank if isinstance(p["loss_min"], float)]
        tps = [p["tokens_per_s_median"] for p in per_rank if p["tokens_per_s_median"] is not None]
        return {
            "ranks": len(per_rank), "steps": sum(p["steps"] for p in per_rank),
            "loss_first": first.get("loss_first"), "loss_last": first.get("loss_last"),
            "loss_last_step": first.get("loss_last_step"),
            "ended_nonfinite": [{"run": p["run"], "rank": p["rank"],
                                 "since": p["loss_nonfinite_since"],
                                 "records": p["loss_nonfinite_tail"]}
                                for p in per_rank if p["loss_nonfinite_since"] is not None],
            "loss_min": min(mins) if mins else None,
            "tokens_per_s_per_device_median": float(np.median(tps)) if tps else None,
            "step_time_s_median": first.get("step_time_s_median"),
            "mem_host_rss_max_bytes": _max(p["mem_host_rss_max_bytes"] for p in per_rank),
            "mem_device_peak_max_bytes": _max(p["mem_device_peak_max_bytes"] for p in per_rank),
            "restarts": sum(p["restarts"] for p in per_rank),
            "per_rank": per_rank,
        }


def _num(x: float) -> Optional[float]:
    return None if x is None or math.isnan(x) else float(x)


def _median(parts: list) -> Optional[float]:
    return float(np.median(np.concatenate(parts))) if parts else None


def _max(values: Iterable[Optional[float]]) -> Optional[float]:
    found = [v for v in values if v is not None]
    return max(found) if found else None


def _first_rank(stats: Dict[str, Any]) -> Optional[tuple]:
    per_rank = stats.get("per_rank") or []
    return (per_rank[0]["run"], per_rank[0]["rank"]) if per_rank else None


def describe(stats: Dict[str, Any]) -> str:
    """The summary as two or three lines of text."""
    if not stats or not stats.get("steps"):
        return "no step records"
    g = lambda v, f="{:.4g}": "n/a" if v is None else f.format(v)   # noqa: E731
    ended = stats.get("ended_nonfinite") or []
    last = f"last {g(stats['loss_last'])}"
    if ended and (ended[0]["run"], ended[0]["rank"]) == _first_rank(stats):
        e = ended.pop(0)
        last = (f"ended non-finite from step {e['since']} on ({e['records']} record(s); the last "
                f"finite loss {g(stats['loss_last'])}"
                + (f" at step {stats['loss_last_step']})" if stats.get("loss_last_step") is not None
                   else ")"))
    lines = [f"{stats['steps']} step records on {stats['ranks']} rank(s)"
             + (f", {stats['restarts']} restart(s) (step numbers going back)" if stats["restarts"] else "")
             + f"; loss first {g(stats['loss_first'])}, {last}, min {g(stats['loss_min'])}"]
    if ended:
        lines.append("the loss ended non-finite on " + ", ".join(
            f"rank {e['rank']} from step {e['since']} on" for e in ended[:8])
            + (f" and {len(ended) - 8} more rank(s)" if len(ended) > 8 else ""))
    perf = []
    if stats.get("tokens_per_s_per_device_median") is not None:
        perf.append(f"{g(stats['tokens_per_s_per_device_median'], '{:,.0f}')} tokens/s/device (median)")
    if stats.get("step_time_s_median") is not None:
        perf.append(f"{g(stats['step_time_s_median'], '{:.3g}')} s/step (median)")
    for key, label in (("mem_device_peak_max_bytes", "device memory peak"),
                       ("mem_host_rss_max_bytes", "host RSS max")):
        if stats.get(key) is not None:
            perf.append(f"{label} {stats[key] / 2**30:.2f} GiB")
    if perf:
        lines.append("; ".join(perf))
    return "\n".join(lines)
