"""The culprit layer and first rank of an alert, from layers events, through ``msdoctor replay``.

The spools are written with the real codec and read back by the real CLI; a bad layers line is
counted and reported with its file:line while the rest of the spool is still judged.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

from msdoctor.wire import encode, make

ROOT = Path(__file__).resolve().parents[3]
NAMES = ["embedding", "layers.0", "layers.1", "layers.2", "norm_out", "lm_head"]


def write_rank(run_dir: Path, rank: int, steps: int, spike: Optional[tuple] = None,
               nan: Optional[tuple] = None, extra: tuple = (), frozen: Optional[int] = None) -> None:
    """``steps`` steps; ``spike = (step, layer index)`` x1000; ``nan = (step, block)``;
    ``frozen``: a layer index whose sampled update ratio (every 10 steps) is 0."""
    lines: List[bytes] = [encode(make("run_start", rank, run="r", world_size=2, t=1000.0,
                                      config={"model": "llama"}))]
    for s in range(1, steps + 1):
        t = 1000.0 + s
        grads = [1.0 + 0.01 * ((s * 7 + i) % 5) for i in range(len(NAMES))]
        acts: list = [None, 3.0, 4.0, 5.0, None, None]
        norm, loss = math.sqrt(sum(g * g for g in grads)), 5.0 - s * 0.01
        if spike and s == spike[0]:
            grads[spike[1]] *= 1000.0
            norm = math.sqrt(sum(g * g for g in grads))
        if nan and s == nan[0]:
            acts = [None] + [3.0 if b < nan[1] else math.nan for b in range(3)] + [None, None]
            grads, norm, loss = [math.nan] * len(NAMES), math.nan, math.nan
        sampled: dict = {}
        if frozen is not None and s % 10 == 0:
            sampled = {"update_ratio": [0.0 if i == frozen else 1e-3 for i in range(len(NAMES))]}
        lines.append(encode(make("layers", rank, run="r", step=s, t=t, names=NAMES,
                                 grad_norm=grads, act_max=acts, **sampled)))
        still = {"layers_still": 1} if sampled else {}
        lines.append(encode(make("step", rank, run="r", step=s, t=t, loss=loss, grad_norm=norm,
                                 lr=1e-4, step_time_s=1.0, **still)))
    lines[5:5] = [line.encode() for line in extra]
    path = run_dir / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines))


def replay(run_dir: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_spike_and_a_nan_are_labelled_with_their_layer_and_the_rank_that_went_first(tmp_path):
    write_rank(tmp_path, 0, 60, spike=(40, 3), nan=(51, 2))
    write_rank(tmp_path, 1, 60, nan=(50, 1))
    alerts = {(a["alert"], a["rank"]): a for a in replay(tmp_path)["alerts"]}
    spike = alerts[("GradNormSpike", 0)]
    assert (spike["step"], spike["labels"]["layer"]) == (40, "layers.2")
    assert alerts[("LossNonFinite", 0)]["labels"]["layer"] == "layers.2"
    assert alerts[("LossNonFinite", 1)]["labels"]["layer"] == "layers.1"
    assert {alerts[("LossNonFinite", r)]["labels"]["first_rank"] for r in (0, 1)} == {"1"}


def test_a_frozen_middle_block_is_the_layer_its_alert_names(tmp_path):
    write_rank(tmp_path, 0, 30, frozen=2)
    frozen = [a for a in replay(tmp_path)["alerts"] if a["alert"] == "LayerFrozen"]
    assert [(a["step"], a["labels"]["layer"]) for a in frozen][:1] == [(10, "layers.1")]


def test_a_malformed_layers_line_is_counted_with_its_file_and_line_and_the_rest_still_judged(tmp_path):
    bad = ('{"v":1,"type":"layers","rank":0,"step":2,"names":["layers.0","layers.1"],'
           '"grad_norm":[1.0]}')
    write_rank(tmp_path, 0, 60, spike=(40, 1), extra=(bad,))
    result = replay(tmp_path)
    (error,) = result["summary"]["spool_errors"]
    assert "rank-0.jsonl:6:" in error and "one entry per layer" in error
    spike = next(a for a in result["alerts"] if a["alert"] == "GradNormSpike")
    assert spike["labels"]["layer"] == "layers.0"
