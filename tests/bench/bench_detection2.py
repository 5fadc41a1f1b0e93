"""Detection of the shipped rules on the second generator's labelled runs (generator2/faults2).

Every run is replayed through the real engine as ``bench_detection.py`` feeds it (a run_start
per rank and per restart; ranks interleaved 256 step numbers at a time, 8192 for one rank,
divided by the log interval; a clock tick after each slab; heartbeats every 30 s once a hung
job stops; run_end), and the firing transitions are scored per fault:

- recall: share of the runs in which an alert that diagnoses the fault (``faults2.KINDS``:
  a regular expression, so a new or renamed rule counts) fired on the affected rank at or
  after the onset; split by early and late onsets;
- delay: steps after the onset on dense logs, records after the onset record on sparse and
  epoch logs (JobHung: seconds after the last step); "on time": share of the runs caught
  within the issue's target (the same number in records on sparse logs; memory growth:
  before the memory grew 10 %);
- false alerts: warning/critical firing transitions on the healthy runs per 10k healthy
  records (all ranks), per alert and per shape (curve family, logging, ranks, resumes).

A row passes when recall >= 0.9, >= 90 % of the runs are on time (of the detectable runs
where the fault has an oracle, below), and its alerts fire at most once per 10k healthy
records; the last line checks all alerts together (<= 1 per 10k).

Where no detector can be on time, on time is judged on the detectable runs only. A plateau
run carries ``Label.oracle_z`` (``faults2.oracle_z``): how many noise standard deviations
separate its flattened loss from the healthy curve over the target window, for a detector
that knows both noise-free curves, computed from the generator's curves and noise alone. A
run is detectable when oracle_z >= :data:`ORACLE_Z`; for such a kind the row's on-time
check uses the detectable runs ("ontime det": share and n/N), while "ontime" (all runs) is
still printed, with the undetectable runs that were late or missed ("beyond") and those
caught on time anyway ("lucky"). No detectable run: the on-time check is not applied.
Recall is over all runs.

    .venv/bin/python tests/bench/bench_detection2.py [--quick] [--rules DIR] [--fault-seeds N ...]
        [--healthy-seeds N ...] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
from faults2 import KINDS, faulty_suite, healthy_suite  # noqa: E402
from generator2 import Run, Table  # noqa: E402
from replaykit import RULES_DIR, feed, firings  # noqa: E402  (sets the import path)

from msdoctor.core.batch import assemble  # noqa: E402
from msdoctor.core.engine import Engine, load_rules  # noqa: E402

TARGET_RECALL, TARGET_ON_TIME, TARGET_FALSE_PER_10K = 0.9, 0.9, 1.0
HEALTHY_SEEDS, FAULT_SEED = (11, 12, 13, 14), 21
ORACLE_Z = 4.0
"""A run is detectable when an oracle that knows the healthy and the faulty noise-free curves
separates them by this many noise sd within the target. A one-sided test at 4 sigma fires by
chance about once in 30k tests, the order of the false-alert budget (1 per 10k records); a
rule held to that budget cannot be expected to catch less separated runs on time. Fixed
before looking at any rule's results."""


@dataclass
class Fired:
    alert: str
    severity: str
    rank: int
    step: Optional[int]
    t: Optional[float]


@dataclass
class Outcome:
    run: Run
    fired: List[Fired] = field(default_factory=list)
    seconds: float = 0.0


def batch_of(run: Run, rank: int, lo: int, hi: int):
    """Rows lo:hi of a rank's table as the ingest would hand them to the engine."""
    table: Table = run.ranks[rank]
    whole = [name for name in table.cols if name not in table.present]
    tables = [(None, tuple(whole), np.column_stack([table.cols[k][lo:hi] for k in whole]))]
    for name, mask in table.present.items():
        rows = np.flatnonzero(mask[lo:hi])
        if rows.shape[0]:
            tables.append((rows, (name,), table.cols[name][lo:hi][rows].reshape(-1, 1)))
    return assemble(run.run_id, rank, table.step[lo:hi], table.t[lo:hi], tables)


def _start(run: Run, rank: int, t: float) -> Dict:
    return {"v": 1, "type": "run_start", "rank": rank, "run": run.run_id, "t": t,
            "world_size": run.shape.world_size, "config": run.config, "expect": run.expect}


def replay(run: Run, engine: Engine) -> Outcome:
    """Feed ``run`` to ``engine`` as the sidecar would; collect the firing transitions."""
    outcome = Outcome(run)
    sink = firings(engine, lambda a: Fired(a.alert, a.severity, a.rank, a.step, a.t),
                   outcome.fired)
    started = time.perf_counter()
    first_t = min(float(t.t[0]) for t in run.ranks.values()) - 5.0
    feed(engine, run.run_id, list(run.ranks), len(run.ranks[0]), run.shape.every,
         dict(run.restarts), lambda rank, t: _start(run, rank, first_t if t is None else t),
         lambda rank, lo, hi: batch_of(run, rank, lo, hi),
         lambda hi: max(float(t.t[hi - 1]) for t in run.ranks.values()),
         run.heartbeats, run.end_t)
    outcome.seconds = time.perf_counter() - started
    engine.sinks.remove(sink)
    return outcome


