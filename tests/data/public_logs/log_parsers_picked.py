"""Parsers of candidate set 20's held-out logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("opennmt_step_acc_ppl_xent")
def opennmt_step_acc_ppl_xent(text: str) -> List[Row]:
    """OpenNMT-py console ``[<stamp> INFO] Step N/M; acc: A; ppl: P; xent: X; lr: L; S/T tok/s; E sec``;
    step = N, loss = xent (the printed cross-entropy), lr = L, values as printed. acc, ppl, the source/target
    token rates and the cumulative seconds are not carried; other lines (``Loading train dataset``) are
    skipped."""
    return rows_of(r"\] Step (\d+)/\d+; acc:\s*\S+; ppl:\s*\S+; xent:\s*([^;\s]+); lr:\s*([^;\s]+);", text,
                   step=group(1), loss=group(2), lr=group(3))


@parser("fairseq_py_2017_progress")
def fairseq_py_2017_progress(text: str) -> List[Row]:
    """Early fairseq-py (2017) progress lines ``| epoch 001  I / N loss=X (A), wps=.., wpb=.., bsz=.., lr=L,
    clip=C%, gnorm=G``: step = I (the batch counter within the epoch, as printed), loss = X (the latest
    batch's loss; A, the running mean, is not carried), lr = L, grad_norm = G (fairseq's running mean of
    the grad norm since the epoch start), epoch = the epoch number as printed. Header lines are skipped."""
    return rows_of(r"^\| epoch (\d+)\s+(\d+) / \d+ loss=([^\s,]+) \([^)]*\),.* lr=([^,\s]+), clip=[^,]*, "
                   r"gnorm=([^,\s]+)", text,
                   step=group(2), loss=group(3), grad_norm=group(5), lr=group(4), epoch=group(1))


@parser("epoch_global_step_loss_dash")
def epoch_global_step_loss_dash(text: str) -> List[Row]:
    """PaddleNLP example loops ``epoch: E - global_step: N/M - loss:X``; step = N, values as printed."""
    return rows_of(r"^epoch: (\d+) - global_step: (\d+)/\d+ - loss:\s*(\S+)", text,
                   step=group(2), loss=group(3), epoch=group(1))
