"""Parsers of held-out candidate set 31's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, num, parser


@parser("wide_deep_epoch_step_loss")
def wide_deep_epoch_step_loss(text: str) -> List[Row]:
    """MindSpore Wide&Deep-style callback lines ``epoch: E, step: S, wide_loss: X, deep_loss: Y`` (S counts
    steps within the epoch); loss = X (in the xidian FiBiNET code the mean log loss; Y adds the L2 term and is
    not carried); step = (E - 1) * max(S) + S."""
    found = re.findall(r"^epoch: (\d+), step: (\d+), wide_loss: (\S+), deep_loss: \S+$", text, re.M)
    per_epoch = max((int(s) for _, s, _ in found), default=0)
    return [{"step": str((int(e) - 1) * per_epoch + int(s)), "loss": num(x), "epoch": e} for e, s, x in found]


@parser("libcity_epoch_average_train_loss")
def libcity_epoch_average_train_loss(text: str) -> List[Row]:
    """LibCity (M-Libcity, MindSpore) trajectory executor ``Epoch: [  E/ N], Average Train Loss: [X],
    Accuracy: [A]`` (one line per epoch); step = epoch = E, loss = X (the epoch's average)."""
    return [{"step": e, "loss": num(x), "epoch": e}
            for e, x in re.findall(r"Epoch: \[\s*(\d+)/\s*\d+\], Average Train Loss: \[([^\]\s]+)\]", text)]