def groups_of(run: Run) -> List[str]:
    """The shape groups a healthy run counts in."""
    s = run.shape
    out = [f"family {s.family}", f"log {s.logging}", f"{s.precision}"]
    out.append("multi-rank" if s.world_size > 1 else "one rank")
    if s.resumed:
        out.append("resumed")
    return out


def detection(o: Outcome) -> Dict:
    """Whether and how fast the fault of a labelled run was diagnosed."""
    label, kind = o.run.label, KINDS[o.run.label.kind]
    pattern = re.compile(kind.alerts)
    table = o.run.ranks[label.rank or 0]
    after = [f for f in o.fired if (label.rank is None or f.rank == label.rank)
             and f.step is not None and f.step >= label.onset_step]
    after.sort(key=lambda f: (f.step, f.t if f.t is not None else math.inf))
    hits = [f for f in after if pattern.fullmatch(f.alert)]
    serious = [f.alert for f in after if f.severity in ("warning", "critical")]
    early = sorted(f.alert for f in o.fired if f.step is not None and f.step < label.onset_step
                   and f.severity in ("warning", "critical"))
    found: Dict = {"run": o.run.run_id, "kind": label.kind, "timing": label.timing,
                   "logging": o.run.shape.logging, "unit": label.unit, "target": label.target,
                   "onset_step": label.onset_step, "onset_record": label.onset_record,
                   "oracle_z": None if math.isnan(label.oracle_z) else label.oracle_z,
                   "first_alert": serious[0] if serious else None, "detected": bool(hits),
                   "alert": None, "delay": None, "delay_steps": None,
                   "early_alerts": early, "early_false": len(early)}
    if not hits:
        return found
    first = hits[0]
    if label.unit == "seconds":
        first = min(hits, key=lambda f: f.t if f.t is not None else math.inf)
        delay = float(first.t - label.hang_t)
    elif label.unit == "records":
        delay = float(np.searchsorted(table.step, first.step) - label.onset_record)
    else:
        delay = float(first.step - label.onset_step)
    found.update(alert=first.alert, delay=delay, delay_steps=int(first.step - label.onset_step))
    return found


def _oracle(mine: List[Dict], in_time: set) -> Dict:
    """On time over the detectable runs (oracle_z >= ORACLE_Z) of a kind whose runs carry
    an oracle_z; the undetectable runs late or missed ("beyond") and on time ("lucky")."""
    if not mine or any(d["oracle_z"] is None for d in mine):
        return {"oracle": False, "detectable": None, "on_time_detectable": None,
                "on_time_detectable_n": None, "beyond_oracle": None,
                "beyond_caught_on_time": None, "undetectable": []}
    detectable = [d for d in mine if d["oracle_z"] >= ORACLE_Z]
    undetectable = [d for d in mine if d["oracle_z"] < ORACLE_Z]
    n_on_time = sum(id(d) in in_time for d in detectable)
    return {"oracle": True, "detectable": len(detectable),
            "on_time_detectable": n_on_time / len(detectable) if detectable else None,
            "on_time_detectable_n": n_on_time,
            "beyond_oracle": sum(id(d) not in in_time for d in undetectable),
            "beyond_caught_on_time": sum(id(d) in in_time for d in undetectable),
            "undetectable": [d["run"] for d in undetectable]}


def _stats(values: Sequence[float]) -> Dict:
    return {"median": float(np.median(values)) if values else None,
            "max": float(np.max(values)) if values else None}


