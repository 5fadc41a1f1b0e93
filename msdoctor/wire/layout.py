"""The run directory as the hooks, the sidecar and the tools share it, and the sidecar's address.

::

    <run_dir>/events/rank-<N>.jsonl   one append-only event spool per rank (the hooks write)
    <run_dir>/control/stop.json        a stop request (the sidecar writes, the hooks read)
    <run_dir>/alerts.jsonl             the alert journal (the sidecar appends)
    <run_dir>/.msdoctor/snapshot.npz   the sidecar's saved state
    <run_dir>/.msdoctor/sidecar.lock   held by the one sidecar of the run directory (its pid)
    <run_dir>/*.log                    logs beside the spool (``msdoctor demo``'s train.log)
    <run_dir>/work/output/...          the bundled trainer's MindFormers output tree (below)

A MindFormers job's ``output/`` tree (``mindformers/tools/logger.py``): each rank's
``output/log/rank_N/info.log`` (INFO and above) and ``error.log`` (ERROR and above), rotated
into ``info.log.1`` ... ``info.log.5``; ``msrun --log_dir`` adds ``output/msrun_log/worker_N.log``.

Standard library only: the training hooks import it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

EVENTS_DIR = "events"
#: A rank's spool file name inside ``events/``; the group is the rank.
RANK_FILE = re.compile(r"rank-(\d+)\.jsonl\Z")
CONTROL_DIR = "control"
STOP_FILE = os.path.join(CONTROL_DIR, "stop.json")
ALERTS_FILE = "alerts.jsonl"
STATE_DIR = ".msdoctor"

#: The bundled trainer's working directory inside the run directory (MindFormers writes its
#: ``output/`` tree there).
WORK_DIR = "work"
INFO_LOG = re.compile(r"\Ainfo\.log(?:\.\d+)?\Z")
ERROR_LOG = re.compile(r"\Aerror\.log(?:\.\d+)?\Z")
RANK_LOG_DIR = re.compile(r"\Arank_(\d+)\Z")
WORKER_LOG = re.compile(r"\Aworker_(\d+)\.log\Z")

#: Where ``msdoctor serve`` listens unless told otherwise (loopback only). 9089 is outside
#: Prometheus' default port allocations (9090-9093, 9100-9999) and not the default of the other
#: exporters of a training node (9400 was NVIDIA dcgm-exporter's); docs/prometheus.md.
DEFAULT_LISTEN = "127.0.0.1:9089"
DEFAULT_URL = "http://" + DEFAULT_LISTEN
#: The environment variable holding the API's bearer token.
TOKEN_ENV = "MSDOCTOR_API_TOKEN"
API_PREFIX = "/api/v1"


def events_dir(run_dir: PathLike) -> Path:
    return Path(run_dir) / EVENTS_DIR


def rank_file(run_dir: PathLike, rank: int) -> Path:
    """``<run_dir>/events/rank-<rank>.jsonl``."""
    return Path(run_dir) / EVENTS_DIR / f"rank-{int(rank)}.jsonl"


def rank_of_file(name: str) -> Optional[int]:
    """The rank a spool file name stands for, or None when it is not a rank file."""
    match = RANK_FILE.match(name)
    return int(match.group(1)) if match else None


def stop_file(run_dir: PathLike) -> Path:
    return Path(run_dir) / STOP_FILE


def alerts_file(run_dir: PathLike) -> Path:
    return Path(run_dir) / ALERTS_FILE


def state_dir(run_dir: PathLike) -> Path:
    return Path(run_dir) / STATE_DIR


def is_run_dir(path: PathLike) -> bool:
    """A directory holding an ``events/`` directory (a spool)."""
    p = Path(path)
    return p.is_dir() and (p / EVENTS_DIR).is_dir()


def _numbered(folder: Path, pattern: "re.Pattern[str]") -> List[Path]:
    """The entries of ``folder`` whose names match ``pattern``, by the number in the name."""
    try:
        names = [n for n in os.listdir(folder) if pattern.match(n)]
    except OSError:
        return []
    return [folder / n for n in sorted(names, key=lambda n: int(pattern.match(n).group(1)))]  # type: ignore[union-attr]


def log_files(run_dir: PathLike) -> List[Path]:
    """The log files of a run directory, in the order a reader wants them: the ``*.log`` files
    beside the spool, then each rank's current ``info.log`` and ``error.log`` of a MindFormers
    output tree (``work/output`` of the bundled trainer, or ``output``), else msrun's
    ``worker_N.log``. Names only: what stands at a path is checked when it is opened."""
    root = Path(run_dir)
    try:
        top = sorted(n for n in os.listdir(root) if n.endswith(".log"))
    except OSError:
        return []
    out = [root / n for n in top]
    for output in (root / WORK_DIR / "output", root / "output"):
        ranks = _numbered(output / "log", RANK_LOG_DIR)
        for rank_dir in ranks:
            out.extend(rank_dir / n for n in ("info.log", "error.log") if (rank_dir / n).exists())
        if not ranks:
            out.extend(_numbered(output / "msrun_log", WORKER_LOG))
    return out


#: What a run directory is, in the words of the tools' error messages.
EXPECTED_RUN_DIR = "a directory containing events/rank-<N>.jsonl written by trainer_hooks"


def run_dir_error(run_dir: PathLike, need_events: bool = True) -> Optional[str]:
    """A one-line complaint when ``run_dir`` is not a usable run directory, else None
    (``need_events=False``: ``events/`` may still appear, as when the sidecar starts first)."""
    p = Path(run_dir)
    if not p.is_dir():
        what = "is not a directory" if p.exists() else "does not exist"
        return f"run directory {p} {what}; expected {EXPECTED_RUN_DIR}"
    if need_events and not (p / EVENTS_DIR).is_dir():
        return f"{p} has no {EVENTS_DIR}/ directory; expected {EXPECTED_RUN_DIR}"
    return None
