"""Parsers of held-out candidate set 46's logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, group, num, parser, rows_of


@parser("drqa_train_epoch_iter_loss")
def drqa_train_epoch_iter_loss(text: str) -> List[Row]:
    """DrQA ``train.py`` console ``[ train: Epoch = E | iter = I/N | loss = X | elapsed time = T (s) ]``; step = I
    (the in-epoch iteration counter as printed), loss = X (DrQA's running mean since the last log line),
    epoch = E. T is cumulative wall time since the epoch start: not carried."""
    return rows_of(r"\[ train: Epoch = (\d+) \| iter = (\d+)/\d+ \| loss = (\S+) \| elapsed time = ", text,
                   step=group(2), loss=group(3), epoch=group(1))


@parser("tf2_od_model_lib_v2_step")
def tf2_od_model_lib_v2_step(text: str) -> List[Row]:
    """TF2 Object Detection API ``model_lib_v2`` console ``Step N per-step time Ts loss=X``, printed twice per log
    point (``INFO:tensorflow:`` and the glog ``I.... model_lib_v2.py:NNN]`` form); one record per step N (its
    first occurrence), loss = X, step_time_s = T (the printed mean seconds per step)."""
    rows: List[Row] = []
    seen = set()
    for m in re.finditer(r"(?:^INFO:tensorflow:|\] )Step (\d+) per-step time ([\d.]+)s loss=(\S+)$", text, re.M):
        if m.group(1) in seen:
            continue
        seen.add(m.group(1))
        rows.append({"step": m.group(1), "loss": num(m.group(3)), "step_time_s": m.group(2)})
    return rows
