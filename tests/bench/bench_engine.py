"""Benchmark the rule engine: step events/s through decode + columnize + evaluate, ALL rules.

Generates realistic step lines (every signal, ~400 bytes each, noisy LLM-like
loss, sampled update_ratio, an occasional overflow), writes them as a spool,
then measures in the same process, on the same lines:
  - bare ``orjson.loads`` of every line (the floor set by JSON parsing),
  - the ingest's per-line decode (``msdoctor.core.spool.decode_line``) for reference,
  - the ingest: ``SpoolTailer.poll`` (read + bulk decode + columnize), as replay polls,
  - the engine alone (``Engine.on_chunk`` on the ready chunks),
  - the whole replay path: poll -> decode -> columnize -> evaluate, ranks interleaved
    as the tailer reads them; the headline figure, printed next to bare orjson,
and the engine's peak traced memory for 100k vs 1M steps (it must not grow).
Each figure is the median CPU time (``time.process_time``: the targets are per core) of
``--repeat`` runs; the load average is printed, since other work on the machine
(sharing its cores and caches) makes single runs noisy.

    .venv/bin/python tests/bench/bench_engine.py [--ranks 1 --steps 200000] [--quick]
        [--repeat 3] [--rules DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from msdoctor.cli.replay import replay  # noqa: E402
from msdoctor.core.batch import StepBatch  # noqa: E402
from msdoctor.core.engine.evaluator import Engine  # noqa: E402
from msdoctor.core.engine.loader import default_rules_dir, load_rules, rule_files  # noqa: E402
from msdoctor.core.snapshot import split_arrays  # noqa: E402
from msdoctor.core.spool import (  # noqa: E402
    SpoolTailer,
    decode_line,
    drain as poll_all,  # noqa: E402
)
from msdoctor.wire import encode, make  # noqa: E402

BATCH = 8192
FALLBACK = """
version: 1
groups:
  - name: bench
    rules:
      - {alert: LossNonFinite, expr: nonfinite(loss), labels: {severity: critical}, annotations: {summary: s}}
      - {alert: LossSpike, expr: "robust_z(loss, 200) > 6", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: LossSpikesPeriodic, expr: "spike_period(loss, 2000) > 0", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: LossPlateau, expr: "rel_change(loss, 500) > -0.001 and step > 2000", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: GradNormSpike, expr: "robust_z(grad_norm, 200) > 6", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: DataLoaderStarved, expr: "median(data_wait_share, 100) > 0.2", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: MemoryGrowth, expr: "slope(mem_host_rss_bytes, 1000) * 1000 > 1e9", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: LossScaleStuck, expr: "steps_since_change(loss_scale) > 2000", labels: {severity: warning}, annotations: {summary: s}}
      - {alert: JobHung, expr: "seconds_since_step() > 600 and running()", labels: {severity: critical}, annotations: {summary: s}}
"""


def rules(rules_dir: Optional[str] = None):
    shipped = Path(rules_dir) if rules_dir else default_rules_dir()
    if rule_files([shipped]) if shipped.is_dir() else []:
        ruleset = load_rules([shipped])
        return ruleset, f"{len(ruleset)} rules from {shipped}"
    path = Path("/tmp/msdoctor-bench-rules.yaml")
    path.write_text(FALLBACK)
    ruleset = load_rules([path])
    return ruleset, f"{len(ruleset)} built-in representative rules (rules/ is empty)"


def lines_for(rank: int, steps: int, seed: int) -> List[bytes]:
    rng = random.Random(seed * 1000 + rank)
    out = [encode(make("run_start", rank, run="bench", t=1.7e9, world_size=8,
                       config={"grad_accum": 1, "precision": "bf16"},
                       expect={"tokens_per_s_per_device": 16000.0}))]
    scale, rss = 65536.0, 2.0e9
    for step in range(1, steps + 1):
        loss = 2.0 + 8.0 * math.exp(-step / 3000.0) + rng.gauss(0.0, 0.03)
        overflow = rng.random() < 0.0005
        if overflow:
            scale = max(scale / 2.0, 1.0)
        rss += rng.gauss(0.0, 1e5)
        step_time = 0.5 + abs(rng.gauss(0.0, 0.01))
        event = make("step", rank, run="bench", step=step, t=1.7e9 + step * 0.5, loss=loss,
                     grad_norm=1.0 + abs(rng.gauss(0.0, 0.1)), loss_scale=scale, overflow=overflow,
                     lr=3e-4 * min(1.0, step / 2000.0), tokens=8192.0, step_time_s=step_time,
                     data_wait_s=0.01 * rng.random(), mem_device_bytes=3.2e10 + rng.random() * 1e6,
                     mem_device_peak_bytes=3.5e10, mem_host_rss_bytes=rss, micro_steps=1.0,
                     update_ratio=1e-3 * rng.random() if step % 10 == 0 else None)
        out.append(encode(event))
    return out


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds / 1e3:8.1f}k events/s"


def median_time(fn, repeat: int) -> float:
    """Median CPU seconds of ``fn`` (one core; wall time on a shared machine is noise)."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def load_average() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def write_spool(run_dir: Path, data) -> None:
    events = run_dir / "events"
    events.mkdir(parents=True)
    for r, lines in data.items():
        (events / f"rank-{r}.jsonl").write_bytes(b"".join(lines))


