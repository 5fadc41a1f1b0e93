"""Turning the number texts of log lines into float columns, in bulk.

Values are numpy reprs or Python floats as the frameworks print them: ``5.541564``,
``[1.4662281]``, ``[nan]``, ``1.5e+38``, ``NaN``, ``-inf``; ``None``, ``unavailable``
and the empty text mean "not recorded". A text that is none of these is *malformed*:
its row is returned so the reader can report it with file:line.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

#: Texts that mean "not recorded".
MISSING = frozenset(("", "None", "none", "null", "unavailable", "N/A", "-"))
_TRUE = frozenset(("True", "true", "1", "[ True]", "[True]", "1.0"))
_FALSE = frozenset(("False", "false", "0", "[False]", "0.0"))


def number(text: str) -> Optional[float]:
    """One value as a float; None when not recorded; raises ValueError when malformed.

    An array repr with several elements gives their mean (as MindFormers' own
    ``np.mean`` of a loss would).
    """
    text = text.strip()
    if text in MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    if text.startswith("[") and text.endswith("]"):
        parts = text[1:-1].split()
        if not parts:
            return None
        values = [float(p) for p in parts]          # ValueError propagates: malformed
        return values[0] if len(values) == 1 else float(np.mean(values))
    shown = text if len(text) <= 60 else text[:57] + "..."     # a message stays one short line
    raise ValueError(f"expected a number (or nan, inf, -inf, None), got {shown!r}")


def floats(texts: Sequence[Optional[str]]) -> Tuple[np.ndarray, Optional[np.ndarray], List[Tuple[int, str]]]:
    """``(values, recorded mask or None if all, [(row, error)])`` of a column of texts.

    The common case (plain numbers throughout) is one C-level conversion.
    """
    n = len(texts)
    if None not in texts:       # numpy would turn None into a *recorded* NaN
        try:
            return np.array(texts, dtype=np.float64), None, []
        except (ValueError, TypeError):
            pass
    values = np.full(n, np.nan)
    mask = np.zeros(n, dtype=bool)
    bad: List[Tuple[int, str]] = []
    if n and (texts[0] is None or texts[0] in MISSING) and texts.count(texts[0]) == n:
        return values, mask, bad            # never recorded (global_norm: None, ...)
    cache: Dict[Optional[str], Optional[float]] = {}
    for i, text in enumerate(texts):
        if text in cache:
            value = cache[text]
        elif text is None:
            value = cache[text] = None
        else:
            try:
                value = cache[text] = number(text)
            except ValueError as exc:
                bad.append((i, str(exc)))
                continue
        if value is not None:
            values[i] = value
            mask[i] = True
    return values, (None if mask.all() else mask), bad


def flags(texts: Sequence[Optional[str]]) -> Tuple[np.ndarray, Optional[np.ndarray], List[Tuple[int, str]]]:
    """An overflow column (``False``, ``True``, ``[ True]``, numpy bool arrays) as 0/1 floats."""
    n = len(texts)
    values = np.zeros(n)
    mask = np.ones(n, dtype=bool)
    bad: List[Tuple[int, str]] = []
    if texts.count("False") == n:
        return values, None, bad
    for i, text in enumerate(texts):
        if text in _FALSE:
            continue
        if text in _TRUE:
            values[i] = 1.0
            continue
        stripped = (text or "").strip()
        if stripped in MISSING:
            mask[i] = False
        elif stripped.startswith("[") and stripped.endswith("]") and stripped[1:-1].split() and \
                set(stripped[1:-1].split()) <= {"True", "False"}:
            values[i] = float("True" in stripped)
        else:
            bad.append((i, f"expected True or False, got {text!r}"))
            mask[i] = False
    return values, (None if mask.all() else mask), bad
