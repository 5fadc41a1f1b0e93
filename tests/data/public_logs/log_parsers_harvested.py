"""Parsers of harvested held-out logs from frameworks other than MindSpore (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("openpi_step_grad_norm_loss")
def openpi_step_grad_norm_loss(text: str) -> List[Row]:
    """openpi (JAX) training console ``Step N: grad_norm=G, loss=L, param_norm=P``; step = N as printed
    (param_norm is not a corpus column and is dropped)."""
    return rows_of(r"^Step (\d+): grad_norm=([^,\s]+), loss=([^,\s]+), param_norm=\S+$", text,
                   step=group(1), loss=group(3), grad_norm=group(2))
