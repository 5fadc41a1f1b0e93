"""The rule engine alone on one live poll: N ranks, each with one new step (a NaN loss).

Two engines with the shipped rules are fed the same history (``--steps`` healthy steps per
rank); then the poll is evaluated rank by rank (``Engine.process``, the reference: what
every poll cost before) and all ranks together (``Engine.process_many``, what the sidecar
does now). Prints the CPU time of both (same run), and checks they raise the same alerts.

Run: .venv/bin/python tests/bench/bench_poll.py [--ranks 1024] [--steps 300]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from msdoctor.core.batch import StepBatch  # noqa: E402
from msdoctor.core.engine.evaluator import Engine  # noqa: E402
from msdoctor.core.engine.loader import default_rules_dir, load_rules  # noqa: E402


def batch(rank: int, first: int, n: int, nan: bool = False) -> StepBatch:
    rng = np.random.default_rng(rank * 1_000_003 + first)
    steps = np.arange(first, first + n, dtype=np.int64)
    loss = 10 / (1 + 0.001 * steps) + 0.01 * rng.random(n)
    if nan:
        loss[-1] = np.nan
    seconds = 0.4 + 0.001 * rng.random(n)
    cols = {"loss": loss, "grad_norm": 1 + 0.01 * rng.random(n), "loss_scale": np.full(n, 65536.0),
            "overflow": np.zeros(n), "lr": np.full(n, 3e-4), "tokens": np.full(n, 4096.0),
            "step_time_s": seconds, "data_wait_s": np.full(n, 0.002),
            "mem_host_rss_bytes": np.full(n, 3e10 + rank), "tokens_per_s": 4096.0 / seconds,
            "data_wait_share": 0.002 / seconds}
    return StepBatch("soak", rank, steps, 1000.0 + 0.4 * steps, cols, {})


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--ranks", type=int, default=1024)
    cli.add_argument("--steps", type=int, default=300)
    opts = cli.parse_args()
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} CPUs", flush=True)
    rules = list(load_rules([default_rules_dir()]))
    engines = []
    for _ in range(2):
        engine = Engine(rules)
        for r in range(opts.ranks):
            start = [{"type": "run_start", "rank": r, "run": "soak", "t": 1000.0,
                      "world_size": opts.ranks}]
            engine.process("soak", r, start, batch(r, 1, opts.steps))
        engines.append(engine)
    items = [("soak", r, [], batch(r, opts.steps + 1, 1, nan=True)) for r in range(opts.ranks)]
    cpu = time.process_time()
    alone = [a for item in items for a in engines[0].process(*item)]
    cpu_alone = time.process_time() - cpu
    cpu = time.process_time()
    together = engines[1].process_many(items)
    cpu_together = time.process_time() - cpu

    def key(a):
        return (a.alert, a.rank, a.state, a.step)
    assert sorted(map(key, alone)) == sorted(map(key, together))
    nan = sum(a.alert == "LossNonFinite" for a in together)
    print(f"engine, {opts.ranks} ranks x 1 new step ({nan} LossNonFinite alerts): all ranks "
          f"together {cpu_together * 1e3:.0f} ms CPU ({cpu_together / opts.ranks * 1e6:.0f} us "
          f"per rank); reference, same run, rank by rank: {cpu_alone * 1e3:.0f} ms CPU "
          f"({cpu_alone / opts.ranks * 1e6:.0f} us per rank); "
          f"{len(engines[1].program.nodes)} operators")
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