def score(healthy: List[Outcome], faulty: List[Outcome], severities: Dict[str, str]) -> Dict:
    """Per fault: recall, delays, on-time share; per alert and shape: false alerts."""
    records = sum(o.run.records for o in healthy)
    false: Counter = Counter()
    by_group: Dict[str, Counter] = {}
    group_records: Counter = Counter()
    for o in healthy:
        groups = groups_of(o.run)
        for g in groups:
            group_records[g] += o.run.records
            by_group.setdefault(g, Counter())
        for f in o.fired:
            if f.severity in ("warning", "critical"):
                false[f.alert] += 1
                for g in groups:
                    by_group[g][f.alert] += 1
    found = [detection(o) for o in faulty]
    rows = {}
    for name, kind in KINDS.items():
        mine = [d for d in found if d["kind"] == name]
        if not mine:
            continue
        pattern = re.compile(kind.alerts)
        own_false = sum(n for a, n in false.items() if pattern.fullmatch(a))
        caught = [d for d in mine if d["detected"]]
        on_time = [d for d in caught if d["target"] is None or d["delay"] <= d["target"]]
        in_time = {id(d) for d in on_time}
        row = {"alerts": kind.alerts, "runs": len(mine), "target": kind.target,
               "recall": len(caught) / len(mine),
               "on_time": len(on_time) / len(mine) if kind.target else None,
               "false_per_10k": own_false * 1e4 / max(1, records),
               "dense": _stats([d["delay"] for d in caught if d["unit"] != "records"]),
               "sparse": _stats([d["delay"] for d in caught if d["unit"] == "records"]),
               "first_alerts": dict(Counter(d["first_alert"] or "(none)"
                                             for d in mine).most_common(3)),
               "missed": [d["run"] for d in mine if not d["detected"]]}
        row.update(_oracle(mine if kind.target else [], in_time))
        parts = {"early": [d for d in mine if d["timing"] == "early"],
                 "late": [d for d in mine if d["timing"] == "late"],
                 "dense": [d for d in mine if d["logging"] == "dense"],
                 "sparse": [d for d in mine if d["logging"] != "dense"]}
        for part, found_part in parts.items():
            row[f"recall_{part}"] = (sum(d["detected"] for d in found_part) / len(found_part)
                                     if found_part else None)
        judged = row["on_time_detectable"] if row["oracle"] else row["on_time"]
        row["pass"] = (row["recall"] >= TARGET_RECALL and row["false_per_10k"]
                       <= TARGET_FALSE_PER_10K and (judged is None
                                                    or judged >= TARGET_ON_TIME))
        rows[name] = row
    total = sum(false.values())
    return {
        "rows": rows, "oracle_z_min": ORACLE_Z,
        "healthy_records": records, "healthy_runs": len(healthy),
        "false_total": total, "false_per_10k": total * 1e4 / max(1, records),
        "false_by_alert": {a: {"count": n, "per_10k": n * 1e4 / max(1, records),
                               "severity": severities.get(a, "")} for a, n in false.most_common()},
        "false_by_group": {g: {"records": group_records[g], "count": sum(c.values()),
                               "per_10k": sum(c.values()) * 1e4 / max(1, group_records[g]),
                               "alerts": dict(c.most_common())} for g, c in by_group.items()},
        "pre_onset_false": sum(d["early_false"] for d in found),
        "pre_onset_by_alert": dict(Counter(a for d in found for a in d["early_alerts"])
                                   .most_common()),
        "pre_onset_records": sum(int((t.step < o.run.label.onset_step).sum())
                                 for o in faulty for t in o.run.ranks.values()),
        "runs": found,
    }


def _num(value: Optional[float], width: int, digits: int = 0) -> str:
    return f"{'-':>{width}s}" if value is None else f"{value:{width}.{digits}f}"


def _count(value: Optional[int], width: int) -> str:
    return f"{'-' if value is None else value:>{width}}"


def _detectable(r: Dict) -> str:
    """On time over the detectable runs: "0.93 (14/15)"; "-" for a kind without an oracle."""
    if not r["oracle"]:
        return f"{'-':>17s}"
    share = _num(r["on_time_detectable"], 4, 2).strip()
    return f"{share} ({r['on_time_detectable_n']}/{r['detectable']})".rjust(17)


