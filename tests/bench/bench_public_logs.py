"""Diagnoses on real public training logs: replay every log of the labelled corpus
(``tests/data/public_logs/manifest.yaml``) with the shipped rules through the replay driver.

Each log's step table (``<id>.csv``) is replayed as ``msdoctor replay <id>.csv`` would replay it
(record clock, no wall clock: the result does not depend on the machine's load). Only warning
and critical alerts count. Per log it prints the label, the first problem step, the alerts fired
(``name@first step``) and the verdict:

- sick log: ``hit`` when an alert that names the problem (one of the label's alerts in the
  manifest's ``labels`` or one of the log's ``expected_alerts``) fires at or after
  ``first_problem_step``, with the delay in steps; else ``miss``;
- healthy log: ``clean``, or ``FALSE xN`` for N warning/critical alerts.

Logs msdoctor also reads in their original form (``replay_reads_txt``: MindFormers, MindSpore
LossMonitor) are replayed from the ``.txt`` too; the ``txt`` column says whether that gives the
same alerts. Totals: recall on the sick logs, false alarms on the healthy logs (and per 10k
healthy records).

    .venv/bin/python tests/bench/bench_public_logs.py [--json OUT] [--rules DIR] [--only ID ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from msdoctor.core.engine.loader import default_rules_dir, load_rules  # noqa: E402
from msdoctor.replay.driver import replay_paths  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "public_logs"
COUNTED = ("warning", "critical")


def load_corpus(directory: Path = CORPUS) -> Tuple[Dict[str, List[str]], List[Dict[str, Any]]]:
    """The label -> alerts table and the log entries of the corpus manifest."""
    with open(directory / "manifest.yaml", encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    return manifest["labels"], manifest["logs"]


def fired(path: Path, rules: Any, fmt: str, run: str) -> List[Dict[str, Any]]:
    """The warning/critical firings of one replay, in firing order."""
    result = replay_paths([str(path)], rules, fmt=fmt, run=run, progress=False)
    return [a for a in result["alerts"] if a["severity"] in COUNTED]


def first_steps(alerts: List[Dict[str, Any]]) -> Dict[str, int]:
    """Each alert's first firing step."""
    steps: Dict[str, int] = {}
    for a in alerts:
        steps[a["alert"]] = min(steps.get(a["alert"], a["step"]), a["step"])
    return steps


def judge(entry: Dict[str, Any], labels: Dict[str, List[str]], alerts: List[Dict[str, Any]]
          ) -> Dict[str, Any]:
    """The verdict on one log from its warning/critical firings."""
    first = first_steps(alerts)
    verdict: Dict[str, Any] = {"alerts": first, "firings": len(alerts)}
    if entry["label"] == "healthy":
        verdict["verdict"] = "clean" if not alerts else "false_alarm"
        verdict["false_alarms"] = len(alerts)
        return verdict
    names = set(labels.get(entry["label"], [])) | set(entry.get("expected_alerts") or [])
    start = entry["first_problem_step"]
    hits = [a for a in alerts if a["alert"] in names and a["step"] >= start]
    verdict["verdict"] = "hit" if hits else "miss"
    if hits:
        best = min(hits, key=lambda a: a["step"])
        verdict["hit"] = {"alert": best["alert"], "step": best["step"], "delay": best["step"] - start}
    verdict["unrelated"] = sorted(n for n, s in first.items()
                                  if n not in names or s < start)
    return verdict


def evaluate(entry: Dict[str, Any], labels: Dict[str, List[str]], rules: Any,
             directory: Path = CORPUS) -> Dict[str, Any]:
    """Replay one log (its step table, and its original text where msdoctor reads it)."""
    alerts = fired(directory / f"{entry['id']}.csv", rules, "csv", entry["id"])
    row = {k: entry.get(k) for k in ("id", "framework", "label", "first_problem_step", "records")}
    row.update(judge(entry, labels, alerts))
    native = entry.get("replay_reads_txt")
    if native:
        text_alerts = fired(directory / f"{entry['id']}.txt", rules, native, entry["id"])
        row["txt"] = {"format": native, "alerts": first_steps(text_alerts),
                      "same": _keys(text_alerts) == _keys(alerts)}
    return row


