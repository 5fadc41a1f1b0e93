"""Parsers of candidate set 24's held-out logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of, seconds


@parser("stamped_epoch_step_loss_lr")
def stamped_epoch_step_loss_lr(text: str) -> List[Row]:
    """baby-llama2-chinese ``[<stamp>][pretrain.py][INFO] Epoch:[E/N](S/M) loss:X lr:L epoch_Time:T``; step = S
    (the batch counter within the epoch, as printed), loss = X, lr = L, epoch = E; the estimated epoch time is not
    carried."""
    return rows_of(r"\]\[INFO\] Epoch:\[(\d+)/\d+\]\((\d+)/\d+\) loss:(\S+) lr:(\S+) ", text,
                   step=group(2), loss=group(3), lr=group(4), epoch=group(1))


@parser("step_space_loss")
def step_space_loss(text: str) -> List[Row]:
    """YANMTT pre-training console ``N X`` (a step and its loss, one space apart); other lines (``...``,
    ``Saving the model``, ``Loading from checkpoint``) skipped."""
    return rows_of(r"^(\d+) (\S+)$", text, step=group(1), loss=group(2))


@parser("step_pipe_loss_lr_ms")
def step_pipe_loss_lr_ms(text: str) -> List[Row]:
    """``N | loss X | lr L | Tms`` (modded-llama2); step = N, step_time_s = T (ms -> s)."""
    return rows_of(r"^(\d+) \| loss (\S+) \| lr (\S+) \| ([\d.]+)ms$", text,
                   step=group(1), loss=group(2), lr=group(3), step_time_s=group(4, seconds))


@parser("horovod_bert_train_step")
def horovod_bert_train_step(text: str) -> List[Row]:
    """aws-samples BERT pre-training (horovod) ``[1,0]<stdout>:<stamp> __main__ : INFO Train step N -- Loss: X,
    MLM: .., SOP: .., MLM_acc: .., SOP_acc: .. -- It/s: R``; step = N, loss = X (the total loss); the MLM and SOP
    parts, the accuracies and It/s are not carried."""
    return rows_of(r"Train step (\d+) -- Loss: ([^,\s]+),", text, step=group(1), loss=group(2))
