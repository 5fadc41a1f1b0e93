"""Helpers of the trainer tests: run the real trainer in its own process, read its spool.

Runs are session-scoped and started lazily (see ``conftest.py``), so the spool-level tests and
the rule-level tests of one fault share one process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[3]


def train(run_dir: Path, cache: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the trainer to completion in its own process (cwd: a scratch dir)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3")
    cmd = [sys.executable, "-m", "trainer_hooks.trainer", "--run-dir", str(run_dir),
           "--data-dir", str(cache), "--log-every", "1000", *argv]
    done = subprocess.run(cmd, cwd=str(run_dir.parent), env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"trainer failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


def events(run_dir: Path, rank: int = 0) -> List[Dict]:
    lines = (run_dir / "events" / f"rank-{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def steps(run_dir: Path) -> List[Dict]:
    return [e for e in events(run_dir) if e["type"] == "step"]


def value(event: Dict, name: str) -> float:
    """A numeric field, with the wire's "nan"/"inf" strings turned back into floats."""
    return float(event[name])


class Runs:
    """Starts each named run once per session; returns its run directory."""

    SPECS = {
        # name: trainer options
        "clean": ("--steps", "200", "--save-every", "50", "--keep", "3"),
        "half": ("--steps", "200", "--save-every", "50", "--stop-after", "100"),
        "nan": ("--steps", "40", "--inject", "nan@30"),
        "spike-slow": ("--steps", "230", "--inject", "spike@210,slow-data@150"),
        "stall-leak": ("--steps", "170", "--inject", "stall@60,leak@4"),
        "periodic": ("--steps", "360", "--inject", "periodic@50"),
        "hang": ("--steps", "30", "--inject", "hang@20", "--hang-timeout", "6",
                 "--heartbeat-s", "0.5"),
        "accum": ("--steps", "12", "--inject", "accum-mismatch", "--grad-accum", "4"),
        "scale-low": ("--steps", "30", "--inject", "loss-scale-low"),
        "lr-high": ("--steps", "200", "--inject", "lr-high", "--save-every", "1000"),
    }

    def __init__(self, base: Path, cache: Path) -> None:
        self.base, self.cache = base, cache
        self.done: Dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.done:
            run_dir = self.base / name
            train(run_dir, self.cache, *self.SPECS[name], timeout=600)
            self.done[name] = run_dir
        return self.done[name]
