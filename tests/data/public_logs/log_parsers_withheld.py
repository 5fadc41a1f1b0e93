"""Parsers of held-out candidate set 27's issue-thread logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("epoch_step_loss_s_per_batch")
def epoch_step_loss_s_per_batch(text: str) -> List[Row]:
    """yolo2-pytorch ``epoch: E, step: S, loss: X, bbox_loss: .., iou_loss: .., cls_loss: .. (T s/batch)``
    (S counts over the run); step = S, step_time_s = T as printed."""
    return rows_of(r"^epoch: (\d+), step: (\d+), loss: ([^,\s]+), .*\(([\d.]+) s/batch\)", text,
                   step=group(2), loss=group(3), step_time_s=group(4), epoch=group(1))


@parser("epoch_step_of_loss_running_mean")
def epoch_step_of_loss_running_mean(text: str) -> List[Row]:
    """``Epoch E Step S/N Loss X (M) AngleError ..`` (M = running mean, not carried); step = S."""
    return rows_of(r"Epoch (\d+) Step (\d+)/\d+ Loss (\S+) \(", text,
                   step=group(2), loss=group(3), epoch=group(1))


@parser("step_tab_loss_sec_per_step")
def step_tab_loss_sec_per_step(text: str) -> List[Row]:
    """TensorFlow DeepLab ``step N \\t loss = X, (T sec/step)``; step = N, step_time_s = T."""
    return rows_of(r"^step (\d+) \t loss = ([^,\s]+), \(([\d.]+) sec/step\)", text,
                   step=group(1), loss=group(2), step_time_s=group(3))
