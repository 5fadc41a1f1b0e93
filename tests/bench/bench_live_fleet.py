"""1024 live ranks, one new step each: time from the write to the last alert, RSS, snapshot.

The sidecar is the ``Pipeline`` ``msdoctor serve`` wires (shipped rules, journal, rule
reloader, alert feed). Every rank is written ``--steps`` healthy steps and drained; then one
NaN-loss step is appended to every rank at once and the sidecar polls (as ``run_forever``
does, back to back while there is input) until all ranks' LossNonFinite alerts are out.
Printed next to the references measured in the same run: the bare read of those 1024 new lines
(the spool tailer alone) and a healthy step appended to every rank (a poll with no alert).
The snapshot is taken in line, then forked as ``run_forever`` takes it (the time the sidecar
is held, next to the in-line one).

Run: .venv/bin/python tests/bench/bench_live_fleet.py [--ranks 1024] [--steps 300]
     [--profile FILE]   (cProfile of the NaN poll, sorted by cumulative time)
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_soak import peak_mb, rss_mb, serve_sidecar, write_rank  # noqa: E402

NAN_STEP = ('{"v":1,"type":"step","rank":%d,"step":%d,"t":%.3f,"loss":"nan","grad_norm":1.0,'
            '"loss_scale":65536.0,"overflow":false,"lr":0.0003,"tokens":4096,'
            '"step_time_s":0.4,"data_wait_s":0.002,"mem_host_rss_bytes":30000000000}\n')


def append_all(run_dir: Path, ranks: int, line) -> float:
    """Append ``line(rank)`` to every rank's file; the time just after the last write."""
    for r in range(ranks):
        with open(run_dir / "events" / f"rank-{r}.jsonl", "a", encoding="ascii") as fh:
            fh.write(line(r))
    return time.perf_counter()