def format_table(scored: Dict) -> str:
    """The per-fault table, the false alerts per alert and per shape."""
    head = (f"{'fault':22s} {'alert(s)':24s} {'runs':>4s} {'recall':>6s} {'early':>5s} "
            f"{'late':>5s} {'dense':>5s} {'sparse':>6s} {'ontime':>6s} "
            f"{'ontime det (n/N)':>17s} {'beyond':>6s} {'lucky':>5s} "
            f"{'dense med/max (steps)':>21s} "
            f"{'sparse med/max (rec)':>20s} {'false/10k':>9s}  {'target':28s} verdict")
    lines = [head, "-" * len(head)]
    for name, r in scored["rows"].items():
        alerts = r["alerts"] if len(r["alerts"]) <= 24 else r["alerts"][:21] + "..."
        lines.append(
            f"{name:22s} {alerts:24s} {r['runs']:4d} {r['recall']:6.2f} "
            f"{_num(r['recall_early'], 5, 2)} {_num(r['recall_late'], 5, 2)} "
            f"{_num(r['recall_dense'], 5, 2)} {_num(r['recall_sparse'], 6, 2)} "
            f"{_num(r['on_time'], 6, 2)} {_detectable(r)} "
            f"{_count(r['beyond_oracle'], 6)} {_count(r['beyond_caught_on_time'], 5)} "
            f"{_num(r['dense']['median'], 10)} "
            f"{_num(r['dense']['max'], 10)} {_num(r['sparse']['median'], 9)} "
            f"{_num(r['sparse']['max'], 10)} {r['false_per_10k']:9.3f}  "
            f"{(r['target'] or '(none)'):28s} {'PASS' if r['pass'] else 'FAIL'}")
    if any(r["oracle"] for r in scored["rows"].values()):
        lines.append(f"ontime det: on time among the runs an oracle separates by >= "
                     f"{scored['oracle_z_min']:g} sd within the target (judged instead of "
                     f"ontime where shown); beyond: other runs late or missed; lucky: other "
                     f"runs on time")
    ok = scored["false_per_10k"] <= TARGET_FALSE_PER_10K
    lines.append(f"all alerts on {scored['healthy_records']} healthy records "
                 f"({scored['healthy_runs']} runs): {scored['false_total']} warning/critical = "
                 f"{scored['false_per_10k']:.3f} per 10k (target <= {TARGET_FALSE_PER_10K}) "
                 f"{'PASS' if ok else 'FAIL'}")
    lines.append(f"before the onset of faulty runs: {scored['pre_onset_false']} warning/critical "
                 f"in {scored['pre_onset_records']} records" + "".join(
                     f"{', ' if i else ': '}{a} {n}"
                     for i, (a, n) in enumerate(scored["pre_onset_by_alert"].items())))
    lines.append("false alerts per alert: " + (", ".join(
        f"{a} ({v['severity']}) {v['count']} = {v['per_10k']:.2f}/10k"
        for a, v in scored["false_by_alert"].items()) or "none"))
    lines.append("false alerts per shape (warning/critical per 10k records):")
    for g, v in sorted(scored["false_by_group"].items()):
        alerts = ", ".join(f"{a} {n}" for a, n in v["alerts"].items())
        lines.append(f"  {g:18s} {v['records']:8d} records {v['per_10k']:8.2f}  {alerts}")
    lines.append("first warning/critical alert after the onset (most common):")
    for name, r in scored["rows"].items():
        lines.append(f"  {name:22s} " + ", ".join(f"{a} {n}" for a, n in r["first_alerts"].items()))
    return "\n".join(lines)


def run_bench(rules_dir: str, healthy_seeds: Sequence[int], fault_seeds: Sequence[int],
              per_kind: int, scale: float, kinds: Sequence[str]) -> Dict:
    """Generate, replay and score; one fresh engine per run (``per_kind`` runs of every
    fault per fault seed)."""
    rules = load_rules([rules_dir])
    severities = {r.alert: r.severity for r in rules}
    started = time.perf_counter()
    healthy = [replay(run, Engine(rules)) for seed in healthy_seeds
               for run in healthy_suite(seed, scale)]
    faulty = [replay(run, Engine(rules)) for seed in fault_seeds
              for run in faulty_suite(seed, per_kind, kinds)]
    scored = score(healthy, faulty, severities)
    scored.update(rules_dir=os.path.abspath(rules_dir), healthy_seeds=list(healthy_seeds),
                  fault_seeds=list(fault_seeds), per_kind=per_kind, scale=scale,
                  engine_seconds=sum(o.seconds for o in healthy + faulty),
                  wall_seconds=time.perf_counter() - started,
                  records=sum(o.run.records for o in healthy + faulty))
    return scored


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", default=RULES_DIR, help="rules directory")
    parser.add_argument("--per-kind", type=int, default=12, help="faulty runs per fault")
    parser.add_argument("--healthy-seeds", type=int, nargs="+", default=list(HEALTHY_SEEDS))
    parser.add_argument("--fault-seed", "--fault-seeds", dest="fault_seeds", type=int,
                        nargs="+", default=[FAULT_SEED],
                        help="one labelled suite per seed (several: more runs per row)")
    parser.add_argument("--scale", type=float, default=1.0, help="healthy run lengths x this")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--quick", action="store_true",
                        help="4 runs per fault, one healthy seed at half length")
    parser.add_argument("--json", metavar="OUT", help="write the figures to OUT as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.per_kind, args.healthy_seeds, args.scale = 4, args.healthy_seeds[:1], 0.5
    scored = run_bench(args.rules, args.healthy_seeds, args.fault_seeds, args.per_kind,
                       args.scale, args.kinds)
    print(f"== generator2: {args.per_kind} faulty runs per fault and seed (seeds "
          f"{args.fault_seeds}), "
          f"healthy seeds {args.healthy_seeds} x{args.scale}, rules {args.rules}")
    print(format_table(scored))
    print(f"replayed {scored['records']} records in {scored['engine_seconds']:.1f} s of engine "
          f"time ({scored['wall_seconds']:.1f} s with generation)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(scored, fh, indent=1, sort_keys=True)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
