"""An evaluation holds the outputs still needed, not all of them."""
from __future__ import annotations

import math
from typing import Dict

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.core.engine.context import RankContext, RunContext
from msdoctor.core.engine.expr import parse
from msdoctor.core.engine.nodes import Frame
from msdoctor.core.engine.program import Program

ROOTS = ["mean(loss, 5) > 2 and std(loss, 5) < 9", "max(loss, 3) - prev(loss, 1)"]


def evaluate(take_lasts: bool):
    program = Program([])
    roots = [program.add(parse(text)) for text in ROOTS]
    ctx = RankContext(RunContext("r"), 0, program.new_states(), [math.nan] * len(program.nodes))
    steps = np.arange(1, 41)
    loss = np.sin(steps) + 3.0
    batch = StepBatch("r", 0, steps, steps.astype(np.float64), {"loss": loss}, {})
    frame = Frame(steps, steps.astype(np.float64), batch.t, batch, ctx)
    lasts: Dict[int, np.ndarray] = {}
    failed: Dict[int, str] = {}
    outs = program.evaluate(frame, ctx.states, failed, lasts if take_lasts else None)
    return program, roots, outs, lasts


def test_with_last_values_taken_only_the_roots_outputs_are_kept_and_the_values_are_the_same():
    program, roots, full, _ = evaluate(take_lasts=False)
    _, _, lean, lasts = evaluate(take_lasts=True)
    assert all(o is not None for o in full)
    kept = {i for i, o in enumerate(lean) if o is not None}
    assert set(roots) <= kept and [n.key for n in program.nodes].index("mean(loss,5)") not in kept
    assert len(kept) < len(full) // 2
    for i in roots:
        np.testing.assert_array_equal(lean[i][0], full[i][0])
    assert sorted(lasts) == list(range(len(full)))
    for i, out in enumerate(full):
        np.testing.assert_array_equal(lasts[i], out[0][-1:])
