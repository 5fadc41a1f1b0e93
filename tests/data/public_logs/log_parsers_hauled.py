"""Parsers of held-out candidate set 43's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsers import lightning_rows
from log_parsing import Row, group, num, parser, rows_of

#: Loss columns of Lightning ``metrics.csv`` files that ``lightning_metrics_csv`` does not know, in order of preference.
OTHER_LIGHTNING_LOSS_COLUMNS = ("train/loss", "mean_loss")


@parser("mmcv_epoch_iter_text")
def mmcv_epoch_iter_text(text: str) -> List[Row]:
    """MMCV 1.x ``TextLoggerHook`` lines (MMDetection 2.x) ``- mmdet - INFO - Epoch [E][I/N]<TAB>lr: L, eta: ..,
    time: T, data_time: D, memory: M, <loss_x: ..>, loss: X[, grad_norm: G]`` (the tab may be spaces); step =
    (E - 1) * N + I, computed; loss = the total ``loss``, step_time_s = T and data_wait_s = D (seconds per
    iteration, means over the logging interval, as printed). ``Epoch(val)`` lines and evaluation output skipped."""
    return rows_of(r"Epoch \[(\d+)\]\[(\d+)/(\d+)\]\s+lr: (\S+), eta: [^,]+, time: ([\d.]+), data_time: ([\d.]+), "
                   r"memory: \d+, .*?, loss: ([^,\s]+)(?:, grad_norm: ([^,\s]+))?", text,
                   step=lambda m: str((int(m[1]) - 1) * int(m[3]) + int(m[2])), loss=group(7),
                   grad_norm=lambda m: num(m[8]) if m[8] else None, lr=group(4), step_time_s=group(5),
                   epoch=group(1), data_wait_s=group(6))


@parser("lightning_metrics_csv_other_loss")
def lightning_metrics_csv_other_loss(text: str) -> List[Row]:
    """PyTorch Lightning CSVLogger ``metrics.csv`` whose training loss is logged under another name: the first of
    ``train/loss`` (RL4CO) and ``mean_loss`` in the header; one row per line that carries it (validation lines,
    loss cell empty, skipped); step and epoch as printed; other columns (rewards, entropy, loss terms) dropped."""
    return lightning_rows(text, OTHER_LIGHTNING_LOSS_COLUMNS)
