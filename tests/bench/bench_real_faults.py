"""Detection on real runs: the bundled trainer with each fault injected early in a short run
(steps 20-100 of ~300) and late in a long one, each diagnosed from its spool by
``msdoctor replay``'s pipeline (the shipped rules).

Per fault it prints the alert that names it, the first step that alert fired at or after the
onset (the first step the fault acts on), the delay in steps against the issue's target, and the
warning/critical alerts that fired before the onset (false alarms). Timing alerts
(``tests/timing_alerts.py``) are left out of the false alarms: on this shared machine another job
slowing the run down is a real slowdown they are right to report. The memory-growth row's
target is "before the memory has grown 10 %": its delay column gives the growth of the host RSS
at the firing since the onset (a leak from the first step: MB a step on ~0.9 GiB).

Each run trains the tiny preset in its own process (``python -m trainer_hooks.trainer``); the
runs take ~10 min on this 2-core machine.

Run: .venv/bin/python tests/bench/bench_real_faults.py [--only NAME ...] [--long-steps 1300]
     [--json OUT] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "trainer_hooks" / "trainer"))

from timing_alerts import TIMING  # noqa: E402
from trainer_runs import train  # noqa: E402

COUNTED = ("warning", "critical")


@dataclass
class Case:
    """One faulty run: the trainer's options, the fault's first step and what should name it."""

    name: str
    argv: Tuple[str, ...]
    onset: int
    alerts: Tuple[str, ...]       # any of them names the fault
    target: Optional[float]       # steps after the onset; None: memory (before +10 %)


def cases(long_steps: int) -> List[Case]:
    """The early faults (short runs) and the late ones (``long_steps``-step runs)."""
    late = long_steps - 150
    short = ("--steps", "300", "--save-every", "10000")
    longer = ("--steps", str(long_steps), "--save-every", "10000")
    stalled = ("UpdatesStalled", "LearningRateTiny")
    return [
        Case("nan@40", (*short, "--inject", "nan@40"), 40, ("LossNonFinite",), 0),
        Case("nan@40 fp16 (scale)", (*short, "--precision", "fp16", "--inject", "nan@40"), 40,
             ("LossScaleCollapse",), 20),
        Case("spike@60", (*short, "--inject", "spike@60"), 60, ("LossSpike",), 0),
        Case("bad-data@50:5", (*short, "--inject", "bad-data@50:5"), 50, ("LossSpike",), 0),
        Case("periodic@20", (*short, "--inject", "periodic@20"), 20, ("LossSpikesPeriodic",),
             60),
        Case("stall@80", (*short, "--inject", "stall@80"), 80, stalled, 20),
        # the plateau's target is 300 steps: its run goes on 100 steps past it
        Case("stall@80 (plateau)", ("--steps", "480", "--save-every", "10000", "--inject",
                                    "stall@80"), 80, ("LossPlateau",), 300),
        Case("slow-data@300:60-300", (*short, "--inject", "slow-data@300:60-300"), 60,
             ("DataLoaderStarved",), 50),
        Case("leak@1", (*short, "--inject", "leak@1"), 1, ("MemoryGrowth",), None),
        Case("leak@8", (*short, "--inject", "leak@8"), 1, ("MemoryGrowth",), None),
        Case(f"spike@{late}", (*longer, "--inject", f"spike@{late}"), late, ("LossSpike",), 0),
        Case(f"nan@{late}", (*longer, "--inject", f"nan@{late}"), late, ("LossNonFinite",), 0),
        Case(f"stall@{late}", (*longer, "--inject", f"stall@{late}"), late, stalled, 20),
    ]


def replay(run_dir: Path, rules: Any) -> List[Dict[str, Any]]:
    """The alerts ``msdoctor replay`` finds in the run's spool."""
    from msdoctor.replay.driver import replay_paths

    return replay_paths([str(run_dir)], rules, "spool", progress=False)["alerts"]


