"""The run directory: its recorded config, and refusing to mix two runs in one directory."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Optional

CONFIG = "config.json"

#: config keys that must match for ``--resume`` to continue a run (the model and its data).
RESUME_KEYS = ("preset", "model_config", "seq_length", "micro_batch", "grad_accum", "precision",
               "vocab_size", "seed")


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked (one line)."""


def default_run_dir(preset: str) -> Path:
    return Path("runs") / f"{preset}-{time.strftime('%Y%m%d-%H%M%S')}"


def recorded(run_dir: Path) -> Optional[Dict[str, Any]]:
    """The config of the run already in ``run_dir``, or None for a fresh directory."""
    path = Path(run_dir) / CONFIG
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise RunDirError(
            f"{path} is not valid JSON ({exc}): not a run directory of this trainer?") from exc


def holds_a_run(run_dir: Path, rank: Optional[int] = None) -> bool:
    """True when ``run_dir`` has a recorded config or spool events (of ``rank`` only, when
    given: in a multi-rank launch the other ranks' fresh files are this run's)."""
    events = Path(run_dir) / "events"
    pattern = "rank-*.jsonl" if rank is None else f"rank-{rank}.jsonl"
    has_events = events.is_dir() and any(p.stat().st_size > 0 for p in events.glob(pattern))
    if rank is not None and rank > 0:
        return has_events                   # rank 0 owns (and checks) config.json
    return (Path(run_dir) / CONFIG).exists() or has_events


def check(run_dir: Path, config: Dict[str, Any], resume: bool, rank: int = 0,
          world: int = 1) -> Optional[Dict[str, Any]]:
    """Refuse a directory holding another run; on ``resume``, the recorded config (or None).

    In a launch of ``world`` > 1 ranks each rank checks its own spool file, and rank 0 also the
    config it writes."""
    previous = recorded(run_dir)
    if not resume:
        if holds_a_run(run_dir, rank if world > 1 else None):
            run = (previous or {}).get("run", "an earlier run")
            raise RunDirError(f"run directory {run_dir} already holds {run!r}; "
                              "pass --resume to continue it, or choose a new --run-dir")
        return None
    if previous is None:
        if holds_a_run(run_dir):
            raise RunDirError(f"run directory {run_dir} has spool events but no {CONFIG}: "
                              "not a run of this trainer, cannot --resume it")
        return None
    for key in RESUME_KEYS:
        if previous.get(key) != config.get(key):
            raise RunDirError(f"--resume: {key} differs from the run in {run_dir} "
                              f"({previous.get(key)!r} recorded, {config.get(key)!r} now); "
                              "use the same options or a new --run-dir")
    return previous


def write_config(run_dir: Path, config: Dict[str, Any]) -> Path:
    """Write ``config.json`` atomically."""
    path = Path(run_dir) / CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{CONFIG}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path
