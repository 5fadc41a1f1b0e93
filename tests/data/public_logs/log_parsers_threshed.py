"""Parsers of held-out candidate set 36's issue-thread logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, headed_rows, num, parser, rows_of


@parser("dash_info_iter_loss_time")
def dash_info_iter_loss_time(text: str) -> List[Row]:
    """Python logging ``<date> <time>,<ms> -- INFO -- Iter N: loss X, time T`` (stanford-tensorflow-tutorials
    chatbot); step = N, loss = X, step_time_s = T (the printed time of the step), values as printed."""
    return rows_of(r"-- INFO -- Iter (\d+): loss ([^,\s]+), time ([\d.]+)\s*$", text,
                   step=group(1), loss=group(2), step_time_s=group(3))


@parser("keras_epoch_bare_header_loss")
def keras_epoch_bare_header_loss(text: str) -> List[Row]:
    """Early Keras ``fit`` output: an ``Epoch E`` line (no total), then the epoch's progress line
    ``S/S [====] - Ts - loss: X``; step = E (the epoch as printed), loss = X, step_time_s = T (the
    epoch's printed duration in whole seconds)."""
    return headed_rows(text, r"Epoch (\d+)\s*$", r"\s*\d+/\d+ \[[=>.]*\] - (\d+)s - loss: (\S+)",
                       lambda head, m: {"step": head.group(1), "loss": num(m.group(2)),
                                        "step_time_s": m.group(1), "epoch": head.group(1)}, once=True)
