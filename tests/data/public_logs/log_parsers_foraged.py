"""Parsers of held-out candidate set 39's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, headed_rows, num, parser, rows_of, seconds


@parser("keras_epoch_header_verbose2")
def keras_epoch_header_verbose2(text: str) -> List[Row]:
    """TF2 Keras ``fit(verbose=2)`` output: an ``Epoch E/N`` line, then the epoch's one-line summary
    ``S/S - Ts - loss: X - ... - lr: L - Ts/epoch - Tms/step`` (no progress bar); step = E (the epoch as
    printed), loss = X, lr = L, step_time_s = the printed ms/step (ms -> s, exact decimal shift).
    A summary line without an ``Epoch`` line before it in the excerpt is skipped; ``Epoch 000EE:
    ReduceLROnPlateau ...`` lines are not headers."""
    return headed_rows(text, r"Epoch (\d+)/\d+\s*$",
                       r"\d+/\d+ - \d+s - loss: (\S+) - .*?\blr: (\S+) - \d+s/epoch - (\d+)ms/step\s*$",
                       lambda head, m: {"step": head.group(1), "loss": num(m.group(1)), "lr": num(m.group(2)),
                                        "step_time_s": seconds(m.group(3)), "epoch": head.group(1)},
                       once=True)


@parser("imagenet_epoch_time_data_loss")
def imagenet_epoch_time_data_loss(text: str) -> List[Row]:
    """PyTorch ImageNet-example-style ``Epoch: [E][i/N]<TAB>Time T (A)<TAB>Data D (A)<TAB>Loss X (A)<TAB>Prec@1
    ..`` (the line may wrap after ``Prec@5``); step = i (the in-epoch iteration as printed), loss = X,
    step_time_s = T and data_wait_s = D (seconds, the current values; the running averages in
    parentheses are not carried), epoch = E."""
    return rows_of(r"Epoch: \[(\d+)\]\[(\d+)/\d+\]\tTime (\S+) \([^)]*\)\tData (\S+) \([^)]*\)\t"
                   r"Loss (\S+) \([^)]*\)", text,
                   step=group(2), loss=group(5), step_time_s=group(3), epoch=group(1), data_wait_s=group(4))
