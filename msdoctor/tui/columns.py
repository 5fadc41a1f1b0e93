"""The rank table's columns: title, width, how a cell reads and how it sorts."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from msdoctor.core import format as fmt
from msdoctor.tui.model import SEVERITY_ORDER, RankRow
from msdoctor.tui.sparkline import sparkline

SPARK_WIDTH = 8
#: Columns are hidden until the ALERTS column is this wide (room for a name like
#: ``LossNonFinite``); it is never narrower than ALERTS_FLOOR (``12C 3W`` and its padding).
ALERTS_MIN = 15
ALERTS_FLOOR = 8
#: One letter per severity in the compact ALERTS cell.
SEVERITY_LETTER = {"critical": "C", "warning": "W", "info": "I"}
HEALTH_DOT = {"bad": "●", "warn": "●", "stale": "◌", "ok": "●", "done": "✓"}


def memory(row: RankRow) -> Optional[float]:
    """Device memory in use when recorded and non-zero (CPU reads 0), else host RSS."""
    device = row.get("mem_device_bytes")
    if device:
        return device
    return row.get("mem_host_rss_bytes")


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    text: Callable[[RankRow], str]
    value: Callable[[RankRow], float]
    align: str = "right"
    help: str = ""
    drop: int = 0         # > 0: hidden on a narrow table, the highest first; 0: always shown

    def cell(self, row: RankRow, width: Optional[int] = None) -> str:
        width = self.width if width is None else width
        text = alerts_text(row, width - 1) if self.key == "alerts" else self.text(row)
        if len(text) > width - 1:
            text = text[: width - 1]
        return (" " + text.ljust(width - 1)) if self.align == "left" \
            else text.rjust(width - 1) + " "


def severity_counts(severities: Sequence[str]) -> str:
    """``2C 1W``: how many alerts of each severity, most severe first."""
    counts = Counter(severities)
    order = sorted(counts, key=lambda s: SEVERITY_ORDER.get(s, 9))
    return " ".join(f"{counts[s]}{SEVERITY_LETTER.get(s, s[:1].upper() or '?')}" for s in order)


def alerts_text(row: RankRow, width: int) -> str:
    """The ALERTS cell in ``width`` characters, never hiding the most severe alert: every
    name (most severe first) when they fit, else the first name and ``+N``, else a count
    per severity (``2C 1W``)."""
    names = row.alerts
    if not names:
        return ""
    full = ",".join(names)
    if len(full) <= width:
        return full
    first = f"{names[0]} +{len(names) - 1}"
    if len(first) <= width:
        return first
    return severity_counts(row.severities or ("warning",) * len(names))


def _sortable(value: Optional[float]) -> float:
    """NaN/Inf sort as the largest values (they are what one looks for)."""
    if value is None:
        return -math.inf
    return math.inf if not math.isfinite(value) else float(value)


def _signal(name: str) -> Callable[[RankRow], float]:
    return lambda r: _sortable(r.get(name))


COLUMNS: Tuple[Column, ...] = (
    Column("rank", "RANK", 5, lambda r: str(r.rank), lambda r: float(r.rank),
           help="rank number"),
    Column("health", "", 2, lambda r: HEALTH_DOT.get(r.health, "?"), lambda r: r.score,
           align="left", help="status: red = critical alert / failed / NaN, yellow = alert, "
           "dim = no events lately, blue = completed"),
    Column("step", "STEP", 7, lambda r: fmt.MISSING if r.last_step is None else str(r.last_step),
           lambda r: _sortable(r.last_step), help="last step"),
    Column("age", "AGE", 6, lambda r: fmt.duration(r.age_s), lambda r: _sortable(r.age_s),
           help="time since the last step (grey row: stale, no step for 10 median steps)"),
    Column("loss", "LOSS", 8, lambda r: fmt.number(r.get("loss"), 4), _signal("loss"),
           help="training loss"),
    Column("grad_norm", "GNORM", 7, lambda r: fmt.number(r.get("grad_norm"), 3),
           _signal("grad_norm"), help="global gradient norm"),
    Column("loss_scale", "SCALE", 7, lambda r: fmt.loss_scale(r.get("loss_scale")),
           _signal("loss_scale"), help="dynamic loss scale", drop=3),
    Column("tokens_per_s", "TOK/S", 6, lambda r: fmt.rate(r.get("tokens_per_s")),
           _signal("tokens_per_s"), help="tokens per second on this device"),
    Column("step_time_s", "STEP T", 7, lambda r: fmt.duration(r.get("step_time_s")),
           _signal("step_time_s"), help="wall time of the last step"),
    Column("data_wait_share", "WAIT", 6, lambda r: fmt.percent(r.get("data_wait_share")),
           _signal("data_wait_share"), help="share of the step spent waiting for data"),
    Column("memory", "MEM", 6, lambda r: fmt.byte_size(memory(r)), lambda r: _sortable(memory(r)),
           help="device memory (host RSS when the device reports none)", drop=4),
    Column("update_ratio", "UPD", 7, lambda r: fmt.number(r.get("update_ratio"), 2),
           _signal("update_ratio"), help="|Δw|/|w| on sampled steps", drop=5),
    Column("spark", "LOSS~", SPARK_WIDTH + 2, lambda r: sparkline(r.spark, SPARK_WIDTH),
           lambda r: _sortable(r.spark[-1] if r.spark else None), align="left",
           help="recent loss", drop=2),
    Column("alerts", "ALERTS", 30, lambda r: ",".join(r.alerts),
           lambda r: r.critical * 100 + r.firing * 10 + r.pending, align="left",
           help="active alerts on this rank, most severe first"),
)

BY_KEY = {c.key: c for c in COLUMNS}


def fit(columns: Sequence[Column], width: int) -> List[Tuple[Column, int]]:
    """The columns shown in ``width`` cells and their widths: the ALERTS column takes what the
    others leave (at least :data:`ALERTS_MIN`); columns with a ``drop`` priority are hidden,
    the highest first, until it has that much."""
    shown = list(columns)
    droppable = sorted((c for c in shown if c.drop), key=lambda c: -c.drop)

    def others() -> int:
        return sum(c.width for c in shown if c.key != "alerts")

    while droppable and width - others() < ALERTS_MIN:
        shown.remove(droppable.pop(0))
    rest = max(ALERTS_FLOOR, width - others())
    return [(c, rest if c.key == "alerts" else c.width) for c in shown]
SORT_KEYS = tuple(c.key for c in COLUMNS)
