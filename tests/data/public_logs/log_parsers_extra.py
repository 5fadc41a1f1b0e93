"""Parsers of MindSpore Flow (MindFlow) tutorial training output: per-epoch ``train loss`` lines and
``epoch: E, loss: X, time elapsed: Tms [B/N]`` batch lines (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, num, parser, seconds


@parser("mindflow_epoch_train_loss")
def mindflow_epoch_train_loss(text: str) -> List[Row]:
    """MindFlow epoch summaries ``epoch: E train loss: X epoch time: T ms`` or ``... epoch time: Ts step
    time: ...`` (one line per epoch); step = E, step_time_s = the epoch's time (ms -> s); the per-step
    time and the evaluation lines are not carried."""
    rows: List[Row] = []
    for m in re.finditer(r"^epoch: (\d+) train loss: (\S+) epoch time: ([\d.]+) ?(ms|s)\b", text, re.M):
        time_s = seconds(m.group(3)) if m.group(4) == "ms" else m.group(3)
        rows.append({"step": m.group(1), "loss": num(m.group(2)), "step_time_s": time_s,
                     "epoch": m.group(1)})
    return rows


@parser("epoch_loss_elapsed_batch")
def epoch_loss_elapsed_batch(text: str) -> List[Row]:
    """MindFlow PINNs loops ``epoch: E, loss: X, time elapsed: Tms [B/N]`` (E counts from 0, B from 1 within
    the epoch, N batches per epoch); step = E * N + B, computed; step_time_s = T (ms -> s)."""
    rows: List[Row] = []
    for m in re.finditer(r"^epoch: (\d+), loss: (\S+), time elapsed: ([\d.]+)ms \[(\d+)/(\d+)\]", text, re.M):
        rows.append({"step": str(int(m.group(1)) * int(m.group(5)) + int(m.group(4))),
                     "loss": num(m.group(2)), "step_time_s": seconds(m.group(3)), "epoch": m.group(1)})
    return rows
