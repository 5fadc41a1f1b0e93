"""Parsers of held-out candidate set 38's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("loguru_step_comma_loss")
def loguru_step_comma_loss(text: str) -> List[Row]:
    """loguru console lines ``<date> <time>.<ms> | INFO     | mod:func:line - Step N, Loss: X``
    (a from-scratch GPT ``train`` loop, gpt-from-zero); step = N as printed (a global step counter),
    loss = X as printed. ``Epoch E completed. Average loss: ..`` lines and all other log lines are
    skipped."""
    return rows_of(r"^\S+ \S+ \| INFO +\| \S+ - Step (\d+), Loss: (\S+)$", text,
                   step=group(1), loss=group(2))
