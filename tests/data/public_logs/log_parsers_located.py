"""Parsers of candidate set 14's held-out logs (see ``convert.py``)."""
from __future__ import annotations

import re
from decimal import Decimal
from typing import List

from log_parsing import Row, num, parser


@parser("train_gpt_step_interval_time")
def train_gpt_step_interval_time(text: str) -> List[Row]:
    """parameter-golf / modded-nanogpt ``train_gpt.py`` lines ``step:N/M train_loss:X train_time:Tms
    step_avg:Ams`` (``val_loss`` lines skipped). train_time is the cumulative training time (validation
    excluded) and step_avg its running mean, so neither is a step time: step_time_s = (T - the previous
    train line's T) / (N - its N), ms -> s, computed (T / N for the first line); the mean step time of
    the logging interval, exact when the step gap is 1 or a power of ten, else to 28 significant digits."""
    rows: List[Row] = []
    last_step, last_ms = 0, Decimal(0)
    for m in re.finditer(r"^step:(\d+)/\d+ train_loss:(\S+) train_time:(\d+)ms", text, re.M):
        step, ms = int(m.group(1)), Decimal(m.group(3))
        row: Row = {"step": m.group(1), "loss": num(m.group(2))}
        if step > last_step:
            seconds = (ms - last_ms) / Decimal(step - last_step) / Decimal(1000)
            row["step_time_s"] = format(seconds.normalize(), "f")
        rows.append(row)
        last_step, last_ms = step, ms
    return rows