def poll_until(sidecar, want: int) -> int:
    """Poll back to back until ``want`` LossNonFinite alerts fire (or 60 s)."""
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        sidecar.poll_once()
        firing = sum(1 for a in sidecar.alerts.firing() if a.get("alert") == "LossNonFinite")
        if firing >= want:
            return firing
    return -1


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--ranks", type=int, default=1024)
    cli.add_argument("--steps", type=int, default=300)
    cli.add_argument("--profile", help="write the NaN poll's cProfile stats here")
    opts = cli.parse_args()
    import logging
    logging.basicConfig(level=logging.CRITICAL)
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} CPUs", flush=True)
    ranks, steps = opts.ranks, opts.steps
    run_dir = Path(tempfile.mkdtemp(prefix="msdoctor-live-fleet-"))
    (run_dir / "events").mkdir()
    dt = 0.4
    t0 = time.time() - dt * steps
    for r in range(ranks):
        write_rank(run_dir / "events" / f"rank-{r}.jsonl", r, ranks, 1, steps, True, t0, dt)
    base = rss_mb()
    sidecar, _ = serve_sidecar(run_dir)
    w = time.perf_counter()
    while sidecar.poll_once():
        pass
    print(f"drain: {ranks} ranks x {steps} steps in {time.perf_counter() - w:.1f} s; "
          f"RSS {rss_mb():.0f} MiB (before the sidecar {base:.0f} MiB)", flush=True)

    # reference 1: the tailer alone reading one new line per rank
    from msdoctor.core.spool import SpoolTailer
    tailer = SpoolTailer(run_dir)
    while tailer.poll(sidecar.poll_bytes):
        pass
    step = steps + 1
    written = append_all(run_dir, ranks, lambda r: write_rank_line(r, step, t0 + dt * step))
    chunks = tailer.poll(sidecar.poll_bytes)
    bare = time.perf_counter() - written
    assert len(chunks) == ranks, len(chunks)
    # reference 2: one healthy step per rank through the sidecar (no alert)
    written = append_all(run_dir, ranks, lambda r: write_rank_line(r, step, t0 + dt * step))
    sidecar.poll_once()
    healthy = time.perf_counter() - written

    step += 1
    profile = cProfile.Profile() if opts.profile else None
    written = append_all(run_dir, ranks, lambda r: NAN_STEP % (r, step, t0 + dt * step))
    if profile:
        profile.enable()
    firing = poll_until(sidecar, ranks)
    took = time.perf_counter() - written
    if profile:
        profile.disable()
        profile.dump_stats(opts.profile)
        pstats.Stats(opts.profile).sort_stats("cumulative").print_stats(40)
    assert firing == ranks, f"{firing} of {ranks} LossNonFinite alerts"
    print(f"live: {ranks} ranks x 1 new NaN step: all {ranks} LossNonFinite alerts "
          f"{took * 1e3:.0f} ms after the write (reference, same run: the tailer alone reads the "
          f"{ranks} new lines in {bare * 1e3:.0f} ms; one healthy step per rank through the "
          f"sidecar {healthy * 1e3:.0f} ms)")
    w = time.perf_counter()
    sidecar.save_snapshot()
    snap = time.perf_counter() - w
    path = sidecar.state_dir / "snapshot.npz"
    size = path.stat().st_size
    print(f"snapshot: {size / 2**20:.0f} MiB written in {snap * 1e3:.0f} ms; "
          f"RSS {rss_mb():.0f} MiB, peak {peak_mb():.0f} MiB (before the sidecar {base:.0f} MiB)")
    print(f"  reference, same run: its arrays alone written in {bare_save(path) * 1e3:.0f} ms "
          f"(np.savez + fsync); the snapshot read back into a new sidecar in "
          f"{restart(run_dir) * 1e3:.0f} ms", flush=True)
    forked_save(sidecar, run_dir, ranks, step, t0, dt, snap)
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    import shutil
    shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def forked_save(sidecar, run_dir: Path, ranks: int, step: int, t0: float, dt: float,
                in_line: float) -> None:
    """A periodic snapshot as ``run_forever`` takes it: forked; the sidecar polls on."""
    import resource
    w = time.perf_counter()
    assert sidecar.save_snapshot_forked()
    pause = time.perf_counter() - w
    step += 1
    written = append_all(run_dir, ranks, lambda r: write_rank_line(r, step, t0 + dt * step))
    sidecar.poll_once()
    polled = time.perf_counter() - written
    sidecar.collect_snapshot(wait=True)
    assert sidecar.snapshot_failures == 0, sidecar.snapshot_error
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"forked snapshot: the sidecar held {pause * 1e3:.0f} ms (the fork); the child wrote "
          f"it in {sidecar.snapshot_seconds * 1e3:.0f} ms, meanwhile the sidecar read and judged "
          f"one new step of each rank in {polled * 1e3:.0f} ms; child peak RSS {child_peak:.0f} "
          f"MiB (pages shared with the sidecar counted)")
    print(f"  reference, same run: the in-line snapshot above held the sidecar "
          f"{in_line * 1e3:.0f} ms", flush=True)


def bare_save(path: Path) -> float:
    """Seconds to write the arrays of snapshot ``path`` again with ``np.savez`` and fsync."""
    import numpy as np
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    copy = path.with_name("bare.npz")
    w = time.perf_counter()
    with copy.open("wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    took = time.perf_counter() - w
    copy.unlink()
    return took


def restart(run_dir: Path) -> float:
    """Seconds a new sidecar takes to load the snapshot of ``run_dir`` (nothing is polled)."""
    w = time.perf_counter()
    sidecar, _ = serve_sidecar(run_dir)
    took = time.perf_counter() - w
    assert sidecar.restored is not None, "the snapshot was not loaded"
    return took


def write_rank_line(rank: int, step: int, t: float) -> str:
    from bench_soak import STEP
    return STEP % (rank, step, t, 2.5, 1.0, 0.4, 30_000_000_000 + rank)


if __name__ == "__main__":
    raise SystemExit(main())