def host_rss(run_dir: Path) -> Dict[int, float]:
    """Rank 0's host RSS per step, from its spool."""
    out: Dict[int, float] = {}
    with open(run_dir / "events" / "rank-0.jsonl", encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if event.get("type") == "step" and event.get("mem_host_rss_bytes"):
                out[int(event["step"])] = float(event["mem_host_rss_bytes"])
    return out


def judge(case: Case, alerts: List[Dict[str, Any]], run_dir: Path) -> Dict[str, Any]:
    """The verdict on one run: first naming firing, its delay, false alarms before the onset."""
    loud = [a for a in alerts if a["severity"] in COUNTED and a["step"] is not None]
    before = sorted({f"{a['alert']}@{a['step']}" for a in loud
                     if a["step"] < case.onset and a["alert"] not in TIMING})
    hits = sorted(a["step"] for a in loud if a["alert"] in case.alerts and a["step"] >= case.onset)
    row: Dict[str, Any] = {"case": case.name, "onset": case.onset, "alerts": list(case.alerts),
                           "target": case.target, "fired": hits[0] if hits else None,
                           "before_onset": before}
    if not hits:
        row.update(delay=None, ok=False)
    elif case.target is None:
        rss = host_rss(run_dir)
        first = rss[min(rss)]
        at = rss.get(hits[0]) or rss[max(s for s in rss if s <= hits[0])]
        row.update(delay=round(at / first - 1.0, 4), ok=at / first - 1.0 < 0.10)
    else:
        row.update(delay=hits[0] - case.onset, ok=hits[0] - case.onset <= case.target)
    return row


def show(rows: List[Dict[str, Any]]) -> None:
    print(f"{'fault':24s} {'alert':32s} {'onset':>6s} {'fired':>6s} {'delay':>8s} "
          f"{'target':>8s}  verdict  false alarms before the onset")
    for r in rows:
        memory = r["target"] is None
        delay = "-" if r["delay"] is None else (f"+{100 * r['delay']:.1f}%" if memory
                                                  else str(r["delay"]))
        target = "<+10%" if memory else str(r["target"])
        print(f"{r['case']:24s} {'|'.join(r['alerts']):32s} {r['onset']:6d} "
              f"{str(r['fired'] or '-'):>6s} {delay:>8s} {target:>8s}  "
              f"{'PASS' if r['ok'] else 'FAIL':7s}  {', '.join(r['before_onset']) or '-'}")
    met = sum(r["ok"] for r in rows)
    early = sum(len(r["before_onset"]) for r in rows)
    print(f"{met}/{len(rows)} faults named within their target; {early} false alarm(s) before "
          f"an onset")


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--only", nargs="*", help="case names (default: all)")
    cli.add_argument("--long-steps", type=int, default=1300)
    cli.add_argument("--json", help="write the rows here")
    cli.add_argument("--keep", help="train into this directory (kept) instead of a temporary one")
    args = cli.parse_args()
    from msdoctor.core.engine.loader import default_rules_dir, load_rules
    from trainer_hooks.trainer import tokens
    from trainer_hooks.trainer.presets import PRESETS

    scratch = Path(args.keep or tempfile.mkdtemp(prefix="real-faults-"))
    scratch.mkdir(parents=True, exist_ok=True)
    cache = scratch / "token-cache"
    tokens.build(cache, PRESETS["tiny"].vocab_size, progress=None)
    rules = load_rules([default_rules_dir()])
    rows, trained = [], {}
    for case in cases(args.long_steps):
        if args.only and case.name not in args.only:
            continue
        key = case.argv
        if key not in trained:
            run_dir = scratch / f"run-{len(trained)}"
            started = time.perf_counter()
            train(run_dir, cache, *case.argv, timeout=1800)
            trained[key] = (run_dir, replay(run_dir, rules))
            print(f"trained {' '.join(case.argv)} in {time.perf_counter() - started:.0f} s",
                  flush=True)
        run_dir, alerts = trained[key]
        rows.append(judge(case, alerts, run_dir))
    show(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
