"""Parsers of candidate set 12's held-out logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("minimind_comma_fields")
def minimind_comma_fields(text: str) -> List[Row]:
    """minimind-style console ``Epoch:[E/N](S/M), loss: X, logits_loss: .., aux_loss: .., lr: Y,
    epoch_time: Tmin``; step = the in-epoch step S as printed (epoch_time, the estimated length of the
    whole epoch, is not a step time and is not carried)."""
    return rows_of(r"^Epoch:\[(\d+)/\d+\]\((\d+)/\d+\), loss: (\S+), logits_loss: \S+, aux_loss: \S+, "
                   r"lr: (\S+), epoch_time: ", text,
                   step=group(2), loss=group(3), lr=group(4), epoch=group(1))
