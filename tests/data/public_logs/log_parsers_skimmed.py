"""Parsers of held-out candidate set 44's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of, seconds


@parser("keras_epoch_inline_progress_loss")
def keras_epoch_inline_progress_loss(text: str) -> List[Row]:
    """TF2 Keras ``fit`` output as a web page renders it, the ``Epoch E/N`` header and the epoch's
    progress bar joined on one line: ``Epoch E/N S/S [====] - Ts Tms/step - loss: X - accuracy: A``
    (found anywhere in a line, so text pasted before it, such as the ``>>> model.fit(...)`` call, is
    tolerated); step = E (the epoch as printed), loss = X, step_time_s = the printed ms/step (ms -> s),
    epoch = E. Accuracy is not carried."""
    return rows_of(r"Epoch (\d+)/\d+ \d+/\d+ \[[=>.]*\] - \d+s (\d+)ms/step - loss: (\S+)", text,
                   step=group(1), loss=group(3), step_time_s=group(2, seconds), epoch=group(1))
