"""Parsers of held-out candidate set 28's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, num, parser, seconds


@parser("mindspore_epoch_time_avg_loss")
def mindspore_epoch_time_avg_loss(text: str) -> List[Row]:
    """MindSpore TimeMonitor-style epoch summaries ``Epoch time: T ms, per step time: P ms, avg loss: X``
    (one line per epoch; other lines such as ``Epoch:[E/N], step:[..], loss:[..]`` skipped); step = the running
    count of these lines (the epoch: the log prints no number), step_time_s = P (ms -> s), loss = X (the epoch's
    average)."""
    rows: List[Row] = []
    for m in re.finditer(r"^Epoch time: [\d.]+ ms, per step time: ([\d.]+) ms, avg loss: (\S+)$", text, re.M):
        count = str(len(rows) + 1)
        rows.append({"step": count, "loss": num(m.group(2)), "step_time_s": seconds(m.group(1))})
    return rows


@parser("epoch_cnt_loss_eq_time_eq")
def epoch_cnt_loss_eq_time_eq(text: str) -> List[Row]:
    """Learning-to-See-in-the-Dark ``E C Loss=X Time=T`` (C counts images within the epoch, X a running mean,
    T the iteration's seconds); step = the running count of these lines, step_time_s = T."""
    rows: List[Row] = []
    for m in re.finditer(r"^(\d+) \d+ Loss=(\S+) Time=([\d.]+)$", text, re.M):
        rows.append({"step": str(len(rows) + 1), "loss": num(m.group(2)), "step_time_s": m.group(3),
                     "epoch": m.group(1)})
    return rows


@parser("torch_tensor_loss_print")
def torch_tensor_loss_print(text: str) -> List[Row]:
    """A training loop printing ``tensor(X, device='cuda:0')`` once per step; step = the running count."""
    rows: List[Row] = []
    for m in re.finditer(r"^tensor\(([^,()]+), device='[^']*'\)$", text, re.M):
        rows.append({"step": str(len(rows) + 1), "loss": num(m.group(1))})
    return rows
