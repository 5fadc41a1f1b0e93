"""Parsers of candidate set 35's held-out logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("fairseq_progress_no_scale")
def fairseq_progress_no_scale(text: str) -> List[Row]:
    """Legacy fairseq progress lines of an fp32 run (no ``loss_scale`` field) ``| epoch 001:   I / N loss=X,
    nll_loss=.., ppl=.., wps=.., ups=.., wpb=.., bsz=.., num_updates=U, lr=L, gnorm=G, clip=C%, oom=O``; step = U,
    loss = X and grad_norm = G (both fairseq's running means since the epoch start), lr = L, epoch as printed."""
    return rows_of(r"^\| epoch (\d+):\s+\d+ / \d+ loss=([^,\s]+),.* num_updates=(\d+), lr=([^,\s]+), "
                   r"gnorm=([^,\s]+),", text,
                   step=group(3), loss=group(2), grad_norm=group(5), lr=group(4), epoch=group(1))
