"""Replay throughput: parse + evaluate a large MindFormers log with the shipped rules.

Prints lines/s for parsing alone and for parse + evaluate (the issue's target: 200k
lines/s on one core), as medians over repeats, with the machine's load average.
Run: ``.venv/bin/python tests/bench/bench_replay.py [--steps N] [--repeats R]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "fixtures" / "logs")]

from msdoctor.core.engine.loader import default_rules_dir, load_rules  # noqa: E402
from msdoctor.replay.driver import evaluate, items_of, load  # noqa: E402

import logformats  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200_000, help="step lines in the log")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rules = load_rules([str(default_rules_dir())])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank_0" / "info.log"
        path.parent.mkdir()
        losses = logformats.loss_curve(args.steps, seed=1)
        norms = [1.0 + 0.1 * (i % 7) for i in range(args.steps)]
        logformats.write(path, logformats.mf_lines(losses, grad_norms=norms, steps_per_epoch=args.steps,
                                                   overflow_at=range(1000, args.steps, 5000)))
        size = path.stat().st_size
        parse_s, total_s = [], []
        lines = 0
        for _ in range(args.repeats):
            started = time.perf_counter()
            recording = load([str(path)], seq_length=4096, progress=False)
            parsed = time.perf_counter()
            result = evaluate(items_of(recording), rules)
            done = time.perf_counter()
            parse_s.append(parsed - started)
            total_s.append(done - started)
            lines = recording.lines
        load1, load5, _ = os.getloadavg()
        print(f"bench_replay: MindFormers log, {lines:,} lines ({args.steps:,} steps), "
              f"{size / 2**20:.0f} MiB, {len(rules)} shipped rules, {result['summary']['firing']} "
              f"alert(s); load average {load1:.2f} / {load5:.2f} on {os.cpu_count()} cores")
        print(f"  parse only        : median {lines / statistics.median(parse_s):>12,.0f} lines/s "
              f"(best {lines / min(parse_s):,.0f}) over {args.repeats} runs")
        print(f"  parse + evaluate  : median {lines / statistics.median(total_s):>12,.0f} lines/s "
              f"(best {lines / min(total_s):,.0f}); target 200,000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
