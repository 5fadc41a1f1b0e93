"""Parsers of candidate set 22's held-out logs (see ``convert.py``)."""
from __future__ import annotations

import re
from typing import Dict, List

from log_parsing import Row, num, parser

#: Metric tables of a Megatron-LM golden-values file -> corpus columns (other metrics are not carried).
GOLDEN_COLUMNS = {"lm loss": "loss", "iteration-time": "step_time_s"}


@parser("megatron_golden_values_json")
def megatron_golden_values_json(text: str) -> List[Row]:
    """Megatron-LM functional-test golden values (``golden_values_*.json``, per-step metrics of a real run
    exported from its TensorBoard), one table per metric: ``"lm loss": {"start_step": .., "end_step": ..,
    "step_interval": .., "values": {"1": 12.95636, "5": 12.91492, ...}}``. Read line by line with regexes,
    so an excerpt need not be whole JSON: a line ``"<metric>": {`` opens a metric (``"values": {`` does not),
    a line ``"<step>": <value>`` inside it is one value. step = the key, loss = ``lm loss``, step_time_s =
    ``iteration-time`` (seconds); values as printed (a quoted ``"nan"`` spelled nan); num-zeros and the
    memory tables are not carried. One row per step, in the order of first appearance."""
    rows: Dict[str, Row] = {}
    metric = None
    for line in text.splitlines():
        head = re.match(r'\s*"([^"]+)": \{\s*$', line)
        if head:
            if head.group(1) != "values":
                metric = head.group(1)
            continue
        entry = re.match(r'\s*"(\d+)": "?([^",\s]+)"?,?\s*$', line)
        if entry and metric in GOLDEN_COLUMNS:
            row = rows.setdefault(entry.group(1), {"step": entry.group(1)})
            row[GOLDEN_COLUMNS[metric]] = num(entry.group(2))
    return list(rows.values())