def _keys(alerts: List[Dict[str, Any]]) -> List[Tuple[str, int]]:
    return sorted((a["alert"], a["step"]) for a in alerts)


def totals(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    sick = [r for r in rows if r["label"] != "healthy"]
    healthy = [r for r in rows if r["label"] == "healthy"]
    hits = [r for r in sick if r["verdict"] == "hit"]
    records = sum(r["records"] for r in healthy)
    false_alarms = sum(r["false_alarms"] for r in healthy)
    return {
        "logs": len(rows), "frameworks": len({r["framework"] for r in rows}),
        "sick": len(sick), "hits": len(hits),
        "recall": round(len(hits) / len(sick), 3) if sick else None,
        "missed": [r["id"] for r in sick if r["verdict"] == "miss"],
        "healthy": len(healthy), "healthy_records": records,
        "false_alarms": false_alarms,
        "healthy_logs_with_false_alarms": [r["id"] for r in healthy if r["false_alarms"]],
        "false_alarms_per_10k_healthy_records": round(false_alarms * 1e4 / records, 2) if records else None,
        "txt_replays": sum(1 for r in rows if "txt" in r),
        "txt_replays_differing": [r["id"] for r in rows if "txt" in r and not r["txt"]["same"]],
    }


def describe(row: Dict[str, Any], width: int = 56) -> str:
    alerts = ", ".join(f"{n}@{s}" for n, s in sorted(row["alerts"].items(), key=lambda x: x[1]))
    if row["verdict"] == "hit":
        verdict = f"hit +{row['hit']['delay']}"
    elif row["verdict"] == "false_alarm":
        verdict = f"FALSE x{row['false_alarms']}"
    else:
        verdict = row["verdict"].upper() if row["verdict"] == "miss" else row["verdict"]
    txt = ""
    if "txt" in row:
        txt = "same" if row["txt"]["same"] else "DIFF: " + (", ".join(
            f"{n}@{s}" for n, s in sorted(row["txt"]["alerts"].items(), key=lambda x: x[1])) or "none")
    first = "-" if row["first_problem_step"] is None else str(row["first_problem_step"])
    return (f"{row['id']:<{width}} {row['label'][:19]:<19} {first:>6} {row['records']:>5}  "
            f"{verdict:<10} {txt:<5}  {alerts or '-'}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="OUT", help="also write the per-log results and totals here")
    parser.add_argument("--rules", metavar="DIR", help="rules directory (default: the shipped rules)")
    parser.add_argument("--only", nargs="*", metavar="ID", help="only these logs")
    args = parser.parse_args(argv)
    rules_dir = args.rules or str(default_rules_dir())
    rules = load_rules([rules_dir])
    labels, entries = load_corpus()
    if args.only:
        entries = [e for e in entries if e["id"] in args.only]
    rows = [evaluate(e, labels, rules) for e in entries]
    print(f"bench_public_logs: {len(rows)} real logs, {len(rules)} rules from {rules_dir}; "
          f"warning/critical alerts only")
    width = max(len(r["id"]) for r in rows)
    print(f"{'log':<{width}} {'label':<19} {'first':>6} {'recs':>5}  {'verdict':<10} {'txt':<5}  alerts (first step)")
    for row in rows:
        print(describe(row, width))
    total = totals(rows)
    print(f"sick logs   : {total['hits']}/{total['sick']} hit, recall {total['recall']}; "
          f"missed: {', '.join(total['missed']) or 'none'}")
    print(f"healthy logs: {total['false_alarms']} false alarm(s) on {total['healthy']} logs "
          f"({total['healthy_records']} records, {total['false_alarms_per_10k_healthy_records']} per 10k); "
          f"logs with false alarms: {', '.join(total['healthy_logs_with_false_alarms']) or 'none'}")
    print(f"original text replays: {total['txt_replays']}, differing from the step table: "
          f"{', '.join(total['txt_replays_differing']) or 'none'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"rules": rules_dir, "load_average": os.getloadavg()[0], "logs": rows,
                       "totals": total}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
