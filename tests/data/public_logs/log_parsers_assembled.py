"""Parsers of candidate set 11: a build-nanoGPT style ``step NNNN, loss: X, norm: G, lr: L, time: Tms,
tokens/sec: R`` console log (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, num, parser, rows_of, seconds


@parser("step_loss_norm_lr_time_ms")
def step_loss_norm_lr_time_ms(text: str) -> List[Row]:
    """``step N, loss: X, norm: G, lr: L, time: Tms, tokens/sec: R`` lines (one per optimizer step,
    step printed zero-padded and kept as an integer); step_time_s = T (ms -> s), tokens_per_s = R.
    Other lines (``...`` gaps, the final ``tensor(...)`` print) are skipped."""
    return rows_of(r"^step (\d+), loss: (\S+), norm: (\S+), lr: (\S+), time: ([\d.]+)ms, "
                   r"tokens/sec: ([\d.]+)$", text,
                   step=lambda m: str(int(m.group(1))), loss=group(2, lambda t: num(t.rstrip(","))),
                   grad_norm=group(3, lambda t: num(t.rstrip(","))),
                   lr=group(4, lambda t: num(t.rstrip(","))), step_time_s=group(5, seconds),
                   tokens_per_s=group(6))
