"""Parsers of candidate set 23's held-out logs (see ``convert.py``)."""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Dict, List

from log_parsing import Row, add_present, group, headed_rows, num, parser, rows_of

PIPED_COLUMNS = {"grad_norm": "grad_norm", "lr": "learning_rate", "epoch": "epoch"}


@parser("hf_trainer_state_piped")
def hf_trainer_state_piped(text: str) -> List[Row]:
    """An HF ``trainer_state.json`` as a Hugging Face file page renders it: one ``"key": value,`` per line,
    each followed by `` |`` or `` | |`` (and ``|`` lines between), possibly cut before its end, so not
    parsed as JSON. Each ``{`` line starts an entry, each ``}`` line ends one; an entry that carries
    ``step`` and a training ``loss`` is a row (step, loss, and grad_norm / lr = learning_rate / epoch
    where present), values as printed (``NaN`` spelled ``nan``); eval entries and the header are skipped."""
    rows: List[Row] = []
    entry: Dict[str, str] = {}
    for line in text.splitlines():
        if re.match(r"\s*\{", line):
            entry = {}
            continue
        if re.match(r"\s*\}", line):
            if "step" in entry and "loss" in entry:
                rows.append(add_present({"step": entry["step"], "loss": num(entry["loss"])}, PIPED_COLUMNS, entry))
            entry = {}
            continue
        m = re.match(r'\s*"(\w+)":\s*([^,\s|]+),?\s*\|', line)
        if m:
            entry[m.group(1)] = m.group(2)
    return rows


@parser("md_table_step_loss")
def md_table_step_loss(text: str) -> List[Row]:
    """Markdown table rows ``| STEP | LOSS |`` (the Trainer's ``Step | Training Loss`` table pasted into a
    model card, as a commit page shows it with line numbers and ``+`` marks on lines of their own);
    step = STEP, loss = LOSS as printed; the header and ``|---|`` rule are skipped."""
    return rows_of(r"^\| (\d+) \| ([-+\w.]+) \|$", text, step=group(1), loss=group(2))


@parser("keras_epoch_header_loss")
def keras_epoch_header_loss(text: str) -> List[Row]:
    """Keras 2 ``fit`` output: an ``Epoch E/N`` line, then the epoch's progress line ``S/S [====] - Ts -
    loss: X - acc: A``; step = E (the epoch as printed), loss = X. Accuracy is not carried."""
    return headed_rows(text, r"Epoch (\d+)/\d+\s*$", r"\s*\d+/\d+ \[[=>.]*\] - .*?\bloss: (\S+)",
                       lambda head, m: {"step": head.group(1), "loss": num(m.group(1)),
                                        "epoch": head.group(1)}, once=True)


@parser("epoch_loss_time_delta")
def epoch_loss_time_delta(text: str) -> List[Row]:
    """A toy loop printing every 10th epoch ``epoch: E, loss: X, time previous: .. time now: .. time
    delta: 0:00:SS.ffffff`` (a ``datetime.timedelta``): step = E, loss = X, step_time_s = the delta, the
    wall time since the previous print, with hours 0 and minutes 00 only, so its seconds field as printed
    (leading zero dropped); nothing is summed."""
    return rows_of(r"^epoch:\s+(\d+),\s+loss: (\S+),\s+time previous: \S+ time now: \S+\s+"
                   r"time delta: 0:00:(\d\d\.\d+)\s*$", text,
                   step=group(1), loss=group(2),
                   step_time_s=group(3, lambda s: format(Decimal(s), "f")))
