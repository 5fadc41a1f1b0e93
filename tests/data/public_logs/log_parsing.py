"""The parser registry of the public-log corpus and the value helpers its parsers share.

Values are copied as printed; the only changes are dropping thousands separators, spelling
non-finite values ``nan``/``inf``/``-inf``, milliseconds -> seconds (exact decimal shift) and
``overflow`` flags as ``1``/``0``.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Callable, Dict, List, Optional

Row = Dict[str, str]
Parser = Callable[[str], List[Row]]
PARSERS: Dict[str, Parser] = {}


def parser(name: str) -> Callable[[Parser], Parser]:
    def register(fn: Parser) -> Parser:
        PARSERS[name] = fn
        return fn
    return register


def num(text: str) -> str:
    """A number as printed, without thousands separators; non-finite values spelled nan/inf/-inf."""
    value = text.strip().rstrip(",").replace(",", "")
    low = value.lower()
    if low in ("nan", "-nan", "+nan"):
        return "nan"
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return "inf"
    if low in ("-inf", "-infinity"):
        return "-inf"
    return value


def seconds(ms: str) -> str:
    """Milliseconds as printed -> seconds, by an exact decimal shift."""
    return format((Decimal(num(ms)) / Decimal(1000)).normalize(), "f")


def one_number(text: Optional[str]) -> Optional[str]:
    """A value that is one number, else None (not recorded): ``[1 31049]`` is not a number."""
    if text is None or not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf)",
                                        text.strip(), re.I):
        return None
    return num(text)


def flag(text: str) -> str:
    return "1" if text.strip().strip("[]").strip().lower() in ("true", "1") else "0"


def rows_of(pattern: str, text: str, **columns: Callable[[re.Match], str]) -> List[Row]:
    """One row per match of ``pattern``; each column computed from the match."""
    rows = []
    for m in re.finditer(pattern, text, re.M):
        rows.append({name: get(m) for name, get in columns.items() if get(m) is not None})
    return rows


def headed_rows(text: str, header: str, record: str, row: Callable[[re.Match, re.Match], Row],
                once: bool = False) -> List[Row]:
    """``row(head, m)`` for each line matching ``record`` that follows a line matching ``header``
    (``head``: the latest such line's match; both patterns anchored at the line's start); ``once``:
    only the first record after each header."""
    rows: List[Row] = []
    head = None
    for line in text.splitlines():
        h = re.match(header, line)
        if h:
            head = h
            continue
        m = re.match(record, line)
        if m and head is not None:
            rows.append(row(head, m))
            if once:
                head = None
    return rows


def add_present(row: Row, columns: Dict[str, str], values: Dict[str, str]) -> Row:
    """``row`` with ``column = num(values[key])`` for each ``column: key`` that ``values`` holds."""
    row.update({column: num(values[key]) for column, key in columns.items() if key in values})
    return row


def group(i: int, convert: Callable[[str], str] = num) -> Callable[[re.Match], Optional[str]]:
    return lambda m: None if m.group(i) is None else convert(m.group(i))


def fairseq_rows(text: str, record: str) -> List[Row]:
    """Legacy fairseq lines: ``record`` (a regex with groups epoch, loss, num_updates, lr, gnorm,
    loss_scale) gives a step record (step = num_updates), and ``| WARNING: overflow detected, setting
    loss scale to: X`` lines give overflow 1, loss_scale X; they print no update count: step = the last
    num_updates + the running count of overflow lines since it."""
    rows: List[Row] = []
    last, since = 0, 0
    for line in text.splitlines():
        m = re.match(record, line)
        if m:
            last, since = int(m.group(3)), 0
            rows.append({"step": m.group(3), "loss": num(m.group(2)), "grad_norm": num(m.group(5)),
                         "lr": num(m.group(4)), "loss_scale": num(m.group(6)), "epoch": m.group(1)})
            continue
        m = re.match(r"\| WARNING: overflow detected, setting loss scale to: (\S+)", line)
        if m:
            since += 1
            rows.append({"step": str(last + since), "loss_scale": num(m.group(1)), "overflow": "1"})
    return rows
