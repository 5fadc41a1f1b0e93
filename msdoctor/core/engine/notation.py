"""promtool's expanding notation for test series: ``"1+1x3 _ nan _x2"``."""
from __future__ import annotations

import math
import re
from typing import List, Optional

from msdoctor.wire.errors import MsdoctorError

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan"
_TOKEN = re.compile(rf"(?P<a>{_NUM})(?:(?P<op>[+-])(?P<b>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+))?"
                    rf"(?:x(?P<n>\d+))?\Z")
_BLANK = re.compile(r"_(?:x(?P<n>\d+))?\Z")
MAX_VALUES = 10_000_000
FORM = ('space-separated items: a number, nan, inf, -inf, "_" (not recorded), "axN" (N+1 copies), '
        '"a+bxN" / "a-bxN" (N+1 values from a in steps of b), "_xN" (N not recorded)')


class NotationError(MsdoctorError, ValueError):
    pass


def expand(text: object) -> List[Optional[float]]:
    """Expand a series; ``None`` entries stand for "not recorded" (returned as NaN-free None)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return [float(text)]
    if not isinstance(text, str):
        raise NotationError(f"expected a series string ({FORM}), got {text!r}")
    out: List[Optional[float]] = []
    for token in text.split():
        m = _BLANK.match(token)
        if m:
            out.extend([None] * (int(m.group("n")) if m.group("n") else 1))
        else:
            m = _TOKEN.match(token)
            if m is None:
                raise NotationError(f"bad series item {token!r}: expected {FORM}")
            a = float(m.group("a"))
            if m.group("n") is None:
                if m.group("op"):
                    raise NotationError(f"bad series item {token!r}: 'a+b' needs a count, e.g. "
                                      f"{token}x10")
                out.append(a)
            else:
                n = int(m.group("n"))
                b = float(m.group("b") or 0.0) * (-1.0 if m.group("op") == "-" else 1.0)
                if n + 1 + len(out) > MAX_VALUES:
                    raise NotationError(f"series too long: more than {MAX_VALUES} values")
                if b == 0.0 or math.isnan(a):
                    out.extend([a] * (n + 1))
                else:
                    out.extend(a + b * i for i in range(n + 1))
        if len(out) > MAX_VALUES:
            raise NotationError(f"series too long: more than {MAX_VALUES} values")
    return out
