"""Parsers of held-out candidate set 37's logs (see ``convert.py``)."""
from __future__ import annotations

from typing import List

from log_parsing import Row, group, parser, rows_of


@parser("mxnet_epoch_batch_speed_named_metric")
def mxnet_epoch_batch_speed_named_metric(text: str) -> List[Row]:
    """MXNet Speedometer-style ``Epoch[E] Batch[B]<TAB>Speed: S samples/sec<TAB><TAB>Name=X<TAB>time=..`` with one
    named training metric (the loss); step = B as printed (in-epoch batch counter), loss = X; the
    samples/sec speed is not carried."""
    return rows_of(r"^Epoch\[(\d+)\] Batch\[(\d+)\]\tSpeed: [\d.]+ samples/sec\t+\w+=(\S+)\ttime=", text,
                   step=group(2), loss=group(3), epoch=group(1))
