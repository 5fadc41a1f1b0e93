"""Live alert latency: emit -> alert line, on N ranks through the real Emitter and sidecar.

N ranks (threads, each with its own real :class:`trainer_hooks.emitter.Emitter` at its
default flush timer) emit step events at ``--rate`` steps/s; every 40 steps each rank
emits a NaN loss. A real ``msdoctor serve`` (default ``--poll``) watches the run
directory; the benchmark follows ``alerts.jsonl`` and times each LossNonFinite firing
from the ``emit`` call of its step. Run twice in the same invocation: as shipped (the
sidecar woken by inotify, the writer's short flush timer) and the reference (the sidecar
polling every ``--poll`` s, the writer flushing every 0.1 s, as before).

    .venv/bin/python tests/bench/bench_latency.py [--ranks 8] [--seconds 20] [--rate 20]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from trainer_hooks.emitter import Emitter  # noqa: E402
from trainer_hooks.wire import make  # noqa: E402

from servers import cpu_seconds, sidecar  # noqa: E402


def train(run_dir: Path, rank: int, ranks: int, steps: int, rate: float, flush_s: float,
          sent: Dict[Tuple[int, int], float]) -> None:
    """One rank: ``steps`` step events at ``rate``/s, a NaN loss every 40 steps."""
    kwargs = {"flush_s": flush_s} if flush_s else {}
    emitter = Emitter(str(run_dir), rank, run="latency", **kwargs)
    emitter.emit(make("run_start", rank, run="latency", world_size=ranks, t=time.time()))
    start = time.monotonic()
    for step in range(1, steps + 1):
        delay = start + step / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        nan = step > 20 and step % 40 == (rank * 5) % 40
        now = time.time()
        emitter.emit(make("step", rank, run="latency", step=step, t=now,
                          loss=float("nan") if nan else 2.0 + 1.0 / step, grad_norm=1.0,
                          step_time_s=1.0 / rate, tokens=4096.0))
        if nan:
            sent[(rank, step)] = now
    emitter.close()


def measure(args: argparse.Namespace, reference: bool, cpu: List[float]) -> List[float]:
    """Latencies (s) of every LossNonFinite firing of one run."""
    if reference:
        os.environ["MSDOCTOR_WAKE"] = "poll"
    else:
        os.environ.pop("MSDOCTOR_WAKE", None)
    with tempfile.TemporaryDirectory(prefix="msdoctor-latency-") as tmp:
        run_dir, work = Path(tmp) / "run", Path(tmp) / "work"
        (run_dir / "events").mkdir(parents=True)
        work.mkdir()
        sent: Dict[Tuple[int, int], float] = {}
        seen: Dict[Tuple[int, int], float] = {}
        steps = int(args.seconds * args.rate)
        with sidecar(run_dir, work, ["--poll", str(args.poll)]) as server:
            cpu0, wall0 = cpu_seconds(server.proc.pid), time.monotonic()
            threads = [threading.Thread(target=train, args=(run_dir, r, args.ranks, steps, args.rate,
                                                             0.1 if reference else 0.0, sent))
                       for r in range(args.ranks)]
            for thread in threads:
                thread.start()
            journal, offset, buffer = run_dir / "alerts.jsonl", 0, b""
            deadline = time.monotonic() + args.seconds + 10
            while time.monotonic() < deadline:
                if journal.exists():
                    with journal.open("rb") as fh:
                        fh.seek(offset)
                        data = fh.read()
                    now = time.time()
                    offset += len(data)
                    buffer += data
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        alert = json.loads(line)
                        if alert["alert"] == "LossNonFinite" and alert["state"] == "firing":
                            seen.setdefault((alert["rank"], alert["step"]), now)
                if not any(t.is_alive() for t in threads) and len(seen) >= len(sent):
                    break
                time.sleep(0.002)
            for thread in threads:
                thread.join()
            cpu.append((cpu_seconds(server.proc.pid) - cpu0) / (time.monotonic() - wall0))
        missing = set(sent) - set(seen)
        if missing:
            print(f"  ({len(missing)} NaN step(s) raised no alert within 10 s)")
        return sorted(seen[key] - sent[key] for key in seen if key in sent)


def describe(name: str, latencies: List[float]) -> str:
    ms = [x * 1000 for x in latencies]
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return (f"  {name:34s} n={len(ms):4d}  p50 {statistics.median(ms):6.0f} ms  "
            f"p99 {p99:6.0f} ms  max {max(ms):6.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=20.0, help="steps/s per rank")
    parser.add_argument("--poll", type=float, default=0.5, help="the sidecar's --poll")
    args = parser.parse_args()
    print(f"bench_latency: {args.ranks} ranks at {args.rate:g} steps/s for {args.seconds:g} s; "
          f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg()[:2])} on "
          f"{os.cpu_count()} cores")
    cpu: List[float] = []
    shipped = measure(args, False, cpu)
    before = measure(args, True, cpu)
    print(describe("inotify + 20 ms writer flush", shipped)
          + f"  sidecar CPU {cpu[0]:.2f} s/s   target p99 <= 250 ms")
    print(describe(f"reference: poll {args.poll:g} s + 0.1 s flush", before)
          + f"  sidecar CPU {cpu[1]:.2f} s/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
