"""The ``/`` filter of the rank table: which ranks to show.

Terms are separated by spaces or commas; a rank matches when it matches any
term. A term is a rank (``7``), a range (``0-15``), a status (``running``,
``failed``, ``completed``, ``stopped``), a health word (``bad``, ``warn``,
``stale``, ``ok``, ``done``), ``alert`` (any active alert), ``nan`` (a
non-finite loss), or any other text, matched against the names of the rank's
active alerts (case-insensitive substring).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, List, Sequence

from msdoctor.tui.model import HEALTH, RankRow

STATUSES = ("running", "completed", "failed", "stopped")
_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")

Predicate = Callable[[RankRow], bool]


@dataclass(frozen=True)
class RankFilter:
    text: str
    terms: tuple

    def __call__(self, row: RankRow) -> bool:
        return not self.terms or any(term(row) for term in self.terms)

    def apply(self, rows: Sequence[RankRow]) -> List[RankRow]:
        return [r for r in rows if self(r)] if self.terms else list(rows)


def _term(word: str) -> Predicate:
    low = word.lower()
    if low.isdigit():
        n = int(low)
        return lambda r: r.rank == n
    match = _RANGE.match(low)
    if match:
        a, b = sorted((int(match.group(1)), int(match.group(2))))
        return lambda r: a <= r.rank <= b
    if low in STATUSES:
        return lambda r: r.status == low
    if low in HEALTH:
        return lambda r: r.health == low
    if low in ("alert", "alerts"):
        return lambda r: bool(r.firing or r.pending)
    if low == "nan":
        return lambda r: isinstance(r.get("loss"), float) and not math.isfinite(r.get("loss"))
    return lambda r: any(low in name.lower() for name in r.alerts)


def parse(text: str) -> RankFilter:
    """A filter from what was typed (empty text shows every rank)."""
    text = re.sub(r"\s*-\s*", "-", text.strip())
    words = [w for w in re.split(r"[\s,]+", text) if w]
    return RankFilter(text, tuple(_term(w) for w in words))
