"""Order statistics in the engine: the selection / rank sort against sorting every window.

Decodes a spool (``bench_ingest.write_spool``: 13 signals a line) once, then evaluates the
shipped rules over its chunks with the engine alone, alternately with
  - the reference: every window of median/quantile/robust_z gathered and sorted by value
    (``np.sort``, as the engine did before), and
  - the engine as it is (a wavelet-matrix selection for median/quantile over long batches,
    wide windows sorted as 16-bit ranks, timsort for the others),
and prints the median CPU time (``process_time``) of each, the order-statistic operators'
share, and the ratio, with the load average. The alert transitions of both must be equal.

    .venv/bin/python tests/bench/bench_orderstats.py [--ranks 8 --steps 25000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "bench")]

from bench_ingest import write_spool  # noqa: E402

from msdoctor.core.engine import orderstats  # noqa: E402
from msdoctor.core.engine.evaluator import Engine  # noqa: E402
from msdoctor.core.engine.loader import default_rules_dir, load_rules  # noqa: E402
from msdoctor.core.engine.sortedrows import SortedRows  # noqa: E402
from msdoctor.core.spool import SpoolTailer, drain  # noqa: E402


def reference_sorted_windows(V: np.ndarray, lo: np.ndarray, hi: np.ndarray
                             ) -> Tuple[np.ndarray, np.ndarray]:
    """Every window gathered into a +inf-padded row and sorted by value (the old path)."""
    cnt = hi - lo
    width = int(cnt.max()) if cnt.shape[0] else 0
    if width == 0:
        return np.zeros((lo.shape[0], 0)), cnt
    full = cnt == width
    matrix = np.empty((lo.shape[0], width))
    if full.any():
        matrix[full] = sliding_window_view(V, width)[lo[full]]
    part = np.flatnonzero(~full)
    offsets = np.arange(width)
    padded = V[np.minimum(lo[part, None] + offsets[None, :], V.shape[0] - 1)]
    padded[offsets[None, :] >= cnt[part, None]] = np.inf
    matrix[part] = padded
    if orderstats.constant(V, lo, hi) is None:
        matrix.sort(axis=1)
    return matrix, cnt


class Timed:
    """CPU time spent in the order-statistic operators' ``evaluate``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.saved: List[Tuple[type, Any]] = []

    def __enter__(self) -> "Timed":
        for cls in (orderstats.Median, orderstats.Quantile, orderstats.RobustZ):
            original = cls.__dict__.get("evaluate") or orderstats.OrderStatistic.evaluate
            self.saved.append((cls, cls.__dict__.get("evaluate")))

            def timed(node: Any, *args: Any, _original: Any = original) -> Any:
                t0 = time.process_time()
                try:
                    return _original(node, *args)
                finally:
                    self.seconds += time.process_time() - t0
            cls.evaluate = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        for cls, original in self.saved:
            if original is None:
                del cls.evaluate
            else:
                cls.evaluate = original  # type: ignore[method-assign]


def reference_sorted_rows(V: np.ndarray, lo: np.ndarray, hi: np.ndarray
                          ) -> Tuple[SortedRows, np.ndarray]:
    """:func:`reference_sorted_windows` as the rows the order statistics read."""
    matrix, cnt = reference_sorted_windows(V, lo, hi)
    return SortedRows(matrix), cnt


def run(chunks: List[Any], ruleset: Any, reference: bool) -> Dict[str, Any]:
    saved = orderstats.sorted_rows, orderstats.pays
    if reference:
        orderstats.sorted_rows = reference_sorted_rows  # type: ignore[assignment]
        orderstats.pays = lambda *a, **k: False  # type: ignore[assignment]
    try:
        engine = Engine(ruleset)
        transitions: List[Any] = []
        engine.sinks.append(lambda a: transitions.append((a.alert, a.rank, a.step, a.state, a.value)))
        with Timed() as timed:
            t0 = time.process_time()
            for chunk in chunks:
                engine.on_chunk(chunk)
            took = time.process_time() - t0
        return {"cpu": took, "orderstats": timed.seconds, "transitions": transitions}
    finally:
        orderstats.sorted_rows, orderstats.pays = saved  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ruleset = load_rules([str(default_rules_dir())])
    with tempfile.TemporaryDirectory(prefix="msdoctor-bench-orderstats-") as tmp:
        run_dir = Path(tmp) / "run"
        write_spool(run_dir, args.ranks, args.steps)
        chunks = []
        for polled in drain(SpoolTailer(run_dir)):
            for chunk in polled:
                chunk.events = []
                chunks.append(chunk)
    events = args.ranks * args.steps
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench_orderstats: {args.ranks} ranks x {args.steps:,} steps, {len(ruleset)} shipped "
          f"rules, engine alone (decoded chunks), median CPU time of {args.repeat}; "
          f"load average {load} on {os.cpu_count()} cores")
    results: Dict[bool, List[Dict[str, Any]]] = {True: [], False: []}
    for _ in range(args.repeat):
        for reference in (True, False):
            results[reference].append(run(chunks, ruleset, reference))
    ref, new = results[True], results[False]
    assert ref[0]["transitions"] == new[0]["transitions"], "the alerts differ"
    for name, rows in (("sort every window (reference)", ref), ("engine as it is", new)):
        cpu = statistics.median(r["cpu"] for r in rows)
        part = statistics.median(r["orderstats"] for r in rows)
        print(f"  {name:<30}: {cpu:6.2f} s CPU = {events / cpu:>9,.0f} events/s; "
              f"median/quantile/robust_z {part:5.2f} s")
    ratio = statistics.median(r["cpu"] for r in ref) / statistics.median(r["cpu"] for r in new)
    part = (statistics.median(r["orderstats"] for r in ref)
            / statistics.median(r["orderstats"] for r in new))
    print(f"  engine {ratio:.2f}x faster, order statistics {part:.2f}x; "
          f"{len(new[0]['transitions'])} transitions, equal; load average "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
