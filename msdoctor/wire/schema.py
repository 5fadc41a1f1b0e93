"""Event schema v1: the one contract shared by the training hooks and the sidecar.

Standard library only: the training process imports this module too.

An event is a plain ``dict`` (fast to build and to decode); :data:`FIELDS` lists each
type's fields and their kinds. Every event has ``v`` (schema version), ``type``
and ``rank``; each type has its own fields. Absent signals are omitted, never
faked. Unknown fields are kept as they are, so a newer producer never breaks an
older sidecar.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, Optional, Tuple

from msdoctor.wire.errors import MsdoctorError

SCHEMA_VERSION = 1

#: Field kinds: how a value is checked and what the error says is expected.
INT, NUM, BOOL, STR, OBJ = "int", "number", "bool", "string", "object"
#: Array kinds of the ``layers`` event: one entry per layer.
NUMS, NAMES = "numbers", "names"

EXPECTED: Dict[str, str] = {
    INT: "an integer",
    NUM: 'a number or one of "nan", "inf", "-inf"',
    BOOL: "true or false",
    STR: "a string",
    OBJ: "a JSON object",
    NUMS: 'an array with one number (or "nan"/"inf"/"-inf", or null: not measured) per layer',
    NAMES: "an array of distinct layer names (letters, digits, '_', '.', '-', '/', ':')",
}

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1

#: Deepest nesting of objects and arrays inside one field's value (``config``, ``expect``,
#: unknown fields). Deeper values are refused: JSON encoders and the snapshot have limits.
MAX_DEPTH = 32

#: Spellings of non-finite numbers accepted on the wire (JSON has no NaN/Inf).
NONFINITE: Dict[str, float] = {
    "nan": math.nan, "NaN": math.nan, "-nan": math.nan,
    "inf": math.inf, "Infinity": math.inf, "+inf": math.inf, "Inf": math.inf,
    "-inf": -math.inf, "-Infinity": -math.inf, "-Inf": -math.inf,
}

# field -> (kind, required)
_COMMON = {"v": (INT, True), "type": (STR, True), "rank": (INT, True),
           "t": (NUM, False), "run": (STR, False)}

#: Numeric signals of a step event, in base units (SI, names carry the unit).
STEP_SIGNALS: Tuple[str, ...] = (
    "loss", "grad_norm", "loss_scale", "lr", "tokens", "step_time_s", "data_wait_s",
    "update_ratio", "mem_device_bytes", "mem_device_peak_bytes", "mem_host_rss_bytes",
    "micro_steps", "layers_still", "eval_s",
)

FIELDS: Dict[str, Dict[str, Tuple[str, bool]]] = {
    "run_start": {**_COMMON, "world_size": (INT, False), "config": (OBJ, False),
                  "expect": (OBJ, False), "process_t": (NUM, False)},
    "step": {**_COMMON, "step": (INT, True), "overflow": (BOOL, False),
             **{name: (NUM, False) for name in STEP_SIGNALS}},
    "checkpoint": {**_COMMON, "step": (INT, True), "path": (STR, False),
                   "size_bytes": (INT, False), "save_s": (NUM, False), "load_s": (NUM, False),
                   "op": (STR, False)},
    "run_end": {**_COMMON, "status": (STR, True), "step": (INT, False),
                "exception": (STR, False)},
    "heartbeat": {**_COMMON, "step": (INT, False), "dropped": (INT, False)},
    "stop": {**_COMMON, "step": (INT, False), "reason": (STR, True)},
    "action": {**_COMMON, "step": (INT, False), "action": (STR, True), "reason": (STR, False),
               "alert": (STR, False)},
}

#: Per-layer signals of a ``layers`` event: arrays aligned with its ``names`` (forward order).
LAYER_SIGNALS: Tuple[str, ...] = ("grad_norm", "act_max", "weight_norm", "update_ratio")

FIELDS["layers"] = {**_COMMON, "step": (INT, True), "names": (NAMES, True),
                    **{name: (NUMS, False) for name in LAYER_SIGNALS}}

#: Most layers one ``layers`` event may name.
MAX_LAYERS = 4096
_LAYER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")

#: ``checkpoint.op``: a save (the default when absent) or a load on resume.
CHECKPOINT_OPS: Tuple[str, ...] = ("save", "load")

EVENT_TYPES: Tuple[str, ...] = tuple(FIELDS)

class EventError(MsdoctorError, ValueError):
    """A malformed event: names the field, what was found and what was expected."""

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.field = field


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_field(name: str, kind: str, value: Any) -> Any:
    """Return ``value`` normalised for ``kind`` (non-finite strings become floats)."""
    if kind == NUM:
        if type(value) is float or (type(value) is int):
            return value
        if isinstance(value, str) and value in NONFINITE:
            return NONFINITE[value]
    elif kind == INT:
        if type(value) is float and value.is_integer():
            value = int(value)
        if type(value) is int:
            if INT64_MIN <= value <= INT64_MAX:
                return value
            raise EventError(f"field {name!r}: expected {EXPECTED[kind]} that fits in 64 bits, "
                             f"got {_describe(value)}", name)
    elif kind == BOOL:
        if type(value) is bool:
            return value
    elif kind == STR:
        if isinstance(value, str):
            return value
    elif kind == OBJ:
        if isinstance(value, dict):
            return value
    elif kind == NAMES:
        return _check_names(name, value)
    elif kind == NUMS:
        return _check_numbers(name, value)
    raise EventError(f"field {name!r}: expected {EXPECTED[kind]}, got {_describe(value)}", name)


def _check_names(name: str, value: Any) -> Any:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_LAYERS:
        raise EventError(f"field {name!r}: expected {EXPECTED[NAMES]} (1 to {MAX_LAYERS}), "
                         f"got {_describe(value)}", name)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not _LAYER_NAME.match(item):
            raise EventError(f"field {name!r}: entry {i} is {_describe(item)}, not a layer name; "
                             f"expected {EXPECTED[NAMES]}", name)
    if len(set(value)) != len(value):
        twice = next(item for i, item in enumerate(value) if item in value[:i])
        raise EventError(f"field {name!r}: layer {twice!r} is named twice; expected "
                         f"{EXPECTED[NAMES]}", name)
    return value


def _check_numbers(name: str, value: Any) -> Any:
    if not isinstance(value, list):
        raise EventError(f"field {name!r}: expected {EXPECTED[NUMS]}, got {_describe(value)}", name)
    out = value
    for i, item in enumerate(value):
        if item is None or type(item) is float or type(item) is int:
            continue
        if isinstance(item, str) and item in NONFINITE:
            if out is value:
                out = list(value)
            out[i] = NONFINITE[item]
            continue
        raise EventError(f"field {name!r}: entry {i} is {_describe(item)}; expected "
                         f"{EXPECTED[NUMS]}", name)
    return out


def check_layers(event: Dict[str, Any]) -> None:
    """Every array of a ``layers`` event has one entry per name, and it has at least one."""
    count = len(event["names"])
    found = [name for name in LAYER_SIGNALS if name in event]
    if not found:
        raise EventError(f"layers event: none of {', '.join(LAYER_SIGNALS)}; expected at least "
                         "one per-layer array", "names")
    for name in found:
        if len(event[name]) != count:
            raise EventError(f"field {name!r}: {len(event[name])} entries for {count} layers in "
                             f"'names'; expected one entry per layer", name)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply objects and arrays nest in ``value`` (a scalar: 0, ``{}``: 1), counted
    level by level without recursion, and only up to ``limit + 1``."""
    depth, level = 0, [value]
    while depth <= limit:
        children: list = []
        containers = False
        for item in level:
            if isinstance(item, dict):
                children.extend(item.values())
                containers = True
            elif isinstance(item, list):
                children.extend(item)
                containers = True
        if not containers:
            break
        depth, level = depth + 1, children
    return depth


