"""Parsers of held-out candidate set 33's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, group, num, parser, rows_of


@parser("epoch_comma_loss_valloss")
def epoch_comma_loss_valloss(text: str) -> List[Row]:
    """``Epoch E, Loss: X, ValLoss: V`` (AUTOMAP, one line per epoch): step = epoch = E as printed, loss = X
    (the validation loss is not carried)."""
    return rows_of(r"^Epoch (\d+), Loss: ([^,\s]+), ValLoss: \S+$", text,
                   step=group(1), loss=group(2), epoch=group(1))


@parser("char_rnn_batch_train_loss")
def char_rnn_batch_train_loss(text: str) -> List[Row]:
    """char-rnn-tensorflow ``N/M (epoch E), train_loss = X, time/batch = T``: step = N (the batch counter as
    printed), loss = X, step_time_s = T (seconds per batch), epoch = E."""
    return rows_of(r"^(\d+)/\d+ \(epoch (\d+)\), train_loss = ([^,\s]+), time/batch = (\S+)$", text,
                   step=group(1), loss=group(3), step_time_s=group(4), epoch=group(2))


@parser("iters_epoch_loss_speed_in_epoch")
def iters_epoch_loss_speed_in_epoch(text: str) -> List[Row]:
    """Time-Series-Library ``iters: I, epoch: E | loss: X`` lines, each followed by ``speed: Ts/iter; left
    time: ..``, for an excerpt inside one epoch (no ``Steps: N`` summary to make a global step): step = I (the
    in-epoch iteration as printed), loss = X, step_time_s = T (the mean seconds per iteration since the
    previous report), epoch = E."""
    rows: List[Row] = []
    for m in re.finditer(r"iters: (\d+), epoch: (\d+) \| loss: (\S+)|speed: ([\d.]+)s/iter", text):
        if m.group(1):
            rows.append({"step": m.group(1), "loss": num(m.group(3)), "epoch": m.group(2)})
        elif rows and "step_time_s" not in rows[-1]:
            rows[-1]["step_time_s"] = m.group(4)
    return rows


@parser("absl_epoch_best_test_train_loss")
def absl_epoch_best_test_train_loss(text: str) -> List[Row]:
    """distance-encoding (absl logging) ``I.... train.py:23] epoch E best test acc: .., train loss: X; train acc:
    ..``: one record per epoch, step = epoch = E as printed, loss = X (accuracies not carried)."""
    return rows_of(r"\] epoch (\d+) best test acc: \S+, train loss: ([^;\s]+);", text,
                   step=group(1), loss=group(2), epoch=group(1))


@parser("char_rnn_classification_iter_loss")
def char_rnn_classification_iter_loss(text: str) -> List[Row]:
    """PyTorch char-RNN classification tutorial ``N P% (Am Bs) X name / guess ✓|✗ (correct)``: step = N (the
    iteration as printed), loss = X (the mean loss of the last print interval; ``nan`` kept)."""
    return rows_of(r"^(\d+) \d+% \(\d+m \d+s\) (\S+) ", text, step=group(1), loss=group(2))
