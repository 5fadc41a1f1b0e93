"""Which files of the given paths are read, as what, and which are skipped (and why).

A MindFormers job leaves an ``output/`` tree (``mindformers/tools/logger.py``: every rank's
logger writes ``output/log/rank_N/info.log`` (INFO and above) and ``error.log`` (ERROR and
above), rotated at 50 MB into ``info.log.1`` ... ``info.log.5``; ``msrun --log_dir`` adds
``output/msrun_log/worker_N.log``, each worker's console, and ``scheduler.log``)::

    output/                  log/ if it holds a rank's info.log, else msrun_log/ (the same step
                             lines twice would double every step)
    output/log/              rank_N/ of every rank
    output/log/rank_N/       info.log (+ rotated): steps and errors; error.log (+ rotated): errors
    output/msrun_log/        worker_N.log: steps and errors; scheduler.log skipped (no steps)

Any other directory is walked for log-like files (by suffix) and TensorBoard event files. A
file named on the command line is read as given (``error.log`` as errors). Each
:class:`Source` says its role: ``steps`` (a step log whose errors are read too) or ``errors``
(errors only).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from msdoctor.wire.layout import ERROR_LOG, INFO_LOG, RANK_LOG_DIR, WORKER_LOG, is_run_dir

LOG_SUFFIXES = (".log", ".txt", ".out", ".csv", ".jsonl", ".json", ".tsv")
ROTATED = re.compile(r"\.log\.(\d+)\Z")
_INFO, _ERROR, _RANK_DIR, _WORKER = INFO_LOG, ERROR_LOG, RANK_LOG_DIR, WORKER_LOG
TREE_FORMAT = "mindformers"


@dataclass(frozen=True)
class Source:
    """One file to read: its role (``steps`` or ``errors``) and, in a MindFormers tree, its
    format (known from where it lies, so a log without step lines is still read)."""

    path: Path
    role: str = "steps"
    fmt: Optional[str] = None


@dataclass
class Selection:
    sources: List[Source] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)   # (path, why)

    def skip(self, path: Path, why: str) -> None:
        self.skipped.append((str(path), why))


def is_log_name(name: str) -> bool:
    """A log file's name, or a TensorBoard event file's (``events.out.tfevents.*``)."""
    return name.endswith(LOG_SUFFIXES) or ROTATED.search(name) is not None or "tfevents" in name


def _rank_dirs(path: Path) -> List[Path]:
    return sorted((p for p in path.iterdir() if p.is_dir() and _RANK_DIR.match(p.name)),
                  key=lambda p: int(p.name[5:]))


def _has_info(path: Path) -> bool:
    return any(_INFO.match(p.name) for d in _rank_dirs(path) for p in d.iterdir())


def _workers(path: Path) -> List[Path]:
    return [p for p in path.iterdir() if p.is_file() and _WORKER.match(p.name)]


def kind_of(path: Path) -> Optional[str]:
    """``output``, ``log``, ``rank``, ``msrun_log`` for the parts of a MindFormers tree, else None."""
    if _RANK_DIR.match(path.name) and any(_INFO.match(p.name) or _ERROR.match(p.name)
                                          for p in path.iterdir()):
        return "rank"
    if _rank_dirs(path):
        return "log"
    if _workers(path):
        return "msrun_log"
    if ((path / "log").is_dir() and _rank_dirs(path / "log")) or \
            ((path / "msrun_log").is_dir() and _workers(path / "msrun_log")):
        return "output"
    return None


def select(paths: List[str]) -> Selection:
    """The sources of ``paths`` (files and directories), and what was skipped with the reason."""
    chosen = Selection()
    for text in paths:
        path = Path(text)
        if not path.is_dir() or is_run_dir(path):
            chosen.sources.append(Source(path, "errors" if _ERROR.match(path.name) else "steps"))
            continue
        kind = kind_of(path)
        if kind == "output":
            _output(path, chosen)
        elif kind == "log":
            _log(path, chosen)
        elif kind == "rank":
            _rank(path, chosen)
        elif kind == "msrun_log":
            _msrun(path, chosen)
        else:
            _walk(path, chosen)
    return chosen


def _output(path: Path, chosen: Selection) -> None:
    log, msrun = path / "log", path / "msrun_log"
    has_workers = msrun.is_dir() and bool(_workers(msrun))
    use_log = log.is_dir() and (_has_info(log) or not has_workers)
    for child in sorted(path.iterdir()):
        if child == log and use_log:
            _log(child, chosen)
        elif child == msrun and msrun.is_dir() and not use_log:
            _msrun(child, chosen)
        elif child == msrun:
            chosen.skip(child, f"msrun's copy of the console; the step lines are read from {log} "
                               f"(pass {child} to read it instead)")
        elif child == log:
            chosen.skip(child, "no rank_N/info.log in it; the step lines are read from "
                               f"{msrun}")
        elif is_run_dir(child):
            chosen.skip(child, f"a msdoctor run directory (replay it on its own: msdoctor replay "
                               f"{child})")
        elif child.is_dir() and next(child.rglob("*tfevents*"), None) is not None:
            chosen.skip(child, f"TensorBoard event files: the same steps as the logs (replay them "
                               f"on their own: msdoctor replay {child})")
        else:
            chosen.skip(child, "not a log directory (output/log and output/msrun_log are read)")


def _log(path: Path, chosen: Selection) -> None:
    ranks = _rank_dirs(path)
    for child in sorted(path.iterdir()):
        if child not in ranks:
            chosen.skip(child, "not a rank_N directory")
    for rank_dir in ranks:
        _rank(rank_dir, chosen)


def _rank(path: Path, chosen: Selection) -> None:
    for child in sorted(path.iterdir()):
        if child.is_file() and _INFO.match(child.name):
            chosen.sources.append(Source(child, "steps", TREE_FORMAT))
        elif child.is_file() and _ERROR.match(child.name):
            chosen.sources.append(Source(child, "errors", TREE_FORMAT))
        elif child.is_file() and "tfevents" in child.name:      # a tensorboard_dir/rank_N/
            chosen.sources.append(Source(child, "steps"))
        else:
            chosen.skip(child, "not info.log, error.log or a TensorBoard event file")


def _msrun(path: Path, chosen: Selection) -> None:
    for child in sorted(path.iterdir()):
        if child.is_file() and _WORKER.match(child.name):
            chosen.sources.append(Source(child, "steps", TREE_FORMAT))
        elif child.name == "scheduler.log":
            chosen.skip(child, "msrun's scheduler: no training steps")
        else:
            chosen.skip(child, "not a worker_N.log")


def _walk(path: Path, chosen: Selection) -> None:
    for child in sorted(path.rglob("*")):
        if not child.is_file():
            continue
        if is_log_name(child.name):
            chosen.sources.append(Source(child, "errors" if _ERROR.match(child.name) else "steps"))
        else:
            chosen.skip(child, f"not a log file (expected a name ending in {', '.join(LOG_SUFFIXES)}, "
                               "or a TensorBoard events.out.tfevents.* file)")