def check_depth(event: Dict[str, Any]) -> None:
    """Refuse a field whose value nests deeper than :data:`MAX_DEPTH` levels."""
    for name, value in event.items():
        if isinstance(value, (dict, list)) and nesting_depth(value) > MAX_DEPTH:
            raise EventError(f"field {name!r}: nested deeper than {MAX_DEPTH} levels; expected "
                             f"a value at most {MAX_DEPTH} levels deep", name)


def validate(event: Any) -> Dict[str, Any]:
    """Check ``event`` against schema v1 and normalise it in place.

    Raises :class:`EventError` naming the first offending field. Unknown fields
    are kept untouched.
    """
    if not isinstance(event, dict):
        raise EventError(f"expected a JSON object, got {_describe(event)}")
    version = event.get("v")
    if version != SCHEMA_VERSION:
        if version is None:
            raise EventError(f"missing field 'v': expected schema version {SCHEMA_VERSION}", "v")
        raise EventError(f"field 'v': unsupported schema version {_describe(version)}, "
                         f"this reader understands {SCHEMA_VERSION}", "v")
    kind = event.get("type")
    spec = FIELDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise EventError(f"field 'type': expected one of {', '.join(EVENT_TYPES)}, "
                         f"got {_describe(kind)}", "type")
    for name, (field_kind, required) in spec.items():
        if name in event:
            value = event[name]
            checked = check_field(name, field_kind, value)
            if checked is not value:
                event[name] = checked
        elif required:
            raise EventError(f"{kind} event: missing required field {name!r} "
                             f"({EXPECTED[field_kind]})", name)
    if kind == "layers":
        check_layers(event)
    check_depth(event)
    return event


def make(kind: str, rank: int, **fields: Any) -> Dict[str, Any]:
    """Build an event of ``kind`` for ``rank``; ``None`` fields are left out."""
    event: Dict[str, Any] = {"v": SCHEMA_VERSION, "type": kind, "rank": rank}
    for name, value in fields.items():
        if value is not None:
            event[name] = value
    return event

