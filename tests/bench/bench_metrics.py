"""Benchmark: render ``/metrics`` for 1024 ranks (target: <= 50 ms per scrape).

    .venv/bin/python tests/bench/bench_metrics.py [--ranks 1024] [--steps 20]

Builds a real sidecar state from a spool written with the real codec (every
step signal recorded, firing alerts, two receivers), then times a full scrape
through the HTTP path's renderer (state walk + text exposition) and, for
comparison, prometheus_client's ``generate_latest`` over the same collector.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from msdoctor.core.pipeline import Pipeline  # noqa: E402
from msdoctor.exporter.collector import StoreCollector  # noqa: E402
from msdoctor.exporter.exposition import LabelCache, render  # noqa: E402

from spool_factory import STEP_TIME, write_run  # noqa: E402

TARGET_MS = 50.0


class _Alerts:
    def __init__(self, ranks: int) -> None:
        self._active = [{"alert": "LossNonFinite", "state": "firing", "severity": "critical",
                         "run": "bench", "rank": r} for r in range(0, ranks, 64)]

    def active(self):
        return list(self._active)


class _Receiver:
    def __init__(self, name: str) -> None:
        self.receiver, self.stats = name, {"sent": 10, "failed": 1, "dropped": 0}


def _time(fn, repeat: int) -> list:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    written = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        write_run(Path(tmp), run="bench", ranks=range(args.ranks), steps=args.steps, t0=written)
        sidecar = Pipeline(tmp, persist=False)
        while sidecar.poll_once():
            pass
    as_of = [written + args.steps * STEP_TIME + 1.0]          # every rank live (rates as recorded)
    collector = StoreCollector(sidecar.store, _Alerts(args.ranks),
                               [_Receiver("alertmanager"), _Receiver("webhook")],
                               clock=lambda: as_of[0])
    cache = LabelCache()
    body = render(collector.families(), cache)                 # warm the label cache
    samples = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
    cold = _time(lambda: render(collector.families(), LabelCache()), 3)
    warm = _time(lambda: render(collector.families(), cache), args.repeat)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    reference = _time(lambda: generate_latest(registry), 3)
    assert generate_latest(registry) == render(collector.families(), cache)
    median = statistics.median(warm)
    as_of[0] += 7200.0                                   # every rank stale and gone for good
    assert b"msdoctor_rank_stale" in render(collector.families(), cache)
    stale = _time(lambda: render(collector.families(), cache), args.repeat)
    print(f"/metrics for {args.ranks} ranks: {samples} samples, {len(body) / 1e6:.2f} MB")
    print(f"  msdoctor renderer: median {median:.1f} ms, max {max(warm):.1f} ms "
          f"(first scrape, cold label cache: {statistics.median(cold):.1f} ms); "
          f"target <= {TARGET_MS:.0f} ms: {'OK' if median <= TARGET_MS else 'MISSED'}")
    print(f"  the same ranks all stale and gone (rates zeroed): median "
          f"{statistics.median(stale):.1f} ms")
    print(f"  prometheus_client generate_latest (same bytes): median "
          f"{statistics.median(reference):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
