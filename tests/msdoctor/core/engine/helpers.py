"""Test helpers: one expression through the real operators, batch by batch; polls of many
ranks' step batches."""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.nodes import Frame
from msdoctor.core.engine.program import Program


def run_expr(text: str, steps: Sequence[int], series: Dict[str, Sequence[Optional[float]]],
             sizes: Sequence[int], t: Optional[Sequence[float]] = None) -> np.ndarray:
    """Values of ``text`` at every row, the rows fed in batches of ``sizes`` (cycled)."""
    program = Program([])
    root = program.add(parse(text))
    ctx = RankContext(RunContext("r"), 0, program.new_states(), [math.nan] * len(program.nodes))
    ctx.run.ranks[0] = ctx
    steps = np.asarray(steps, dtype=np.int64)
    tt = np.asarray(t if t is not None else steps, dtype=np.float64)
    out: List[np.ndarray] = []
    start, k = 0, 0
    while start < steps.shape[0]:
        stop = min(start + sizes[k % len(sizes)], steps.shape[0])
        k += 1
        columns, masks = {}, {}
        for name, values in series.items():
            chunk = list(values[start:stop])
            mask = np.array([v is not None for v in chunk])
            if not mask.any():
                continue
            columns[name] = np.array([np.nan if v is None else v for v in chunk], dtype=np.float64)
            if not mask.all():
                masks[name] = mask
        batch = StepBatch("r", 0, steps[start:stop], tt[start:stop], columns, masks)
        frame = Frame(batch.steps, batch.steps.astype(np.float64), batch.t, batch, ctx)
        failed: Dict[int, str] = {}
        outs = program.evaluate(frame, ctx.states, failed)
        assert not failed, failed
        out.append(outs[root][0].copy())
        start = stop
    return np.concatenate(out)


Binned = List[Tuple[float, float, int]]


def binned_reference(steps, values, w: float, fit: Callable[[Binned, int], float]) -> np.ndarray:
    """Per row, a log-step-binned statistic written plainly: ``fit(before, newest)`` of the
    positive points of the closed bins (width ``w`` in log-step) before the row's own, as
    (log step, log x, bin), ``newest`` the latest of those bins; NaN without any. A row
    without a positive value holds the last row's."""
    out, last = [], math.nan
    pts = [(int(s), float(v)) for s, v in zip(steps, values)
           if v is not None and math.isfinite(v) and v > 0]
    for i, s in enumerate(steps):
        v = values[i]
        if v is not None and math.isfinite(v) and v > 0:
            b = math.floor(math.log(s) / w)
            before = [(math.log(p), math.log(x), math.floor(math.log(p) / w)) for p, x in pts
                      if p < s and math.floor(math.log(p) / w) < b]
            last = fit(before, max(k for _, _, k in before)) if before else math.nan
        out.append(last)
    return np.asarray(out)


def rank_polls(rng: np.random.Generator, ranks: int, polls: int, first: Callable[[int], int],
               sizes: Callable[[int], List[int]], bad: float) -> List[List[Tuple]]:
    """Polls of run "run": the first has ``first(rank)`` rows of each rank (and its run_start),
    each later one a number of rows per rank drawn from ``sizes(poll)`` (0: the rank is left
    out). The loss falls as 3 / (1 + step / 100) with noise; a share ``bad`` of its rows is NaN
    on odd ranks and 50 on even ones."""
    pos = [1] * ranks
    out = []
    for p in range(polls):
        items = []
        for r in range(ranks):
            n = first(r) if p == 0 else int(rng.choice(sizes(p)))
            if not n:
                continue
            steps = np.arange(pos[r], pos[r] + n, dtype=np.int64)
            pos[r] += n
            loss = 3.0 / (1 + 0.01 * steps) + 0.01 * rng.random(n)
            loss[rng.random(n) < bad] = np.nan if r % 2 else 50.0
            cols = {"loss": loss, "grad_norm": 1.0 + 0.1 * rng.random(n), "lr": np.full(n, 1e-4),
                    "loss_scale": np.full(n, 1024.0), "overflow": np.zeros(n)}
            events = [{"type": "run_start", "rank": r, "run": "run", "t": 0.0,
                       "world_size": ranks}] if p == 0 else []
            items.append(("run", r, events, StepBatch("run", r, steps, 1.0 * steps, cols, {})))
        out.append(items)
    return out
