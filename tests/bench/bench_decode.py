"""Decoder candidates side by side on the same spool lines (one rank of 25k steps).

Measures, in CPU time on the same lines: stdlib ``json.loads``, ``orjson.loads``, msgspec
(untyped, and typed structs of the step schema straight into 13 float columns) and
msdoctor's two decoders: the bulk decoder (:func:`msdoctor.core.spool_bulk.decode_bulk`:
orjson + validation + columns + a dict per event, what the live sidecar runs) and the
replay's typed decoder (:func:`msdoctor.core.spool_typed.decode_typed`: msgspec structs of
the step schema -> columns, no dict per step). ``docs/reliability.md`` ("Decoding") records
the choice.

    .venv/bin/python tests/bench/bench_decode.py [--steps 25000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from operator import attrgetter
from pathlib import Path
from typing import Callable, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "bench")]

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from bench_ingest import write_spool  # noqa: E402

from msdoctor.core.spool_bulk import decode_bulk  # noqa: E402
from msdoctor.core.spool_typed import decode_typed  # noqa: E402

SIGNALS = ("t", "loss", "grad_norm", "loss_scale", "lr", "tokens", "step_time_s", "data_wait_s",
           "update_ratio", "mem_device_bytes", "mem_device_peak_bytes", "mem_host_rss_bytes",
           "micro_steps")


def msgspec_candidates() -> List[tuple]:
    """msgspec decoders, when msgspec is importable."""
    try:
        import msgspec
    except ImportError:
        return []
    nan = float("nan")

    class Step(msgspec.Struct, tag="step", tag_field="type", forbid_unknown_fields=True):
        v: int
        rank: int
        step: int
        run: Optional[str] = None
        overflow: Optional[bool] = None
        t: float = nan
        loss: float = nan
        grad_norm: float = nan
        loss_scale: float = nan
        lr: float = nan
        tokens: float = nan
        step_time_s: float = nan
        data_wait_s: float = nan
        update_ratio: float = nan
        mem_device_bytes: float = nan
        mem_device_peak_bytes: float = nan
        mem_host_rss_bytes: float = nan
        micro_steps: float = nan

    typed = msgspec.json.Decoder(Step)
    untyped = msgspec.json.Decoder()

    def columns(lines: List[bytes]) -> dict:
        steps, rest = [], []
        for line in lines:
            try:
                steps.append(typed.decode(line))
            except msgspec.ValidationError:      # other events, "nan" strings: elsewhere
                rest.append(orjson.loads(line))
        return {name: np.fromiter(map(attrgetter(name), steps), float, len(steps))
                for name in SIGNALS}

    return [("msgspec (untyped, to dicts)", lambda lines: list(map(untyped.decode, lines))),
            ("msgspec typed structs -> 13 columns", columns)]


def best_rate(fn: Callable[[List[bytes]], object], lines: List[bytes], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        started = time.process_time()
        fn(lines)
        best = min(best, time.process_time() - started)
    return len(lines) / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="msdoctor-decode-") as tmp:
        write_spool(Path(tmp) / "run", 1, args.steps)
        lines = (Path(tmp) / "run" / "events" / "rank-0.jsonl").read_bytes().split(b"\n")[:-1]
    candidates = [("stdlib json.loads", lambda ls: list(map(json.loads, ls))),
                  ("orjson.loads", lambda ls: list(map(orjson.loads, ls))),
                  *msgspec_candidates(),
                  ("msdoctor decode_bulk (orjson + checks + columns)",
                   lambda ls: decode_bulk(ls, 0, "r", "r")),
                  ("msdoctor decode_typed (msgspec structs -> columns)",
                   lambda ls: decode_typed(ls, 0, "r", "r"))]
    print(f"bench_decode: {len(lines):,} lines of one rank ({sum(map(len, lines)) / len(lines):.0f}"
          f" B/line), CPU time, best of {args.repeats}; load average "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg()[:2])} on {os.cpu_count()} cores")
    for name, fn in candidates:
        rate = best_rate(fn, lines, args.repeats)
        print(f"  {name:50s} {rate:>12,.0f} lines/s")
    if not any(name.startswith("msgspec") for name, _ in candidates):
        print("  (msgspec is not installed: its rows are left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
