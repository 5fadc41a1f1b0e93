"""Parsers of candidate set 16's held-out logs (see ``convert.py``)."""
from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from typing import List

from log_parsers import pipe_row
from log_parsing import Row, num, parser, seconds

NANOCHAT_FIELDS = {"loss": "loss", "grad norm": "grad_norm", "tok/sec": "tokens_per_s"}


@parser("nanochat_base_train")
def nanochat_base_train(text: str) -> List[Row]:
    """nanochat ``base_train`` / ``chat_sft`` console lines ``step N[/M] (p%) | loss: X [| grad norm: G]
    | lrm: R | dt: Tms | tok/sec: K | ...`` found anywhere in a line (a terminal may have left text such as
    ``^[[A`` before ``step``); step = the zero-padded counter as an integer, step_time_s = dt (ms -> s),
    tokens_per_s = tok/sec as printed without thousands separators. ``lrm`` (a learning-rate multiplier,
    not a learning rate), ``mfu``/``bf16_mfu``, ``epoch`` and ``total time`` are not carried;
    ``Step N | Validation bpb`` lines are skipped."""
    rows: List[Row] = []
    for line in text.splitlines():
        head = re.search(r"step (\d+)(?:/\d+)? \([\d.]+%\) \|", line)
        if not head:
            continue
        rows.append(pipe_row(str(int(head.group(1))), line[head.end():], NANOCHAT_FIELDS))
    return rows


@parser("throughput_diag_steps_csv")
def throughput_diag_steps_csv(text: str) -> List[Row]:
    """A per-step diagnostics CSV with the header ``step,wallclock_s,step_time_ms,fwd_us,bwd_us,opt_us,
    dataloader_us,...`` (parameter-golf ``diag_steps.csv``): step as printed, step_time_s = step_time_ms
    (ms -> s, exact decimal shift), data_wait_s = dataloader_us (microseconds -> seconds, an exact decimal
    shift by six places). The first row's step_time_ms is printed as 0.000 (no previous step to time
    against) and is not carried. wallclock_s, the -1.0 fwd/bwd/opt placeholders and the memory-allocator
    columns are not carried."""
    rows: List[Row] = []
    for record in csv.DictReader(io.StringIO(text)):
        row: Row = {"step": record["step"].strip()}
        step_ms = record["step_time_ms"].strip()
        if Decimal(num(step_ms)) != 0:
            row["step_time_s"] = seconds(step_ms)
        wait = Decimal(num(record["dataloader_us"])) / Decimal(1000000)
        row["data_wait_s"] = format(wait.normalize(), "f")
        rows.append(row)
    return rows
