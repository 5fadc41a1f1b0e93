"""Benchmark: the first read of a spool's backlog (a restart without a snapshot, ``tui --run-dir``).

Two spools written with the real codec, every step signal, the shipped rules:

- *steady*: ``--ranks`` ranks x 90 steps, no pause;
- *paused*: ``--paused-ranks`` ranks x 150 steps with a 20 s pause every 10 steps (each rank's
  clock is ticked through each pause, as the live sidecar ticked it).

Each is read in one poll by a ``Pipeline``, as ``msdoctor serve`` and the embedded TUI read it
(``poll_once``: the ranks evaluated together), and by the reference measured in the same run:
the same chunks applied rank after rank with the engine's old per-rank limit (batches over 64
rows and ranks with pauses inside evaluated alone). Prints CPU seconds of both and the ratio,
and checks that both raise the same transitions.

    .venv/bin/python tests/bench/bench_backlog.py [--ranks 1024] [--paused-ranks 256]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from msdoctor.core.engine import default_rules_dir, evaluator, load_rules  # noqa: E402
from msdoctor.core.pipeline import Pipeline  # noqa: E402
from msdoctor.wire import encode  # noqa: E402

from spool_factory import STEP_TIME, rank_file, step, write_run  # noqa: E402

OLD_MANY_ROWS = 64


def steady(run_dir: Path, ranks: int) -> None:
    write_run(run_dir, run="bench", ranks=range(ranks), steps=90, t0=time.time() - 600.0,
              nan_at=85, slow_rank=7, heartbeat=False)


def paused(run_dir: Path, ranks: int) -> None:
    t0 = time.time() - 3000.0
    write_run(run_dir, run="bench", ranks=range(ranks), steps=30, t0=t0, heartbeat=False)
    for r in range(ranks):
        t, lines = t0 + 30 * STEP_TIME, []
        for n in range(31, 151):
            t += 20.0 + 0.01 * r if n % 10 == 0 else STEP_TIME
            lines.append(encode(step("bench", r, n, t)))
        with rank_file(run_dir, r).open("ab") as f:
            f.write(b"".join(lines))


def read(run_dir: Path, rules: list, together: bool) -> Tuple[float, List[tuple]]:
    """CPU seconds of one first read, and its transitions."""
    now = time.time()
    pipeline = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True,
                        clock=lambda: now)
    many_rows = evaluator.MANY_ROWS
    c0 = time.process_time()
    if together:
        pipeline.poll_once()
    else:
        evaluator.MANY_ROWS = OLD_MANY_ROWS
        try:
            for chunk in pipeline.tailer.poll(pipeline.poll_bytes):
                pipeline.apply(chunk)
            pipeline.tick()
        finally:
            evaluator.MANY_ROWS = many_rows
    cpu = time.process_time() - c0
    found = sorted((t.alert, t.rank, t.state, t.step, t.first_step)
                   for t in pipeline.transitions or [])
    return cpu, found


def case(name: str, write: Callable[[Path, int], None], ranks: int, rules: list) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        write(run_dir, ranks)
        new_cpu, new = read(run_dir, rules, together=True)
        old_cpu, old = read(run_dir, rules, together=False)
    assert new == old, f"{name}: the transitions differ"
    ratio = old_cpu / new_cpu if new_cpu else float("inf")
    print(f"{name:<40} together {new_cpu:6.2f} s CPU; rank by rank (reference) "
          f"{old_cpu:6.2f} s CPU; {ratio:4.1f}x faster; {len(new)} transitions, the same")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--paused-ranks", type=int, default=256)
    args = parser.parse_args()
    logging.getLogger("msdoctor").setLevel(logging.CRITICAL)
    rules = list(load_rules([default_rules_dir()]))
    case(f"steady: {args.ranks} ranks x 90 steps", steady, args.ranks, rules)
    case(f"paused: {args.paused_ranks} ranks x 150 steps, 12 pauses", paused, args.paused_ranks,
         rules)
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
