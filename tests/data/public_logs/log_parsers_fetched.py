"""Parsers of candidate set 25's held-out logs, pasted into GitHub issue threads (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("step_equals_loss_gnorm")
def step_equals_loss_gnorm(text: str) -> List[Row]:
    """A loss trajectory ``step=N    loss=X  gnorm=G`` (entrenar issue; the author's trailing ``<- BEST`` notes
    ignored); step = N, loss = X, grad_norm = G."""
    return rows_of(r"^step=(\d+)\s+loss=(\S+)\s+gnorm=(\S+)", text,
                   step=group(1), loss=group(2), grad_norm=group(3))


@parser("iter_time_per_iter_losses")
def iter_time_per_iter_losses(text: str) -> List[Row]:
    """`` iter N   time/iter: T  lr: L loss_mn: .. loss_c: .. loss_s: .. loss_mse: .. losses: X`` (NLUT);
    step = N, loss = X (the printed total), lr = L, step_time_s = T (seconds as printed); the loss parts are not
    carried."""
    return rows_of(r"^\s*iter (\d+)\s+time/iter: (\S+)\s+lr: (\S+)\s.*\blosses: (\S+)\s*$", text,
                   step=group(1), loss=group(4), lr=group(3), step_time_s=group(2))


@parser("iter_train_loss_scores_interval_time")
def iter_train_loss_scores_interval_time(text: str) -> List[Row]:
    """pythia/mmf reports ``iter: N train_loss: X  train_score: .. avg_train_score: .. val_score: .. val_loss: ..
    time(s): T s``; step = N, loss = X, step_time_s = T as printed, which is the time of the whole report interval
    (100 iterations in its log), not of one iteration; scores and val_loss are not carried."""
    return rows_of(r"^iter: (\d+) train_loss: (\S+) .*time\(s\): ([\d.]+) s", text,
                   step=group(1), loss=group(2), step_time_s=group(3))


@parser("accessory_epoch_iter_closs")
def accessory_epoch_iter_closs(text: str) -> List[Row]:
    """LLaMA2-Accessory ``[<clock>] Epoch: [E]  [i/N]  lr: L  closs: X (A)  grad_norm: G (B)  time: T  data: D
    max mem: M``; step = i (the in-epoch iteration as printed), loss = X and grad_norm = G (the first, windowed
    value; the averages in parentheses are not carried), lr = L, step_time_s = T, data_wait_s = D, epoch = E."""
    return rows_of(r"Epoch: \[(\d+)\]\s+\[\s*(\d+)/\d+\]\s+lr: (\S+)\s+closs: (\S+) \([^)]*\)\s+"
                   r"grad_norm: (\S+) \([^)]*\)\s+time: (\S+)\s+data: (\S+)", text,
                   step=group(2), loss=group(4), grad_norm=group(5), lr=group(3), step_time_s=group(6),
                   epoch=group(1), data_wait_s=group(7))
