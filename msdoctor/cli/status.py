"""``msdoctor status``: read a run's spool once and print one line per rank.

Runs in-process, writes nothing (no snapshot, no state directory).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import List, Optional

from msdoctor.core.pipeline import Pipeline
from msdoctor.core.spool import SpoolError
from msdoctor.core.state import RankState, Store

HELP = "Print each rank's latest step, loss, throughput, memory and errors from a run's spool."
EXPECTED_RUN_DIR = "a directory containing events/rank-<N>.jsonl written by trainer_hooks"
MAX_ERRORS_SHOWN = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", required=True, type=Path, metavar="DIR",
                        help=f"the run directory: {EXPECTED_RUN_DIR}")


def run_dir_error(run_dir: Path, need_events: bool = True) -> Optional[str]:
    """A one-line complaint when ``run_dir`` is not a usable run directory, else None."""
    if not run_dir.is_dir():
        what = "is not a directory" if run_dir.exists() else "does not exist"
        return f"run directory {run_dir} {what}; expected {EXPECTED_RUN_DIR}"
    if need_events and not (run_dir / "events").is_dir():
        return f"{run_dir} has no events/ directory; expected {EXPECTED_RUN_DIR}"
    return None


# -- formatting --------------------------------------------------------------
def fmt_num(value: Optional[float], digits: int = 4) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.{max(digits - 2, 1)}e}"
    return f"{value:.{digits}g}"


def fmt_bytes(value: Optional[float]) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"  # pragma: no cover


def fmt_seconds(value: Optional[float]) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.0f}m"
    if value < 172800:
        return f"{value / 3600:.1f}h"
    return f"{value / 86400:.0f}d"


def fmt_rate(value: Optional[float]) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def memory(state: RankState) -> str:
    device = state.latest.get("mem_device_bytes")
    if device is not None:
        return fmt_bytes(device)
    host = state.latest.get("mem_host_rss_bytes")
    return "-" if host is None else f"{fmt_bytes(host)} host"


COLUMNS = ("RANK", "STATUS", "STEP", "LOSS", "GRAD_NORM", "LOSS_SCALE", "LR", "TOK/S",
           "STEP_TIME", "DATA_WAIT", "MEMORY", "UPD_RATIO", "AGE", "ERRORS")


def rank_row(rank: int, state: RankState, now: float) -> List[str]:
    latest = state.latest.get
    wait = latest("data_wait_share")
    return [str(rank), state.status, "-" if state.last_step is None else str(state.last_step),
            fmt_num(latest("loss")), fmt_num(latest("grad_norm")), fmt_num(latest("loss_scale")),
            fmt_num(latest("lr"), 3), fmt_rate(latest("tokens_per_s")),
            fmt_seconds(latest("step_time_s")),
            "-" if wait is None or not math.isfinite(wait) else f"{wait * 100:.1f}%",
            memory(state), fmt_num(latest("update_ratio"), 3), fmt_seconds(state.age(now)),
            str(state.counters["decode_errors"])]


def table(rows: List[List[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def render(store: Store, errors: List[SpoolError], now: float) -> str:
    out = []
    for run in store.runs.values():
        config = run.config
        facts = [f"run {run.run}"]
        if run.world_size is not None:
            facts.append(f"world_size {run.world_size}")
        for key in ("model", "precision", "seq_length", "global_batch"):
            if key in config:
                facts.append(f"{key} {config[key]}")
        out.append("  ".join(facts))
        rows = [list(COLUMNS)] + [rank_row(r, run.ranks[r], now) for r in sorted(run.ranks)]
        out.append(table(rows))
        out.append("")
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        more = len(errors) - len(shown)
        out.append(f"{len(errors)} bad line(s) skipped" + (f", first {len(shown)}:" if more else ":"))
        out.extend(f"  {e}" for e in shown)
    return "\n".join(out).rstrip() + "\n"


def read_spool(run_dir: Path) -> tuple:
    """Read the whole spool once through the pipeline (no rules): ``(store, errors)``."""
    errors: List[SpoolError] = []
    pipeline = Pipeline(run_dir, persist=False)
    pipeline.drain(lambda chunk: errors.extend(chunk.errors))
    return pipeline.store, errors


def run(args: argparse.Namespace) -> int:
    problem = run_dir_error(args.run_dir)
    if problem:
        print(f"msdoctor status: {problem}", file=sys.stderr)
        return 2
    store, errors = read_spool(args.run_dir)
    if not store.runs and not errors:
        print(f"no events yet in {args.run_dir / 'events'} (expected rank-<N>.jsonl files)")
        return 0
    sys.stdout.write(render(store, errors, time.time()))
    return 0
