"""Parsers of candidate set 8's logs: a PyTorch GPT-2 LoRA console (``Epoch E | Step S/N | Loss: ..``)
and the MindSpore MaxwellNet trainer's timestamped epoch lines (see ``convert.py``)."""
from __future__ import annotations

import re
from datetime import datetime
from typing import List, Optional

from log_parsing import Row, group, num, parser, rows_of

MAXWELLNET_STAMP = "%a, %d %b %Y %H:%M:%S"


@parser("epoch_step_pipe_ppl")
def epoch_step_pipe_ppl(text: str) -> List[Row]:
    """``Epoch E | Step S/N | Loss: X | PPL: P | LR: L | Grad: G | Time: Ts`` (E from 0, S within the
    epoch, N steps per epoch); step = E * N + S, computed; grad_norm = Grad, step_time_s = Time."""
    return rows_of(r"Epoch (\d+) \| Step\s+(\d+)/(\d+) \| Loss: (\S+) \| PPL: \S+ \| LR: (\S+) \| "
                   r"Grad: (\S+) \| Time: ([\d.]+)s", text,
                   step=lambda m: str(int(m.group(1)) * int(m.group(3)) + int(m.group(2))),
                   loss=group(4), grad_norm=group(6), lr=group(5), step_time_s=group(7),
                   epoch=group(1))


def stamp_seconds(text: str) -> datetime:
    """A MaxwellNet log time stamp (``Tue, 16 May 2023 01:43:19``, whole seconds)."""
    return datetime.strptime(text, MAXWELLNET_STAMP)


@parser("maxwellnet_train_epoch")
def maxwellnet_train_epoch(text: str) -> List[Row]:
    """MaxwellNet (MindSpore) ``<stamp> train_maxwellnet.py[line:N] INFO [Train] E epoch. Loss: X``, one
    line per epoch; step = E. The log prints no duration: step_time_s = this line's time stamp minus the
    previous ``[Train]`` line's (the ``Training start`` line's for the first), in whole seconds, computed."""
    rows: List[Row] = []
    last: Optional[datetime] = None
    for m in re.finditer(r"^(\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2}) \S+ INFO "
                         r"(?:\[Train\] (\d+) epoch\. Loss: (\S+)|Training start)$", text, re.M):
        now = stamp_seconds(m.group(1))
        if m.group(2) is not None:
            row = {"step": m.group(2), "loss": num(m.group(3)), "epoch": m.group(2)}
            if last is not None:
                row["step_time_s"] = str(int((now - last).total_seconds()))
            rows.append(row)
        last = now
    return rows
