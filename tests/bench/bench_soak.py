"""Load and soak of the real sidecar: the ``Pipeline`` ``msdoctor serve`` wires
(log reporter, rule engine with the shipped rules + journal, rule reloader, alert feed) and
snapshots every 5 s (forked), as serve runs it.

- ``fleet``: 1024 ranks x 10k steps pre-written, drained as fast as possible: events/s (wall
  and CPU) and peak RSS; then the live case: every rank appends 1 new step, one poll: ms per
  poll (1024 chunks) and us per chunk; and the time to render ``/metrics``.
- ``long``: 1 rank x 1M steps: RSS after 100k steps vs after 1M (bounded buffers: flat).

Each scenario runs in its own process (so peak RSS is its own). Prints the figures.

Run: .venv/bin/python tests/bench/bench_soak.py [--ranks 1024] [--steps 10000]
     [--long-steps 1000000] [--only fleet|long]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

STEP = ('{"v":1,"type":"step","rank":%d,"step":%d,"t":%.3f,"loss":%.6f,"grad_norm":%.5f,'
        '"loss_scale":65536.0,"overflow":false,"lr":0.0003,"tokens":4096,"step_time_s":%.4f,'
        '"data_wait_s":0.002,"mem_host_rss_bytes":%d}\n')


def write_rank(path: Path, rank: int, world: int, first: int, last: int, start: bool,
               t0: float, dt: float) -> int:
    """Steps ``first..last`` of one rank at times ``t0 + dt * step`` (plus run_start)."""
    with open(path, "a", encoding="ascii") as fh:
        if start:
            fh.write(json.dumps({"v": 1, "type": "run_start", "rank": rank, "run": "soak",
                                 "t": t0, "world_size": world,
                                 "config": {"model": "llama2_7b", "seq_length": 4096}}) + "\n")
        fh.write("".join(STEP % (rank, s, t0 + dt * s, 10.0 / (1 + 0.001 * s) + 0.01 * (s % 7),
                                 1.0 + 0.01 * (s % 13), 0.4 + 0.001 * (s % 5),
                                 30_000_000_000 + rank)
                         for s in range(first, last + 1)))
    return last - first + 1 + int(start)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def serve_sidecar(run_dir: Path):
    """The pipeline wired like ``msdoctor serve`` (without the HTTP thread)."""
    from msdoctor.cli.serve import add_arguments, build_pipeline, load_ruleset
    from msdoctor.http.wiring import Endpoint

    parser = argparse.ArgumentParser()
    add_arguments(parser)                        # serve's own options and defaults
    args = parser.parse_args([str(run_dir)])
    args.ruleset = load_ruleset(args)
    endpoint = Endpoint(run_dir)
    return build_pipeline(args, endpoint.deliverers), endpoint


def drain(sidecar) -> None:
    """Poll until nothing is left, snapshotting as ``Pipeline.run_forever`` does (forked)."""
    sidecar.last_snapshot = sidecar.clock.now()
    while sidecar.poll_once():                  # the loop of Pipeline.run_forever
        sidecar.snapshot_if_due()
    sidecar.collect_snapshot(wait=True)


def fleet(ranks: int, steps: int) -> None:
    import logging
    logging.basicConfig(level=logging.ERROR)
    run_dir = Path(tempfile.mkdtemp(prefix="msdoctor-soak-fleet-"))
    (run_dir / "events").mkdir()
    t = time.perf_counter()
    dt = 60.0 / steps                     # the run's steps span the last minute: no hang alerts
    t0 = time.time() - dt * steps
    lines = sum(write_rank(run_dir / "events" / f"rank-{r}.jsonl", r, ranks, 1, steps, True, t0, dt)
                for r in range(ranks))
    size = sum(f.stat().st_size for f in (run_dir / "events").iterdir())
    print(f"fleet: wrote {ranks} ranks x {steps} steps = {lines} lines, {size / 2**30:.2f} GiB "
          f"in {time.perf_counter() - t:.0f} s")
    base = rss_mb()
    sidecar, endpoint = serve_sidecar(run_dir)
    wall, cpu = time.perf_counter(), time.process_time()
    drain(sidecar)
    drained_peak = peak_mb()           # before the in-line snapshot below (serve forks its own)
    sidecar.save_snapshot()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    events = sum(s.counters["events"] for _, _, s in sidecar.store.ranks())
    assert events == lines, (events, lines)
    print(f"fleet: drained {events} events in {wall:.1f} s wall / {cpu:.1f} s CPU: "
          f"{events / wall:,.0f} events/s wall, {events / cpu:,.0f} events/s CPU; "
          f"RSS {rss_mb():.0f} MiB (before the sidecar {base:.0f}), peak {drained_peak:.0f} MiB "
          f"during the drain (its snapshots forked, as serve takes them), {peak_mb():.0f} MiB "
          f"after one more in-line snapshot")
    # live: every rank appends k new steps, then one poll
    for k in (1, 10):
        per = []
        for _ in range(5):
            first = sidecar.store.runs["soak"].ranks[0].last_step + 1
            t0 = time.time() - dt * (first + k)
            for r in range(ranks):
                write_rank(run_dir / "events" / f"rank-{r}.jsonl", r, ranks, first, first + k - 1,
                           False, t0, dt)
            w = time.perf_counter()
            chunks = sidecar.poll_once()
            per.append(time.perf_counter() - w)
            assert len(chunks) == ranks
        per.sort()
        print(f"fleet live: {ranks} ranks x {k} new step(s) each: one poll takes "
              f"{per[len(per) // 2] * 1e3:.0f} ms (median of 5; min {per[0] * 1e3:.0f}, max "
              f"{per[-1] * 1e3:.0f}) = {per[len(per) // 2] / ranks * 1e6:.0f} us per chunk")
    from msdoctor.exporter.collector import StoreCollector
    from msdoctor.exporter.exposition import LabelCache, render
    collector, cache = StoreCollector(sidecar.store, sidecar.alerts), LabelCache()
    for _ in range(2):                                  # the second scrape reuses label text
        w = time.perf_counter()
        body = render(collector.families(), cache)
        took = time.perf_counter() - w
    print(f"fleet: /metrics for {ranks} ranks: {len(body) / 2**20:.1f} MiB rendered in "
          f"{took * 1e3:.0f} ms")
    w = time.perf_counter()
    sidecar.save_snapshot()
    snap = sidecar.state_dir / "snapshot.npz"
    print(f"fleet: snapshot {snap.stat().st_size / 2**20:.0f} MiB written in "
          f"{time.perf_counter() - w:.1f} s; peak RSS {peak_mb():.0f} MiB")
    w = time.perf_counter()
    assert sidecar.save_snapshot_forked()
    hold = time.perf_counter() - w
    sidecar.collect_snapshot(wait=True)
    assert sidecar.snapshot_error is None, sidecar.snapshot_error
    print(f"fleet: the same snapshot forked, as serve takes it: the sidecar held {hold * 1e3:.0f}"
          f" ms, the child wrote it in {sidecar.snapshot_seconds:.1f} s")
    w = time.perf_counter()
    restored, _ = serve_sidecar(run_dir)             # a restart: loads that snapshot
    assert restored.restored is not None
    print(f"fleet: a restarted sidecar loads it in {time.perf_counter() - w:.1f} s; "
          f"peak RSS {peak_mb():.0f} MiB")
    subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def long(steps: int) -> None:
    import logging
    logging.basicConfig(level=logging.ERROR)
    run_dir = Path(tempfile.mkdtemp(prefix="msdoctor-soak-long-"))
    (run_dir / "events").mkdir()
    spool = run_dir / "events" / "rank-0.jsonl"
    sidecar, _ = serve_sidecar(run_dir)
    marks = {}
    wall = time.perf_counter()
    block, dt = 50_000, 60.0 / steps
    for first in range(1, steps + 1, block):
        last = min(steps, first + block - 1)
        write_rank(spool, 0, 1, first, last, first == 1, time.time() - dt * last, dt)
        drain(sidecar)
        done = sidecar.store.runs["soak"].ranks[0].last_step
        for mark in (100_000, 250_000, 500_000, 1_000_000, steps):
            if done >= mark and mark not in marks:
                marks[mark] = rss_mb()
    wall = time.perf_counter() - wall
    state = sidecar.store.runs["soak"].ranks[0]
    assert state.counters["steps"] == steps and state.last_step == steps, state.counters
    print(f"long: 1 rank x {steps} steps in {wall:.0f} s (writing included); RSS after " +
          ", ".join(f"{m // 1000}k steps {v:.0f} MiB" for m, v in sorted(marks.items())) +
          f"; peak {peak_mb():.0f} MiB; spool {spool.stat().st_size / 2**20:.0f} MiB")
    subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--ranks", type=int, default=1024)
    cli.add_argument("--steps", type=int, default=10_000)
    cli.add_argument("--long-steps", type=int, default=1_000_000)
    cli.add_argument("--only", choices=("fleet", "long"))
    opts = cli.parse_args()
    if opts.only == "fleet":
        fleet(opts.ranks, opts.steps)
        return 0
    if opts.only == "long":
        long(opts.long_steps)
        return 0
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} CPUs", flush=True)
    for only in ("long", "fleet"):
        done = subprocess.run([sys.executable, __file__, "--only", only, "--ranks",
                               str(opts.ranks), "--steps", str(opts.steps), "--long-steps",
                               str(opts.long_steps)])
        if done.returncode:
            return done.returncode
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
