"""Numbers as short text for people: the one set of formatters of every front end.

Two families, pure functions:

* fixed-width cells for tables, logs and chart axes (:func:`number`, :func:`loss_scale`,
  :func:`si`, :func:`rate`, :func:`byte_size`, :func:`duration`, :func:`percent`): an absent
  value is :data:`MISSING`, a non-finite one is spelled as on the wire (``nan``, ``inf``,
  ``-inf``) so that the eye catches it;
* the filters of alert annotation templates (:func:`humanize`, :func:`humanize_duration`,
  :func:`humanize_percentage`), which keep Prometheus' template semantics because rule
  authors know them from there.
"""
from __future__ import annotations

import logging
import math
from typing import Dict, Union

from msdoctor.wire.numbers import to_wire

MISSING = "-"


def _escapes() -> Dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7f, *range(0x80, 0xa0)]}
    table.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
    # line/paragraph separators and the bidirectional overrides that reorder what is shown
    table.update({c: f"\\u{c:04x}" for c in [0x2028, 0x2029, *range(0x202a, 0x202f),
                                              *range(0x2066, 0x206a)]})
    return table


_ESCAPES = _escapes()


def printable(text: object) -> str:
    """``text`` safe for a terminal or a log line: control characters (newlines, escape
    sequences, C1 codes) and bidirectional overrides become visible escapes (``\\x1b``,
    ``\\n``, ``\\u202e``); everything else is kept as it is."""
    return str(text).translate(_ESCAPES)


class EscapingFormatter(logging.Formatter):
    """A log formatter that passes each message through :func:`printable`, so text read from
    input (run names, paths, exception texts) cannot forge log lines or drive the terminal.
    A traceback, appended after the message, keeps its newlines."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.msg, record.args
        record.msg, record.args = printable(record.getMessage()), None
        try:
            return super().format(record)
        finally:
            record.msg, record.args = saved


def is_number(value: object) -> bool:
    """True for an int or a float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def nonfinite(value: object) -> bool:
    """True for a recorded NaN/±Inf (the values the eye must catch)."""
    return isinstance(value, float) and not math.isfinite(value)


def _special(value: object) -> Union[str, float]:
    """The text of a value that is not an ordinary number (``-`` when absent, the wire string
    when non-finite), else the value as a float."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return MISSING
    if not math.isfinite(value):
        return str(to_wire(float(value)))
    return float(value)


def number(value: object, digits: int = 4) -> str:
    """A float with ``digits`` significant digits (``2.5``, ``0.002``), in exponent form
    outside 1e-3..10**digits (``3.0e-4``, ``6.6e4``); ``-`` when absent."""
    value = _special(value)
    if isinstance(value, str):
        return value
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 10 ** digits:
        return f"{value:.{digits}g}"
    return f"{value:.{max(1, digits - 3)}e}".replace("e-0", "e-").replace("e+0", "e")


def loss_scale(value: object) -> str:
    """A loss scale: the exact integer up to 1e6 (``65536``), then ``2.1e9``."""
    value = _special(value)
    if isinstance(value, str):
        return value
    if abs(value) < 1e6 and float(value).is_integer():
        return str(int(value))
    return number(value, 3)


def si(value: object, unit: str = "", base: float = 1000.0, digits: int = 3) -> str:
    """``value`` with a k/M/G/T/P suffix (``base`` 1024 for bytes: K/M/G...) and ``digits``
    significant digits: ``16.4k``; values under 1e-3 in exponent form."""
    value = _special(value)
    if isinstance(value, str):
        return value
    if value != 0 and abs(value) < 1e-3:
        return number(value, digits) + unit
    mag, suffixes = abs(value), ("", "k", "M", "G", "T", "P")
    i = 0
    while mag >= base and i < len(suffixes) - 1:
        mag /= base
        i += 1
    sign = "-" if value < 0 else ""
    text = f"{mag:.{digits}g}" if mag < 1000 else f"{mag:.0f}"
    suffix = suffixes[i].upper() if base == 1024 and i else suffixes[i]
    return f"{sign}{text}{suffix}{unit}"


def rate(value: object) -> str:
    """Per-second figures with k/M/G suffixes: ``16.4k``."""
    return si(value, "")


def byte_size(value: object) -> str:
    """Bytes as ``28.4G`` (binary multiples, as ``free -h`` prints them)."""
    return si(value, "", 1024.0)


def duration(value: object) -> str:
    """A short duration in seconds: ``480ms``, ``1.25s``, ``12m04s``, ``3h12m``, ``2d04h``."""
    value = _special(value)
    if isinstance(value, str):
        return value
    v = float(value)
    if v < 0:
        return "-" + duration(-v)
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


def percent(share: object) -> str:
    """A 0..1 share as ``3.2%``."""
    share = _special(share)
    if isinstance(share, str):
        return share
    pct = 100.0 * share
    return f"{pct:.1f}%" if pct < 99.95 else f"{pct:.0f}%"


# -- annotation template filters (Prometheus semantics) ----------------------
def plain(x: float) -> str:
    """A template value with no format: an integer as such, else 6 significant digits."""
    if not math.isfinite(x):
        return to_wire(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def consequence(caused_by: object, summary: str = "") -> str:
    """An alert's summary, marked when the alert is a consequence of another firing alert."""
    if not caused_by:
        return summary
    return f"↳ consequence of {caused_by}" + (f": {summary}" if summary else "")


def humanize(x: float) -> str:
    """SI prefixes with 4 significant digits, down to nano: 1234 -> ``1.234k``,
    0.002 -> ``2m``."""
    if not math.isfinite(x) or x == 0:
        return plain(x)
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                           (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.4g}{prefix}"
    for factor, prefix in ((1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
        if abs(x) >= factor and abs(x) < 1:
            return f"{x / factor:.4g}{prefix}"
    return f"{x:.4g}"


def humanize_duration(seconds: float) -> str:
    """Seconds as ``1h 2m 3s`` (under a minute: ``12.5s``)."""
    if not math.isfinite(seconds):
        return plain(seconds)
    if abs(seconds) < 60:
        return f"{seconds:.3g}s"
    total = int(round(seconds))
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return sign + " ".join(parts)


def humanize_percentage(share: float) -> str:
    """A 0..1 share as ``12.35%`` (4 significant digits)."""
    if not math.isfinite(share):
        return plain(share)
    return f"{share * 100:.4g}%"
