"""Parsers of candidate set 9's MindSpore logs: course-notebook outputs (U-Net epoch summaries, a tqdm
epoch bar, CycleGAN epoch summaries) and a VGG16 ``Epoch: [E/N], Steps: [S/M], Train Loss: [X]`` file
(see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, num, parser, rows_of, seconds


@parser("unet_epoch_train_loss")
def unet_epoch_train_loss(text: str) -> List[Row]:
    """An ``Epoch [E / N]`` line followed by ``Train loss:X 丨acc: ...`` (one summary per epoch);
    step = E, loss = the train loss (``Val loss`` lines not carried)."""
    return rows_of(r"^Epoch \[(\d+) / \d+\]\nTrain loss:([^\s丨]+)", text,
                   step=group(1), loss=group(2), epoch=group(1))


@parser("tqdm_epoch_postfix_loss")
def tqdm_epoch_postfix_loss(text: str) -> List[Row]:
    """Final tqdm bars ``Epoch: E: 100%|...| N/N [elapsed<left, R it/s, loss=X]`` (E from 0, the loss
    postfix a running mean over the epoch); step = (E + 1) * N, the epoch's last step, computed. The
    evaluation bars (no ``Epoch:`` prefix) are not carried."""
    return rows_of(r"^Epoch: (\d+): +\d+%\|[^|]*\| (\d+)/\d+ \[[^\]]*, loss=([^\]\s]+)\]", text,
                   step=lambda m: str((int(m.group(1)) + 1) * int(m.group(2))),
                   loss=group(3), epoch=group(1))


@parser("cyclegan_epoch_total_cost")
def cyclegan_epoch_total_cost(text: str) -> List[Row]:
    """MindSpore CycleGAN epoch summaries ``Epoch [E] total cost: T ms, per step: P ms, G_loss: G,
    D_loss: D``; step = E, loss = G (the epoch's mean generator loss), step_time_s = P. The in-epoch
    ``Epoch[E] [S/N] step cost: ...`` lines are not carried."""
    return rows_of(r"^Epoch \[(\d+)\] total cost: [\d.]+ ms, per step: ([\d.]+) ms, G_loss: ([^,\s]+), "
                   r"D_loss: (\S+)$", text,
                   step=group(1), loss=group(3), step_time_s=group(2, seconds), epoch=group(1))


@parser("epoch_steps_train_loss_bracket")
def epoch_steps_train_loss_bracket(text: str) -> List[Row]:
    """``Epoch: [E/N], Steps: [S/M], Train Loss: [X]`` (S counts within the epoch from 1, M steps per
    epoch); step = (E - 1) * M + S, computed."""
    return rows_of(r"^Epoch: \[\s*(\d+)/\s*\d+\], Steps: \[\s*(\d+)/(\d+)\], Train Loss: \[([^\]\s]+)\]",
                   text,
                   step=lambda m: str((int(m.group(1)) - 1) * int(m.group(3)) + int(m.group(2))),
                   loss=lambda m: num(m.group(4)), epoch=group(1))
