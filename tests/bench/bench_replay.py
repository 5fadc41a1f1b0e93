"""Replay throughput: a large MindFormers log, and a spool end to end, with the shipped rules.

Log: lines/s for parsing alone and for parse + evaluate, as medians over repeats.
Spool (``--spool-ranks`` x ``--spool-steps``, 13 signals a line): ``msdoctor replay RUN_DIR``
as a user runs it, from process start to its last line, with ``--jobs 1`` and ``--jobs 2``,
in events/s, printed next to bare ``orjson.loads`` of the same lines (CPU time), with the
machine's load average.
Run: ``.venv/bin/python tests/bench/bench_replay.py [--steps N] [--repeats R] [--spool-only]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "fixtures" / "logs")]

from msdoctor.core.engine.loader import default_rules_dir, load_rules  # noqa: E402
from msdoctor.replay.driver import evaluate, items_of, load  # noqa: E402

import logformats  # noqa: E402


def spool_replay(ranks: int, steps: int, repeats: int) -> None:
    """``msdoctor replay`` of a spool, end to end, next to bare orjson on the same lines."""
    import orjson

    sys.path.insert(0, str(REPO / "tests" / "bench"))
    from bench_ingest import write_spool

    with tempfile.TemporaryDirectory(prefix="msdoctor-replay-") as tmp:
        run_dir = Path(tmp) / "run"
        events = write_spool(run_dir, ranks, steps)
        lines = [line for path in sorted((run_dir / "events").iterdir())
                 for line in path.read_bytes().split(b"\n")[:-1]]
        started = time.process_time()
        for line in lines:
            orjson.loads(line)
        orjson_rate = len(lines) / (time.process_time() - started)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        print(f"bench_replay: spool of {ranks} ranks x {steps:,} steps = {events:,} events; "
              f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg()[:2])} on "
              f"{os.cpu_count()} cores")
        print(f"  bare orjson.loads of the same lines : {orjson_rate:>12,.0f} events/s (CPU time)")
        for jobs in (1, 2):
            took, cpu = [], []
            for _ in range(repeats):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir),
                                "--jobs", str(jobs)], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                took.append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            print(f"  msdoctor replay --jobs {jobs} end to end  : "
                  f"{events / statistics.median(took):>12,.0f} events/s wall, "
                  f"{events / statistics.median(cpu):,.0f} per CPU second (medians of "
                  f"{repeats}); target 500,000 on one core")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200_000, help="step lines in the log")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--spool-ranks", type=int, default=8)
    parser.add_argument("--spool-steps", type=int, default=25_000)
    parser.add_argument("--spool-only", action="store_true", help="skip the MindFormers log")
    args = parser.parse_args()
    spool_replay(args.spool_ranks, args.spool_steps, max(1, args.repeats // 2))
    if args.spool_only:
        return 0
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
