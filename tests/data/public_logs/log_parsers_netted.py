"""Parsers of held-out candidate set 41's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, group, num, parser, rows_of


@parser("gcn_epoch_train_loss_eq")
def gcn_epoch_train_loss_eq(text: str) -> List[Row]:
    """Kipf-style GCN/GAT loop ``Epoch: NNNN train_loss= X train_acc= A val_loss= V val_acc= B``
    (a pasted line may start with a ``> `` quote mark): step = the epoch N as printed (from 0),
    loss = X (the train loss); accuracies and the validation loss are not carried."""
    return rows_of(r"^(?:> )?Epoch: (\d+) train_loss= (\S+) train_acc= \S+ val_loss=", text,
                   step=group(1, str), loss=group(2), epoch=group(1, str))


@parser("paddle_pass_trainbatch_loss_acc_time")
def paddle_pass_trainbatch_loss_acc_time(text: str) -> List[Row]:
    """PaddlePaddle Fluid image-classification example ``Pass P, trainbatch B, loss X, acc1 A,
    acc5 A5 time T sec``: step = B as printed (the in-pass batch counter), loss = X,
    step_time_s = T (the batch's printed time), epoch = P."""
    return rows_of(r"^Pass (\d+), trainbatch (\d+), loss ([^,\s]+),\s+acc1 \S+, acc5 \S+ "
                   r"time ([\d.]+) sec", text,
                   step=group(2, str), loss=group(3), step_time_s=group(4, str), epoch=group(1, str))


@parser("paddle_v2_pass_batch_cost_global")
def paddle_v2_pass_batch_cost_global(text: str) -> List[Row]:
    """PaddlePaddle v2 event handler ``Pass P, Batch B, Cost X`` printed at every batch: loss = X,
    epoch = P; the step is computed as the global batch index P * N + B, where N (batches per
    pass) is one more than the largest B in the excerpt."""
    found = re.findall(r"^Pass (\d+), Batch (\d+), Cost (\S+)$", text, re.M)
    per_pass = 1 + max((int(b) for _, b, _ in found), default=0)
    return [{"step": str(int(p) * per_pass + int(b)), "loss": num(x), "epoch": p}
            for p, b, x in found]


@parser("bracket_round_loss_train_auc")
def bracket_round_loss_train_auc(text: str) -> List[Row]:
    """product-nets training loop ``[N]  loss:X  train-auc: A  eval-auc: E``: step = N as
    printed (from 0), loss = X; the AUCs are not carried."""
    return rows_of(r"^\[(\d+)\]\s+loss:(\S+)\s+train-auc:", text, step=group(1, str), loss=group(2))


@parser("epoch_eit_lr_le_time_data")
def epoch_eit_lr_le_time_data(text: str) -> List[Row]:
    """VSE/SCAN-style logger ``Epoch: [E][I/N]<TAB>Eit S  lr L  Le X<TAB>Time T (avg)<TAB>Data D
    (avg)``: step = S (the global iteration), loss = X (the printed ``Le`` loss), lr = L,
    step_time_s = T and data_wait_s = D (the current batch's values, not the averages), epoch = E."""
    return rows_of(r"Epoch: \[(\d+)\]\[\d+/\d+\]\tEit (\d+)  lr (\S+)  Le (\S+)\tTime ([\d.]+) "
                   r"\([\d.]+\)\tData ([\d.]+) \(", text,
                   step=group(2, str), loss=group(4), lr=group(3), step_time_s=group(5, str),
                   data_wait_s=group(6, str), epoch=group(1, str))
