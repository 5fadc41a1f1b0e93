"""The rank table's columns: title, width, how a cell reads and how it sorts."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from msdoctor.core import format as fmt
from msdoctor.tui.model import RankRow
from msdoctor.tui.sparkline import sparkline

SPARK_WIDTH = 8
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

    def cell(self, row: RankRow) -> str:
        text = self.text(row)
        if len(text) > self.width - 1:
            text = text[: self.width - 1]
        return (" " + text.ljust(self.width - 1)) if self.align == "left" \
            else text.rjust(self.width - 1) + " "


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
           _signal("loss_scale"), help="dynamic loss scale"),
    Column("tokens_per_s", "TOK/S", 6, lambda r: fmt.rate(r.get("tokens_per_s")),
           _signal("tokens_per_s"), help="tokens per second on this device"),
    Column("step_time_s", "STEP T", 7, lambda r: fmt.duration(r.get("step_time_s")),
           _signal("step_time_s"), help="wall time of the last step"),
    Column("data_wait_share", "WAIT", 6, lambda r: fmt.percent(r.get("data_wait_share")),
           _signal("data_wait_share"), help="share of the step spent waiting for data"),
    Column("memory", "MEM", 6, lambda r: fmt.byte_size(memory(r)), lambda r: _sortable(memory(r)),
           help="device memory (host RSS when the device reports none)"),
    Column("update_ratio", "UPD", 7, lambda r: fmt.number(r.get("update_ratio"), 2),
           _signal("update_ratio"), help="|Δw|/|w| on sampled steps"),
    Column("spark", "LOSS~", SPARK_WIDTH + 2, lambda r: sparkline(r.spark, SPARK_WIDTH),
           lambda r: _sortable(r.spark[-1] if r.spark else None), align="left",
           help="recent loss"),
    Column("alerts", "ALERTS", 30, lambda r: ",".join(r.alerts), lambda r: r.firing * 10 + r.pending,
           align="left", help="active alerts on this rank"),
)

BY_KEY = {c.key: c for c in COLUMNS}
SORT_KEYS = tuple(c.key for c in COLUMNS)
