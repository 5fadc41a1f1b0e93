"""Parsers of the corpus' logs added with candidate set 19 (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import List

from log_parsing import Row, num, parser

LLAMAFACTORY_COLUMNS = {"loss": "loss", "lr": "lr", "epoch": "epoch"}


@parser("llamafactory_trainer_log_jsonl")
def llamafactory_trainer_log_jsonl(text: str) -> List[Row]:
    """LLaMA-Factory ``trainer_log.jsonl`` lines ``{"current_steps": N, "total_steps": M, "loss": X, "lr": L,
    "epoch": E, "percentage": .., "elapsed_time": .., "remaining_time": ..}``; step = N; values as printed.
    Lines without a ``"loss"`` (the closing progress line) are skipped; ``elapsed_time`` is cumulative wall
    time, not a step time, and is not carried."""
    rows: List[Row] = []
    for line in text.splitlines():
        head = re.match(r'\{"current_steps": (\d+),', line)
        if not head or '"loss": ' not in line:
            continue
        values = dict(re.findall(r'"(\w+)": ([^,"}\s]+)', line))
        row: Row = {"step": head.group(1)}
        row.update({column: num(values[key]) for column, key in LLAMAFACTORY_COLUMNS.items() if key in values})
        rows.append(row)
    return rows
