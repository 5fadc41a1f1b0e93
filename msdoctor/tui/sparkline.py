"""Short, fixed-width text for numbers, sizes, durations and sparklines (pure functions)."""
from __future__ import annotations

import math
from typing import Optional, Sequence

SPARK_BARS = "▁▂▃▄▅▆▇█"
MISSING = "-"


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def nonfinite(value: object) -> bool:
    """True for a recorded NaN/±Inf (the values the eye must catch)."""
    return isinstance(value, float) and not math.isfinite(value)


def _bad(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def num(value: Optional[float], digits: int = 4) -> str:
    """A float with ``digits`` significant digits, or ``-`` when absent."""
    if not is_number(value):
        return MISSING
    if nonfinite(value):
        return _bad(value)
    if value == 0:
        return "0"
    mag = abs(value)
    if 1e-3 <= mag < 10 ** digits:
        text = f"{value:.{digits}g}"
        return text
    return f"{value:.{max(1, digits - 3)}e}".replace("e-0", "e-").replace("e+0", "e")


def scale(value: Optional[float]) -> str:
    """A loss scale: an integer up to 1e6, then ``2.1e9``."""
    if not is_number(value):
        return MISSING
    if nonfinite(value):
        return _bad(value)
    if abs(value) < 1e6 and float(value).is_integer():
        return str(int(value))
    return num(value, 3)


def rate(value: Optional[float]) -> str:
    """Per-second figures with k/M/G suffixes: ``16.4k``."""
    return si(value, "")


def si(value: Optional[float], unit: str = "", base: float = 1000.0) -> str:
    """``value`` with a k/M/G/T suffix (``base`` 1024 for bytes), 3 significant digits."""
    if not is_number(value):
        return MISSING
    if nonfinite(value):
        return _bad(value)
    mag, suffixes = abs(value), ("", "k", "M", "G", "T", "P")
    i = 0
    while mag >= base and i < len(suffixes) - 1:
        mag /= base
        i += 1
    sign = "-" if value < 0 else ""
    text = f"{mag:.3g}" if mag < 1000 else f"{mag:.0f}"
    suffix = suffixes[i].upper() if base == 1024 and i else suffixes[i]
    return f"{sign}{text}{suffix}{unit}"


def size(value: Optional[float]) -> str:
    """Bytes as ``28.4G`` (binary multiples, as ``free -h`` prints them)."""
    return si(value, "", 1024.0)


def seconds(value: Optional[float]) -> str:
    """A short duration: ``480ms``, ``1.25s``, ``12m04s``, ``3h12m``, ``2d04h``."""
    if not is_number(value):
        return MISSING
    if nonfinite(value):
        return _bad(value)
    v = float(value)
    if v < 0:
        return "-" + seconds(-v)
    if v < 1:
        return f"{v * 1000:.0f}ms"
    if v < 60:
        return f"{v:.3g}s"
    m, s = divmod(int(round(v)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def percent(share: Optional[float]) -> str:
    """A 0..1 share as ``3.2%``."""
    if not is_number(share):
        return MISSING
    if nonfinite(share):
        return _bad(share)
    pct = 100.0 * share
    return f"{pct:.1f}%" if pct < 99.95 else f"{pct:.0f}%"


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
