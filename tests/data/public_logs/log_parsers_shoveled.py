"""Parsers of held-out candidate set 49's logs (see ``convert.py``): a detectron2 ``metrics.json`` and an OpenAI
baselines DDPG ``progress.csv``."""
from __future__ import annotations

import re
from typing import List, Optional

from log_parsers_trapped import stripped_csv
from log_parsing import Row, num, parser


def _json_value(line: str, key: str) -> Optional[str]:
    """The value of ``key`` in one flat JSON object line, as printed (None if absent)."""
    m = re.search(r'"' + re.escape(key) + r'": ([^,}\s]+)', line)
    return num(m.group(1)) if m else None


@parser("detectron2_metrics_json")
def detectron2_metrics_json(text: str) -> List[Row]:
    """detectron2 ``metrics.json`` (``JSONWriter``), one flat JSON object a line: ``{"data_time": .., "iteration":
    N, "loss_box_reg": .., "lr": .., "time": .., "total_loss": X, ...}``; only lines with a ``total_loss`` (training
    records; evaluation lines have none); step = ``iteration`` as printed (counted from 0), loss = ``total_loss``,
    lr = ``lr``, step_time_s = ``time``, data_wait_s = ``data_time``; the loss terms, accuracies and ``eta_seconds``
    are not carried."""
    rows = []
    for line in text.splitlines():
        loss = _json_value(line, "total_loss")
        if loss is None:
            continue
        row = {"step": _json_value(line, "iteration"), "loss": loss}
        for column, key in (("lr", "lr"), ("step_time_s", "time"), ("data_wait_s", "data_time")):
            value = _json_value(line, key)
            if value is not None:
                row[column] = value
        rows.append(row)
    return rows


@parser("baselines_ddpg_progress_csv")
def baselines_ddpg_progress_csv(text: str) -> List[Row]:
    """OpenAI baselines DDPG ``progress.csv`` (the logger's CSV output), one line per epoch with columns in any order
    (``train/loss_critic``, ``train/loss_actor``, ``total/epochs``, ``rollout/return``, ...); step =
    ``total/epochs`` as printed, loss = ``train/loss_critic`` (the critic's TD loss; the actor loss, returns and
    statistics are not carried)."""
    return [{"step": line["total/epochs"], "loss": num(line["train/loss_critic"])}
            for line in stripped_csv(text) if line.get("train/loss_critic")]
