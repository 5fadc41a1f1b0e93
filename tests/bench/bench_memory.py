"""Where the sidecar's memory goes: R ranks x S steps drained through the pipeline ``msdoctor
serve`` wires (as ``bench_soak.py`` does), then the RSS of every poll and the bytes each
structure holds per rank: the store's series (values and steps stored, or implied), the
engine's carries (the arrays the last many-rank poll kept, and each operator's own), the
Python objects of the operator states. Extrapolate per rank to a fleet.

Run: .venv/bin/python tests/bench/bench_memory.py [--ranks 64] [--steps 10000] [--top 12]
"""
from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, Set

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

import bench_soak  # noqa: E402


def base_of(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def account(obj: Any, owners: Dict[int, np.ndarray], seen: Set[int], into: Dict[str, int]) -> None:
    """Add to ``into['arrays']`` the bytes of arrays whose owner was not counted yet, and
    to ``into['python']`` the size of the containers and scalars reached."""
    if isinstance(obj, np.ndarray):
        owner = base_of(obj)
        if id(owner) not in owners:
            owners[id(owner)] = owner
            into["arrays"] += owner.nbytes
        into["python"] += sys.getsizeof(obj) if obj.base is not None else 112
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    into["python"] += sys.getsizeof(obj)
    if isinstance(obj, dict):
        for v in obj.values():
            account(v, owners, seen, into)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            account(v, owners, seen, into)


def store_bytes(store: Any) -> Dict[str, float]:
    """Per rank: the series' stored values and steps, and how many are implied."""
    out: Dict[str, float] = defaultdict(float)
    ranks = store.ranks()
    for _, _, state in ranks:
        for series in state.series.values():
            out["values stored"] += 0 if series._values is None else series._values.nbytes
            out["steps stored"] += 0 if series._steps is None else series._steps.nbytes
            out["series with implied values"] += series._values is None
            out["series"] += 1
    return {k: v / max(len(ranks), 1) for k, v in out.items()}


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--ranks", type=int, default=64)
    cli.add_argument("--steps", type=int, default=10_000)
    cli.add_argument("--top", type=int, default=12, help="operators listed")
    opts = cli.parse_args()
    import logging
    logging.basicConfig(level=logging.ERROR)
    run_dir = Path(tempfile.mkdtemp(prefix="msdoctor-memory-"))
    (run_dir / "events").mkdir()
    dt = 60.0 / opts.steps
    t0 = time.time() - dt * opts.steps
    for r in range(opts.ranks):
        bench_soak.write_rank(run_dir / "events" / f"rank-{r}.jsonl", r, opts.ranks, 1,
                              opts.steps, True, t0, dt)
    before = bench_soak.rss_mb()
    sidecar, _ = bench_soak.serve_sidecar(run_dir)
    sidecar.last_snapshot = sidecar.clock.now()
    polls = 0
    while True:
        chunks = sidecar.poll_once()
        polls += 1
        rows = sum(len(c.steps) for c in chunks if c.steps is not None)
        print(f"poll {polls}: {len(chunks)} chunks, {rows} step rows; RSS "
              f"{bench_soak.rss_mb():.0f} MiB, peak {bench_soak.peak_mb():.0f} MiB")
        if not chunks:
            break
        sidecar.snapshot_if_due()
    sidecar.collect_snapshot(wait=True)
    gc.collect()
    n = opts.ranks
    print(f"RSS {bench_soak.rss_mb():.0f} MiB (before the sidecar {before:.0f}), peak "
          f"{bench_soak.peak_mb():.0f} MiB")
    print("store per rank:", {k: round(v) for k, v in store_bytes(sidecar.store).items()})
    program = sidecar.engine.program
    owners: Dict[int, np.ndarray] = {}
    seen: Set[int] = set()
    held: Dict[str, int] = defaultdict(int)
    account(program.held, owners, seen, held)
    per_op: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    count = 0
    for run in sidecar.engine.runs.values():
        for ctx in run.ranks.values():
            count = len(ctx.states)
            for i, state in enumerate(ctx.states):
                account(state, owners, seen, per_op[program.keys[i]])
            account([ctx.last, ctx.alerts, ctx.last_cond], owners, seen, per_op["(rank context)"])
    arrays = sum(v["arrays"] for v in per_op.values())
    python = sum(v["python"] for v in per_op.values())
    print(f"engine per rank: carries the last poll kept {held['arrays'] / n / 1e3:.0f} KB, "
          f"operators' own arrays {arrays / n / 1e3:.0f} KB, Python objects of {count} "
          f"operator states {python / n / 1e3:.0f} KB")
    groups = {key: sum(a.nbytes for a in entry[1:3]) for key, entry in program.held.items()}
    for key, size in sorted(groups.items(), key=lambda kv: -kv[1])[:opts.top]:
        print(f"  {size / n / 1e3:7.1f} KB kept carry  {str(key[1])[:100]}")
    for key, v in sorted(per_op.items(), key=lambda kv: -sum(kv[1].values()))[:opts.top]:
        print(f"  {v['arrays'] / n / 1e3:7.1f} KB arrays {v['python'] / n / 1e3:6.1f} KB Python"
              f"  {key[:100]}")
    subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
