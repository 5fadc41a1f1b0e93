"""TUI-only text: sparklines. Numbers are formatted by :mod:`msdoctor.core.format`."""
from __future__ import annotations

import math
from typing import Sequence

from msdoctor.core.format import is_number, nonfinite

SPARK_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int) -> str:
    """The last ``width`` values as block bars; a non-finite value is ``×``."""
    values = list(values)[-width:] if width > 0 else []
    finite = [v for v in values if is_number(v) and math.isfinite(v)]
    if not finite:
        return "×" * sum(1 for v in values if nonfinite(v))
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for v in values:
        if not is_number(v) or not math.isfinite(v):
            out.append("×")
        elif span <= 0:
            out.append(SPARK_BARS[len(SPARK_BARS) // 2])
        else:
            out.append(SPARK_BARS[min(len(SPARK_BARS) - 1,
                                      int((v - low) / span * (len(SPARK_BARS) - 1) + 0.5))])
    return "".join(out)
