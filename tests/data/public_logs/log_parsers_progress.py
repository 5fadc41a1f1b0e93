"""Parsers of printed progress lines: an "Epoch E" header over batch losses, per-epoch
train/val lines, darknet iterations (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, headed_rows, num, parser


@parser("epoch_header_loss_batch")
def epoch_header_loss_batch(text: str) -> List[Row]:
    """Tutorial loops (MindSpore quick start, MindChemistry): an ``Epoch E`` header line, then
    ``loss: X  [B/N]`` lines (B = batch index within the epoch, N = batches per epoch); step = (E - 1) * N
    + B, computed; ``Test:``/``train loss:`` summary lines not carried."""
    return headed_rows(text, r"Epoch (\d+)\s*$", r"loss: (\S+)\s+\[\s*(\d+)/\s*(\d+)\]\s*$",
                       lambda head, m: {"step": str((int(head.group(1)) - 1) * int(m.group(3))
                                                    + int(m.group(2))),
                                        "loss": num(m.group(1)), "epoch": str(int(head.group(1)))})


@parser("epoch_train_val_loss")
def epoch_train_val_loss(text: str) -> List[Row]:
    """Epoch summaries ``Epoch E/N - Train Loss: X, Val Loss: Y`` (one line per epoch); step = E, loss = the
    epoch's train loss (the validation loss not carried)."""
    return [{"step": m.group(1), "loss": num(m.group(2)), "epoch": m.group(1)}
            for m in re.finditer(r"^Epoch (\d+)/\d+ - Train Loss: (\S+), Val Loss: \S+$", text, re.M)]


@parser("darknet_iter")
def darknet_iter(text: str) -> List[Row]:
    """Darknet (YOLO) ``N: L, A avg loss, R rate, T seconds, I images[, H hours left]``; loss = L (this
    iteration's loss, not the running average A), lr = R, step_time_s = T (``-nan`` -> nan)."""
    return [{"step": m.group(1), "loss": num(m.group(2)), "lr": num(m.group(3)), "step_time_s": m.group(4)}
            for m in re.finditer(r"^\s*(\d+): (\S+), \S+ avg loss, (\S+) rate, ([\d.]+) seconds, \d+ images",
                                 text, re.M)]
