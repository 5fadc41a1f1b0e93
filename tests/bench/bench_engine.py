"""Benchmark the rule engine: step events/s through decode + columnize + evaluate, ALL rules.

Generates realistic step lines in memory (every signal, ~440 bytes each, noisy
LLM-like loss, sampled update_ratio, an occasional overflow), then measures in
the same process:
  - bare ``orjson.loads`` of the same lines (the floor set by JSON parsing),
  - the ingest's decode (``msdoctor.spool.decode_line``: orjson + schema check),
  - ``columnize`` alone and the engine alone (``Engine.process`` on ready batches),
  - the whole path: decode -> columnize -> evaluate, in 8192-line batches per rank,
    ranks interleaved as the sidecar reads them,
and the engine's peak traced memory for 100k vs 1M steps (it must not grow).

    .venv/bin/python tests/bench/bench_engine.py [--ranks 1 --steps 200000] [--quick]
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import orjson  # noqa: E402

from msdoctor.batch import StepBatch, columnize  # noqa: E402
from msdoctor.engine.evaluator import Engine  # noqa: E402
from msdoctor.engine.loader import default_rules_dir, load_rules, rule_files  # noqa: E402
from msdoctor.events import encode, make  # noqa: E402
from msdoctor.spool import decode_line  # noqa: E402

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


def rules():
    shipped = default_rules_dir()
    if rule_files([shipped]) if shipped.is_dir() else []:
        ruleset = load_rules([shipped])
        return ruleset, f"{len(ruleset)} shipped rules from {shipped}"
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


def throughput(ranks: int, steps: int) -> None:
    ruleset, source = rules()
    print(f"rules: {source}")
    data = {r: lines_for(r, steps, 0) for r in range(ranks)}
    n_lines = sum(len(v) for v in data.values())
    n_steps = ranks * steps
    size = sum(len(l) for v in data.values() for l in v) / n_lines
    print(f"input: {ranks} rank(s) x {steps} steps = {n_steps} step lines, mean {size:.0f} B/line")

    t0 = time.perf_counter()
    for v in data.values():
        for line in v:
            orjson.loads(line)
    bare = time.perf_counter() - t0

    t0 = time.perf_counter()
    decoded = {r: [decode_line(line) for line in v] for r, v in data.items()}
    dec = time.perf_counter() - t0

    t0 = time.perf_counter()
    batches = {r: [columnize("bench", r, [e for e in v[k:k + BATCH] if e["type"] == "step"])
                   for k in range(1, len(v), BATCH)] for r, v in decoded.items()}
    col = time.perf_counter() - t0
    starts = {r: v[0] for r, v in decoded.items()}
    del decoded

    engine = Engine(ruleset)
    for r, e in starts.items():
        engine.process("bench", r, [e], None)
    t0 = time.perf_counter()
    for k in range(max(len(b) for b in batches.values())):
        for r, b in batches.items():
            if k < len(b):
                engine.process("bench", r, (), b[k])
    ev = time.perf_counter() - t0
    del batches

    engine = Engine(ruleset)
    t0 = time.perf_counter()
    for r, v in data.items():
        engine.process("bench", r, [decode_line(v[0])], None)
    for k in range(1, max(len(v) for v in data.values()), BATCH):
        for r, v in data.items():
            events = [decode_line(line) for line in v[k:k + BATCH]]
            if events:
                engine.process("bench", r, (), columnize("bench", r, events))
    whole = time.perf_counter() - t0

    print(f"bare orjson.loads             {rate(n_lines, bare)}")
    print(f"ingest decode (decode_line)   {rate(n_lines, dec)}")
    print(f"columnize                     {rate(n_steps, col)}")
    print(f"engine evaluate ({len(ruleset):2d} rules)    {rate(n_steps, ev)}")
    print(f"decode+columnize+evaluate     {rate(n_steps, whole)}   "
          f"(= {n_lines / bare / (n_steps / whole):.2f}x slower than bare orjson)")
    print(f"engine alerts raised: {engine.transitions} transitions "
          f"({', '.join(sorted({a['alert'] for a in engine.active()})) or 'none active at the end'})")


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


def memory(steps_list) -> None:
    ruleset, _ = rules()
    for steps in steps_list:
        engine = Engine(ruleset)
        tracemalloc.start()
        t0 = time.perf_counter()
        for batch in synthetic_batches(steps):
            engine.process("mem", 0, (), batch)
        took = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        state = len(orjson.dumps(engine.state_dict()))
        print(f"memory: {steps:>8} steps -> engine peak traced {peak / 2**20:6.1f} MiB, "
              f"snapshot state {state / 2**20:5.2f} MiB ({steps / took / 1e3:.0f}k steps/s "
              f"under tracemalloc)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args()
    if args.quick:
        throughput(args.ranks or 2, args.steps or 20_000)
        memory([20_000, 100_000])
        return 0
    if args.ranks or args.steps:
        throughput(args.ranks or 1, args.steps or 200_000)
    else:
        throughput(1, 200_000)
        throughput(8, 50_000)
    memory([100_000, 1_000_000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
