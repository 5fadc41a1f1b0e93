"""The ground truth of a run's badput, from the trainer's own account (``--truth FILE``) and the
harness's launch times in the same file; nothing here reads the spool.

Records (trainer_hooks/trainer/truth.py): ``launch`` (written by the harness just before it
starts a process), ``begin``/``end`` of each step (the first and the last callback), ``save``,
``load``, ``eval``, ``hang`` (seconds each, timed by the part that did it) and ``crash``.
"""
from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Dict, List, Tuple

CAUSES = ("startup", "data_wait", "checkpoint", "hang", "downtime", "redone", "evaluation")
#: msdoctor's hung step (``msdoctor.core.goodput``): over this many times the median step...
HANG_FACTOR = 10.0
#: ...and this many seconds more
HANG_MIN_S = 1.0
#: ...the typical span: the median of this many spans before the step
TYPICAL_WINDOW = 64
#: a process's first step is split into compilation and a typical span once this many usual
#: spans have followed it (msdoctor's causal account; a median of the whole run's spans drifts
#: from it by a share of the wall time when the machine's load changes during the run)
OWED_AFTER = 4
TIMED = {"save": "checkpoint", "load": "checkpoint", "eval": "evaluation", "hang": "hang"}


def truth_file(run_dir: Path) -> Path:
    """Where the trainer's account of a run goes: beside its run directory."""
    return run_dir.parent / f"{run_dir.name}.truth.jsonl"


def note_launch(run_dir: Path) -> None:
    """The harness: a process of this run starts now."""
    with truth_file(run_dir).open("a") as out:
        out.write(json.dumps({"kind": "launch", "t": time.time()}) + "\n")


def records(run_dir: Path) -> List[Dict]:
    return [json.loads(line) for line in truth_file(run_dir).read_text().splitlines()]


def badput(run_dir: Path) -> Dict[str, float]:
    """Seconds per cause:

    - data_wait: from a step's end to the next step's begin within one pass (the fetch);
    - checkpoint, evaluation: the seconds the saver, loader, evaluator timed;
    - hang: msdoctor's definition on the trainer's clocks: a step whose whole span (its fetch,
      its compute and what the hang slept) is over HANG_FACTOR times the typical span and
      HANG_MIN_S more counts its excess over it; the typical span is the median of the last
      TYPICAL_WINDOW spans before it, first steps and hung steps left out. The injected hang
      is one such step, and on a loaded machine a step that merely took that long is another;
    - startup: from a launch, or a rollback's restart within the process, to the first step's
      begin, less the checkpoint loads in between, plus that first step's excess over the
      typical span once OWED_AFTER usual spans followed it (compilation);
    - downtime: from a crash to the next launch;
    - redone: after a resume at step S (a restart or a rollback), the time the earlier pass
      spent computing steps after S (their span less the saves, evaluations, hang in them; a
      hung step's at most the typical span).
    """
    out = dict.fromkeys(CAUSES, 0.0)
    done: Dict[int, float] = {}            # step -> its compute time, on its latest pass
    firsts: List[float] = []
    extra: Dict[int, float] = {}
    stalls: Dict[int, float] = {}          # step -> the seconds its hang timed
    usual: List[float] = []                # the spans of the steps that were not first or hung
    opened = loaded = None                 # a (re)start whose first step has not begun
    prev_end = prev_step = crashed = begun = None
    first = False
    fetched = 0.0
    for r in records(run_dir):
        kind, t = r["kind"], r["t"]
        if kind == "launch":
            if crashed is not None:
                out["downtime"] += t - crashed
            opened, loaded, prev_end, crashed = t, 0.0, None, None
        elif kind == "crash":
            crashed = t
        elif kind in TIMED:
            if kind != "hang":                  # a hang counts with its step (below)
                out[TIMED[kind]] += r["s"]
            if kind == "load":
                loaded = (loaded or 0.0) + r["s"]
            else:
                extra[r["step"]] = extra.get(r["step"], 0.0) + r["s"]
            if kind == "hang":
                stalls[r["step"]] = r["s"]
        elif kind == "begin":
            step = r["step"]
            if prev_step is not None and step <= prev_step:        # resumed at step - 1
                for s in [s for s in done if s >= step]:
                    out["redone"] += done.pop(s)
                if opened is None:                                  # a rollback, same process
                    opened = prev_end
            fetched = 0.0
            if opened is not None:
                out["startup"] += t - opened - (loaded or 0.0)
                opened, loaded, first = None, None, True
            elif prev_end is not None:
                fetched = t - prev_end
            begun = t
        elif kind == "end" and begun is not None:
            step = r["step"]
            work = t - begun - extra.pop(step, 0.0)
            done[step] = work
            if first:
                out["data_wait"] += fetched
                firsts.append((work, len(usual)))
            else:
                span = fetched + work + stalls.get(step, 0.0)
                recent = usual[-TYPICAL_WINDOW:]
                typical = statistics.median(recent) if recent else math.nan
                if span > max(HANG_FACTOR * typical, typical + HANG_MIN_S):
                    out["hang"] += span - typical
                    done[step] = min(span, typical)
                else:
                    out["data_wait"] += fetched
                    usual.append(span)
                    out["startup"] += _compilation(firsts, usual)
            stalls.pop(step, None)
            first, prev_end, prev_step, begun = False, t, step, None
    out["startup"] += sum(work for work, _ in firsts)      # not split yet: all of it
    return out


def _compilation(firsts: List[Tuple[float, int]], usual: List[float]) -> float:
    """A process's first step less the typical step, once OWED_AFTER usual spans followed it
    (the typical: the median of the last TYPICAL_WINDOW usual spans then); the first steps
    split are taken out of ``firsts``."""
    split = 0.0
    for item in [f for f in firsts if len(usual) - f[1] >= OWED_AFTER]:
        firsts.remove(item)
        split += max(0.0, item[0] - statistics.median(usual[-TYPICAL_WINDOW:]))
    return split


def launches(run_dir: Path) -> List[float]:
    return [r["t"] for r in records(run_dir) if r["kind"] == "launch"]
