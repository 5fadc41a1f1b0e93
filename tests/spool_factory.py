"""Write realistic spool files (``<run_dir>/events/rank-<N>.jsonl``) with the real codec.

Used by the exporter, API, delivery and real-server tests and by the metrics
benchmark. Values look like a small LLM pretraining run in fp16 with dynamic
loss scaling: a decaying loss, warm-up learning rate, 8192 tokens per step,
~0.5 s steps, update ratios on every 10th step, device and host memory.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from msdoctor.wire import encode, make

TOKENS = 8192.0
STEP_TIME = 0.5
EXPECT_TPS = TOKENS / STEP_TIME


def rank_file(run_dir: Path, rank: int) -> Path:
    path = Path(run_dir) / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def run_start(run: str, rank: int, world_size: int, t: float, expect: bool = True) -> dict:
    config = {"model": "llama-tiny", "params": 2_100_000, "seq_length": 2048, "micro_batch": 4,
              "global_batch": 4 * world_size, "grad_accum": 1, "precision": "fp16",
              "optimizer": "AdamW", "lr": 3e-4, "total_steps": 1000,
              "versions": {"mindspore": "2.9.0", "mindformers": "1.9.0", "python": "3.11"}}
    fields = {"expect": {"tokens_per_s_per_device": EXPECT_TPS, "step_time_s": STEP_TIME}} \
        if expect else {}
    return make("run_start", rank, run=run, world_size=world_size, t=t, config=config, **fields)


def step(run: str, rank: int, n: int, t: float, slow: float = 1.0, loss: Optional[float] = None,
         overflow: bool = False) -> dict:
    """One step event; ``slow`` multiplies the step time (a straggler)."""
    step_time = STEP_TIME * slow * (1.0 + 0.02 * math.sin(n + rank))
    fields = dict(
        loss=loss if loss is not None else 2.0 + 8.0 / math.sqrt(n) + 0.01 * math.sin(n * 1.7),
        grad_norm=0.8 + 2.0 / math.sqrt(n), loss_scale=65536.0 / (2 if overflow else 1),
        overflow=overflow, lr=3e-4 * min(1.0, n / 100), tokens=TOKENS, step_time_s=step_time,
        data_wait_s=0.01 * step_time, mem_device_bytes=30.5e9 + rank * 1e6,
        mem_device_peak_bytes=31.2e9, mem_host_rss_bytes=8.1e9 + n * 1e4)
    if n % 10 == 0:
        fields["update_ratio"] = 1e-3
    return make("step", rank, run=run, step=n, t=t, **fields)


def write_run(run_dir: Path, run: str = "run-a", ranks: Iterable[int] = (0, 1), steps: int = 30,
              world_size: Optional[int] = None, nan_at: Optional[int] = None,
              slow_rank: Optional[int] = None, slow: float = 2.0, expect: bool = True,
              t0: Optional[float] = None, heartbeat: bool = True) -> List[Path]:
    """Write run_start + ``steps`` step events (+ a heartbeat) for each rank; return the files."""
    ranks = list(ranks)
    world_size = world_size or len(ranks)
    t0 = time.time() - steps * STEP_TIME if t0 is None else t0
    paths = []
    for rank in ranks:
        path = rank_file(run_dir, rank)
        lines = [encode(run_start(run, rank, world_size, t0, expect))]
        t = t0
        for n in range(1, steps + 1):
            t += STEP_TIME
            loss = math.nan if nan_at is not None and n >= nan_at else None
            lines.append(encode(step(run, rank, n, t, slow if rank == slow_rank else 1.0,
                                     loss=loss, overflow=(n % 17 == 0))))
        if heartbeat:
            lines.append(encode(make("heartbeat", rank, run=run, t=t, step=steps, dropped=0)))
        with path.open("ab") as f:
            f.write(b"".join(lines))
        paths.append(path)
    return paths


def append_steps(run_dir: Path, run: str, rank: int, first: int, count: int,
                 slow: float = 1.0, t: Optional[float] = None) -> None:
    """Append ``count`` more step events to a rank's file (a run in progress)."""
    t = time.time() if t is None else t
    lines = [encode(step(run, rank, n, t + i * 0.01, slow)) for i, n in
             enumerate(range(first, first + count))]
    with rank_file(run_dir, rank).open("ab") as f:
        f.write(b"".join(lines))


def write_diverged_run(run_dir: Path, steps: int = 300, nan_at: int = 100,
                       recover_at: Tuple[Optional[int], ...] = (None, 220),
                       ended: bool = False) -> None:
    """A bf16 run that diverges: per rank, loss and gradient norm NaN from ``nan_at`` until
    ``recover_at[rank]`` (None: never), the sampled update ratio 0 from ``nan_at`` on (the
    optimizer skips the non-finite steps); a failed run_end when ``ended`` (its alerts then
    end with the run), else still running."""
    t0 = time.time() - steps * 0.5
    for rank in range(len(recover_at)):
        lines = [encode(make("run_start", rank, run="diverged", world_size=len(recover_at), t=t0,
                             config={"precision": "bf16"}))]
        for n in range(1, steps + 1):
            recover = recover_at[rank]
            bad = n >= nan_at and (recover is None or n < recover)
            fields = dict(loss=math.nan if bad else 2.0 + 8.0 / math.sqrt(n),
                          grad_norm=math.nan if bad else 1.0, loss_scale=1.0, overflow=bad,
                          lr=3e-4, tokens=8192.0, step_time_s=0.5, data_wait_s=0.005)
            if n % 10 == 0:
                fields["update_ratio"] = 0.0 if n >= nan_at else 1e-3
            lines.append(encode(make("step", rank, run="diverged", step=n, t=t0 + 0.5 * n,
                                     **fields)))
        if ended:
            lines.append(encode(make("run_end", rank, run="diverged", status="failed",
                                     step=steps, t=t0 + 0.5 * steps)))
        path = run_dir / "events" / f"rank-{rank}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))


def append_layers(run_dir: Path, run: str, rank: int, steps: int,
                  names: Sequence[str] = ("embedding", "layers.0", "layers.1", "lm_head"),
                  t0: Optional[float] = None) -> None:
    """Append a ``layers`` event per step (gradient norms; block 1's x1000 at the last step)."""
    t0 = time.time() if t0 is None else t0
    lines = []
    for n in range(1, steps + 1):
        grads = [1.0 + 0.01 * ((n + i) % 5) for i in range(len(names))]
        if n == steps and len(names) > 2:
            grads[2] *= 1000.0
        lines.append(encode(make("layers", rank, run=run, step=n, t=t0 + n * STEP_TIME,
                                 names=list(names), grad_norm=grads)))
    with rank_file(run_dir, rank).open("ab") as f:
        f.write(b"".join(lines))
