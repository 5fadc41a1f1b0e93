"""Annotation templates: ``{{ $value }}``-style substitutions, parsed at load, never executed."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from msdoctor.core.format import humanize, humanize_duration, humanize_percentage, plain
from msdoctor.wire.errors import MsdoctorError

_SUBST = re.compile(r"\{\{(.*?)\}\}", re.S)
_REF = re.compile(r"\$(value|step|first_step|run|checkpoint|labels\.([A-Za-z_][A-Za-z0-9_]*)"
                  r"|values\.([A-Za-z_][A-Za-z0-9_]*))\Z")
_PRINTF = re.compile(r'printf\s+"(%(?:\.\d{1,2})?[gfe]|%d|%s)"\Z')
FILTERS = ("humanize", "humanizeDuration", "humanizePercentage")
#: What a humanized reference says when its value is NaN (its signal was not recorded); the
#: unit glued to the reference in the text (``{{ $values.host | humanize }}B``) is dropped.
MISSING = "not recorded"
_UNIT = re.compile(r"[A-Za-z%]+")
FORMS = ('{{ $value }}, {{ $step }}, {{ $first_step }}, {{ $run }}, {{ $checkpoint }}, '
         '{{ $labels.NAME }}, '
         '{{ $values.NAME }}, optionally with | printf "%.3g", | humanize, | humanizeDuration '
         'or | humanizePercentage')


class TemplateError(MsdoctorError, ValueError):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class Ref:
    ref: str                # value | step | first_step | run | checkpoint | labels.X | values.X
    fmt: Optional[str] = None      # printf format
    filter: Optional[str] = None   # humanize...


Part = Union[str, Ref]


@dataclass(frozen=True)
class Template:
    parts: Tuple[Part, ...]

    def refs(self) -> List[Ref]:
        return [p for p in self.parts if isinstance(p, Ref)]

    def render(self, scope: Dict[str, Any]) -> str:
        """``scope``: value, step, first_step, run, checkpoint (text), labels (dict), values (dict)."""
        out: List[str] = []
        missing = False
        for part in self.parts:
            if isinstance(part, str):
                unit = _UNIT.match(part) if missing else None
                out.append(part[unit.end():] if unit else part)
                missing = False
                continue
            head, _, name = part.ref.partition(".")
            value = scope.get(head) if not name else (scope.get(head) or {}).get(name)
            text = _format(value, part)
            missing = text is MISSING
            out.append(text)
        return "".join(out)


def parse_template(text: str) -> Template:
    """Parse ``text``; raise :class:`TemplateError` (offset = column in the text) if invalid."""
    parts: List[Part] = []
    pos = 0
    for m in _SUBST.finditer(text):
        if m.start() > pos:
            parts.append(text[pos:m.start()])
        parts.append(_parse_ref(m.group(1), m.start()))
        pos = m.end()
    rest = text[pos:]
    if "{{" in rest or "}}" in rest:
        at = pos + max(rest.find("{{"), rest.find("}}"))
        raise TemplateError("unbalanced '{{' or '}}': expected {{ ... }} pairs", at)
    if rest:
        parts.append(rest)
    return Template(tuple(parts))


def _parse_ref(body: str, offset: int) -> Ref:
    pieces = [p.strip() for p in body.split("|")]
    if len(pieces) > 2:
        raise TemplateError(f"{{{{{body}}}}}: at most one '|' filter; expected {FORMS}", offset)
    m = _REF.match(pieces[0])
    if m is None:
        raise TemplateError(f"unknown template reference {pieces[0]!r}: expected {FORMS}", offset)
    fmt = filt = None
    if len(pieces) == 2:
        pm = _PRINTF.match(pieces[1])
        if pm is not None:
            fmt = pm.group(1)
        elif pieces[1] in FILTERS:
            filt = pieces[1]
        else:
            raise TemplateError(f"unknown template filter {pieces[1]!r}: expected printf \"%.Ng\", "
                                f"{', '.join(FILTERS)}", offset)
    return Ref(m.group(1), fmt, filt)


def _format(value: Any, ref: Ref) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        value = int(value)
    x = float(value)
    if ref.filter and math.isnan(x):
        return MISSING
    if ref.filter == "humanize":
        return humanize(x)
    if ref.filter == "humanizeDuration":
        return humanize_duration(x)
    if ref.filter == "humanizePercentage":
        return humanize_percentage(x)
    if ref.fmt == "%d":
        return str(int(x)) if math.isfinite(x) else plain(x)
    if ref.fmt == "%s":
        return plain(x)
    if ref.fmt:
        return ref.fmt % x
    return plain(x)
