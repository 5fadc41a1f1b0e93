"""``<run_dir>/alerts.jsonl``: the durable history of alert transitions, one JSON object a line."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

from msdoctor.alerts.model import Alert

ALERTS_FILE = "alerts.jsonl"


class AlertJournal:
    """Appends each transition as one complete line (written with a single ``write``)."""

    def __init__(self, run_dir: os.PathLike | str, filename: str = ALERTS_FILE) -> None:
        self.path = Path(run_dir) / filename
        self.written = 0

    def __call__(self, alert: Alert) -> None:
        self.append(alert)

    def append(self, alert: Alert) -> None:
        line = json.dumps(alert.to_dict(), ensure_ascii=False, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
        self.written += 1


def read_alerts(run_dir: os.PathLike | str, filename: str = ALERTS_FILE) -> List[Dict[str, Any]]:
    """The transitions recorded in ``run_dir`` (complete lines only)."""
    path = Path(run_dir) / filename
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n") and line.strip():
            out.append(json.loads(line))
    return out
