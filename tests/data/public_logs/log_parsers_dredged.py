"""Parsers of held-out candidate set 29's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("ep_batch_time_ntokens_loss")
def ep_batch_time_ntokens_loss(text: str) -> List[Row]:
    """Barber0/LLM-pretrain (DeepSpeed) ``ep: E, batch: B, time: T, ntokens: A/L, loss: X``; step = B (the batch
    counter as printed), loss = X (the mean over the logging period), epoch = E. T is the wall time of the whole
    logging period (several batches, not one step) and A/L the mean unpadded tokens per sample: neither carried."""
    return rows_of(r"^ep: (\d+), batch: (\d+), time: [\d.]+, ntokens: [\d.]+/\d+, loss: (\S+)$", text,
                   step=group(2), loss=group(3), epoch=group(1))


@parser("mmengine_iter_train")
def mmengine_iter_train(text: str) -> List[Row]:
    """MMEngine iteration-based runner (XTuner) ``Iter(train) [ N/M]  lr: L  eta: ..  time: T  data_time: D
    memory: ..  loss: X  grad_norm: G``; step = N, step_time_s = T, data_wait_s = D (seconds, as printed)."""
    return rows_of(r"Iter\(train\) \[\s*(\d+)/\d+\]\s+lr: (\S+)\s+eta: .+?\s+time: (\S+)\s+data_time: (\S+)\s+"
                   r"memory: \d+\s+loss: (\S+)\s+grad_norm: (\S+)", text,
                   step=group(1), loss=group(5), grad_norm=group(6), lr=group(2), step_time_s=group(3),
                   data_wait_s=group(4))
