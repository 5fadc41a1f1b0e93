"""Non-finite numbers on the wire: JSON has no NaN/Inf, so they travel as ``"nan"``, ``"inf"``
and ``"-inf"``. The one codec for events, alert records and API responses alike."""
from __future__ import annotations

import math
from typing import Any, List, Optional

#: The strings that stand for non-finite floats, and their values.
NONFINITE_STRINGS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
#: Also accepted when reading (other writers' spellings).
_LENIENT = {**NONFINITE_STRINGS, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
            "-infinity": -math.inf}


def to_wire(value: Any) -> Any:
    """A float as a JSON-safe value: non-finite floats become their wire strings; anything
    else is returned unchanged."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def to_wire_list(values: Any) -> List[Any]:
    """A float array (numpy or a sequence) as a JSON-safe list; only non-finite entries are
    touched, so a finite array costs one ``tolist``."""
    import numpy as np  # the hooks never call this; keep the module importable without numpy

    array = np.asarray(values, dtype=np.float64)
    out = array.tolist()
    for i in np.flatnonzero(~np.isfinite(array)).tolist():
        out[i] = to_wire(out[i])
    return out


def from_wire(value: Any) -> Any:
    """A wire string (``"nan"``, ``"inf"``, ``"-inf"``, any case) back to its float; anything
    else is returned unchanged."""
    if isinstance(value, str):
        found = _LENIENT.get(value.lower())
        if found is not None:
            return found
    return value


def as_float(value: Any) -> Optional[float]:
    """A JSON number or wire string as a float; None for None, booleans and anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        found = _LENIENT.get(value.lower())
        if found is not None:
            return found
        try:
            return float(value)
        except ValueError:
            return None
    return None