def throughput(ranks: int, steps: int, repeat: int, rules_dir: Optional[str]) -> None:
    ruleset, source = rules(rules_dir)
    print(f"rules: {source}")
    data = {r: lines_for(r, steps, 0) for r in range(ranks)}
    lines = [line for v in data.values() for line in v]
    n_steps = ranks * steps
    size = sum(map(len, lines)) / len(lines)
    print(f"input: {ranks} rank(s) x {steps} steps = {n_steps} step lines, mean {size:.0f} B/line; "
          f"median of {repeat}; {load_average()} at the start")
    with tempfile.TemporaryDirectory(prefix="msdoctor-bench-engine-") as tmp:
        run_dir = Path(tmp) / "bench"
        write_spool(run_dir, data)
        del data

        def bare():
            for line in lines:
                orjson.loads(line)

        def per_line():
            for line in lines:
                decode_line(line)

        def ingest(keep: bool = False):
            out = []
            for chunks in poll_all(SpoolTailer(run_dir)):
                for chunk in chunks if keep else ():
                    chunk.events = []           # the engine reads chunk.others and chunk.steps
                    out.append(chunk)
            return out

        chunks = ingest(keep=True)
        batches = [len(c.steps) for c in chunks if c.steps is not None]

        def evaluate():
            engine = Engine(ruleset)
            for chunk in chunks:
                engine.on_chunk(chunk)

        result = {}

        def whole():
            result.update(replay(run_dir, rules=ruleset))

        t_bare = median_time(bare, repeat)
        t_line = median_time(per_line, repeat)
        t_ingest = median_time(ingest, repeat)
        t_eval = median_time(evaluate, repeat)
        chunks.clear()                          # free the kept chunks before the whole replay
        t_whole = median_time(whole, repeat)
    n_lines = len(lines)
    s = result["summary"]
    assert s["steps"] == n_steps, (s["steps"], n_steps)
    print(f"bare orjson.loads                       {rate(n_lines, t_bare)}")
    print(f"per-line decode (decode_line)           {rate(n_lines, t_line)}")
    print(f"ingest: tail + decode + columnize       {rate(n_steps, t_ingest)}   "
          f"(batches of ~{int(statistics.median(batches))} steps)")
    print(f"engine evaluate ({len(ruleset):2d} rules)              {rate(n_steps, t_eval)}")
    print(f"replay: decode+columnize+evaluate       {rate(n_steps, t_whole)}   "
          f"vs bare orjson {rate(n_lines, t_bare)} in this run "
          f"(= {t_whole / t_bare * n_lines / n_steps:.2f}x its time)")
    print(f"alerts: {s['transitions']} transitions, firing {s['by_alert'] or 'none'}; "
          f"{load_average()} at the end")


def synthetic_batches(steps: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    for start in range(1, steps + 1, BATCH):
        n = min(BATCH, steps - start + 1)
        s = np.arange(start, start + n, dtype=np.int64)
        cols = {
            "loss": 2.0 + 8.0 * np.exp(-s / 3000.0) + rng.normal(0, 0.03, n),
            "grad_norm": 1.0 + np.abs(rng.normal(0, 0.1, n)), "loss_scale": np.full(n, 65536.0),
            "overflow": np.zeros(n), "lr": np.full(n, 3e-4), "tokens": np.full(n, 8192.0),
            "step_time_s": 0.5 + np.abs(rng.normal(0, 0.01, n)), "data_wait_s": 0.01 * rng.random(n),
            "mem_device_bytes": np.full(n, 3.2e10), "mem_device_peak_bytes": np.full(n, 3.5e10),
            "mem_host_rss_bytes": 2e9 + rng.normal(0, 1e5, n), "micro_steps": np.ones(n),
        }
        cols["tokens_per_s"] = cols["tokens"] / cols["step_time_s"]
        cols["data_wait_share"] = cols["data_wait_s"] / cols["step_time_s"]
        yield StepBatch("mem", 0, s, 1.7e9 + s * 0.5, cols, {})


def memory(steps_list, rules_dir: Optional[str]) -> None:
    ruleset, _ = rules(rules_dir)
    for steps in steps_list:
        engine = Engine(ruleset)
        tracemalloc.start()
        t0 = time.perf_counter()
        for batch in synthetic_batches(steps):
            engine.process("mem", 0, (), batch)
        took = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        doc, arrays = split_arrays(engine.state_dict())
        # measured as the snapshot writes it (stdlib json: numpy scalars are floats to it)
        state = len(json.dumps(doc).encode()) + sum(a.nbytes for a in arrays.values())
        print(f"memory: {steps:>8} steps -> engine peak traced {peak / 2**20:6.1f} MiB, "
              f"snapshot state {state / 2**20:5.2f} MiB ({steps / took / 1e3:.0f}k steps/s "
              f"under tracemalloc)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--rules", metavar="DIR", default=None,
                        help="rule directory (default: rules/)")
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory figures")
    args = parser.parse_args()
    if args.quick:
        throughput(args.ranks or 2, args.steps or 20_000, 1, args.rules)
        memory([20_000, 100_000], args.rules)
        return 0
    if args.ranks or args.steps:
        throughput(args.ranks or 1, args.steps or 200_000, args.repeat, args.rules)
    else:
        throughput(1, 200_000, args.repeat, args.rules)
        throughput(8, 50_000, args.repeat, args.rules)
    if not args.no_memory:
        memory([100_000, 1_000_000], args.rules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
