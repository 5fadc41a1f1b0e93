"""Benchmark the sidecar ingest: tail + decode + columnize + Store.apply, in lines/s.

Writes a realistic spool (default 8 ranks x 50k steps, ~380-byte step lines),
then measures in the same process:
  - bare ``orjson.loads`` over the same lines (the floor set by JSON parsing),
  - ``msdoctor.wire.decode`` (orjson + schema validation),
  - the full ingest: SpoolTailer.poll -> Store.apply, until the spool is drained,
and prints lines/s for each (CPU time, ``time.process_time``: other work on a
shared machine makes wall time noise), the ingest/orjson ratio, snapshot size
and save/load time, and peak RSS.

    .venv/bin/python tests/bench/bench_ingest.py [--ranks 8] [--steps 50000]
"""
from __future__ import annotations

import argparse
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from msdoctor.core import snapshot  # noqa: E402
from msdoctor.core.spool import SpoolTailer  # noqa: E402
from msdoctor.core.state import Store  # noqa: E402
from msdoctor.wire import decode, encode, make  # noqa: E402


def write_spool(run_dir: Path, ranks: int, steps: int, seed: int = 0) -> int:
    """A spool like a real run's: run_start, step lines with every signal, heartbeats,
    an occasional overflow and sampled update_ratio, run_end. Returns its line count."""
    rng = random.Random(seed)
    events = run_dir / "events"
    events.mkdir(parents=True)
    total = 0
    for rank in range(ranks):
        t = 1_732_900_000.0 + rank * 0.01
        lines = [encode(make("run_start", rank, run="bench-llama-7b", world_size=ranks, t=t,
                             config={"model": "llama2_7b", "params": 6_738_415_616,
                                     "seq_length": 4096, "micro_batch": 1, "precision": "bf16"}))]
        loss, scale = 10.5, 65536.0
        for step in range(1, steps + 1):
            step_time = 0.4 + rng.random() * 0.02
            t += step_time
            loss = max(1.5, loss * 0.9999 + rng.gauss(0, 0.01))
            overflow = rng.random() < 0.001
            if overflow:
                scale /= 2
            fields = dict(t=round(t, 6), loss=loss, grad_norm=abs(rng.gauss(1.0, 0.2)),
                          loss_scale=scale, overflow=overflow, lr=3e-4 * min(1.0, step / 2000),
                          tokens=4096, step_time_s=step_time, data_wait_s=rng.random() * 0.01,
                          mem_device_bytes=rng.randint(50, 52) * 2**30,
                          mem_device_peak_bytes=56 * 2**30, mem_host_rss_bytes=12 * 2**30 + step)
            if overflow:
                fields["grad_norm"] = math.inf
            if step % 50 == 0:
                fields["update_ratio"] = rng.random() * 1e-3
            lines.append(encode(make("step", rank, step=step, **fields)))
            if step % 100 == 0:
                lines.append(encode(make("heartbeat", rank, t=t, step=step, dropped=0)))
        lines.append(encode(make("run_end", rank, t=t, status="completed", step=steps)))
        (events / f"rank-{rank}.jsonl").write_bytes(b"".join(lines))
        total += len(lines)
    return total


def rate(lines: int, seconds: float) -> str:
    return f"{lines / seconds:>10,.0f} lines/s ({seconds:.2f} s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--write-only", type=Path, metavar="RUN_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_only:                 # child process: keeps the writer's memory out of RSS
        print(write_spool(args.write_only, args.ranks, args.steps))
        return 0
    with tempfile.TemporaryDirectory(prefix="msdoctor-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        t0 = time.perf_counter()
        total = int(subprocess.run(
            [sys.executable, __file__, "--ranks", str(args.ranks), "--steps", str(args.steps),
             "--write-only", str(run_dir)], check=True, capture_output=True, text=True).stdout)
        size = sum(p.stat().st_size for p in (run_dir / "events").iterdir())
        print(f"spool: {args.ranks} ranks x {args.steps} steps = {total:,} lines, "
              f"{size / 2**20:.1f} MiB, {size / total:.0f} B/line "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        # Full ingest first, so its peak RSS is not inflated by the baselines' line lists.
        tailer, store = SpoolTailer(run_dir), Store()
        ingested, t0 = 0, time.process_time()
        while True:
            chunks = tailer.poll()
            if not chunks:
                break
            for chunk in chunks:
                store.apply(chunk)
                ingested += len(chunk.events) + len(chunk.errors)
        ingest_s = time.process_time() - t0
        rss_ingest = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert ingested == total, (ingested, total)
        steps = sum(state.counters["steps"] for _, _, state in store.ranks())
        assert steps == args.ranks * args.steps, steps

        state_dir = Path(tmp) / "state"
        t0 = time.perf_counter()
        path = snapshot.save(state_dir, run_dir, tailer.state_dict(), store)
        save_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        restored = snapshot.load(state_dir, run_dir)
        load_s = time.perf_counter() - t0
        assert restored is not None and restored.spool == tailer.state_dict()

        sample = (run_dir / "events" / "rank-0.jsonl").read_bytes().split(b"\n")[:-1]
        t0 = time.process_time()
        for line in sample:
            orjson.loads(line)
        orjson_s = time.process_time() - t0
        t0 = time.process_time()
        for line in sample:
            decode(line)
        decode_s = time.process_time() - t0

        orjson_rate = len(sample) / orjson_s
        ingest_rate = total / ingest_s
        print(f"bare orjson.loads      {rate(len(sample), orjson_s)}   (rank 0's lines)")
        print(f"events.decode          {rate(len(sample), decode_s)}   (orjson + validation)")
        print(f"ingest (tail+decode+columnize+apply) {rate(total, ingest_s)}")
        print(f"ingest / orjson ratio  {ingest_rate / orjson_rate:.2f}   (CPU time; load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
        print(f"snapshot: {path.stat().st_size / 2**20:.1f} MiB, saved in {save_s * 1000:.0f} ms, "
              f"loaded in {load_s * 1000:.0f} ms")
        print(f"peak RSS: {rss_ingest / 1024:.0f} MiB after ingest "
              f"(before ingest, with imports: {rss_before / 1024:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
