"""Generic step tables: CSV with a header row, or JSON lines, whose columns are event fields.

Columns: ``step`` (required, an integer), optionally ``t`` (seconds since the epoch),
``rank`` (integer, default the file's rank), ``run``, and any step signal: ``loss``,
``grad_norm``, ``loss_scale``, ``overflow`` (true/false/1/0), ``lr``, ``tokens``,
``step_time_s``, ``data_wait_s``, ``update_ratio``, ``mem_*_bytes``, ``micro_steps``,
``tokens_per_s``. An empty cell (CSV) or ``null`` (JSON) means "not recorded"; numbers
may be spelled ``nan``, ``NaN``, ``inf``, ``-inf``. Unknown columns are kept in the
batches and named in the summary, never fatal.
"""
from __future__ import annotations

import csv
import json
from typing import Any, Dict, List, Optional

import numpy as np

from msdoctor.replay.numbers import flags, floats
from msdoctor.replay.recording import Block, Recording
from msdoctor.replay.textfile import Progress, blocks
from msdoctor.wire.schema import STEP_SIGNALS

KNOWN = frozenset(("step", "t", "rank", "run", "overflow", "tokens_per_s") + STEP_SIGNALS)
#: Distinct keys of a JSONL table read as columns (each costs a cell per row).
MAX_COLUMNS = 64

try:
    import orjson as _orjson
    _loads = _orjson.loads
except ImportError:  # pragma: no cover
    _loads = json.loads


def delimiter(header: str) -> str:
    """The CSV delimiter of a header line: comma, else tab or semicolon."""
    for d in (",", "\t", ";"):
        if d in header:
            return d
    return ","


def sniff_csv(text: str) -> bool:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    if line.lstrip().startswith("{"):
        return False
    return "step" in [c.strip().strip('"') for c in line.split(delimiter(line))]


def sniff_jsonl(text: str) -> bool:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        first = _loads(line)
    except ValueError:
        return False
    return isinstance(first, dict) and "step" in first and "type" not in first


def read_csv(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
             seq_length: Optional[int] = None) -> None:
    header: Optional[List[str]] = None
    rows: List[List[str]] = []
    lines: List[int] = []
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        if is_last:
            out.problems.note(f"{path}:{first_line}: unterminated last line skipped")
            continue
        raw = text.split("\n")[:-1]
        start = 0
        if header is None:
            while start < len(raw) and not raw[start].strip():
                start += 1
            if start == len(raw):
                continue
            sep = delimiter(raw[start])
            header = [c.strip() for c in next(csv.reader([raw[start]], delimiter=sep))]
            start += 1
        for offset, cells in enumerate(csv.reader(raw[start:], delimiter=sep), start):
            if not cells:
                continue
            if len(cells) != len(header):
                out.problems.add(path, first_line + offset, f"expected {len(header)} cells "
                                 f"({', '.join(header)}), got {len(cells)}")
                continue
            rows.append(cells)
            lines.append(first_line + offset)
    if header is None:
        return
    columns = {name: [r[j].strip() for r in rows] for j, name in enumerate(header)}
    _emit(columns, lines, path, run, rank, out)


def read_jsonl(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
               seq_length: Optional[int] = None) -> None:
    records: List[Dict[str, Any]] = []
    lines: List[int] = []
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        if is_last:
            out.problems.note(f"{path}:{first_line}: unterminated last line skipped")
            continue
        for offset, line in enumerate(text.split("\n")[:-1]):
            if not line.strip():
                continue
            try:
                record = _loads(line)
            except ValueError as exc:
                out.problems.add(path, first_line + offset, f"not valid JSON ({exc})")
                continue
            if not isinstance(record, dict):
                out.problems.add(path, first_line + offset,
                                 f"expected a JSON object, got {type(record).__name__}")
                continue
            records.append(record)
            lines.append(first_line + offset)
    names = list(dict.fromkeys(k for r in records for k in r))
    if len(names) > MAX_COLUMNS:         # each column costs a cell per row: bound them
        out.problems.add(path, 1, f"{len(names)} distinct keys; the first {MAX_COLUMNS} are "
                                  f"read as columns, the rest ignored (expected a few signals)")
        names = names[:MAX_COLUMNS]
    columns = {}
    for name in names:
        columns[name] = [_text(r.get(name)) for r in records]
    _emit(columns, lines, path, run, rank, out)


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def _emit(columns: Dict[str, List[Optional[str]]], lines: List[int], path: str, run: str,
          rank: int, out: Recording) -> None:
    if "step" not in columns:
        out.problems.add(path, 1, f"no 'step' column (columns: {', '.join(columns) or 'none'})")
        return
    n = len(lines)
    if not n:
        return
    bad_rows = np.zeros(n, dtype=bool)

    def report(name: str, result: tuple) -> tuple:
        values, mask, bad = result
        for row, message in bad:
            out.problems.add(path, lines[row], f"column {name!r}: {message}")
        return values, mask

    step_values, step_mask = report("step", floats(columns["step"]))
    whole = np.isfinite(step_values) & (step_values == np.round(step_values))
    if step_mask is not None:
        whole &= step_mask
    for row in np.flatnonzero(~whole & np.isfinite(step_values)):
        out.problems.add(path, lines[row], f"column 'step': expected an integer, "
                                           f"got {columns['step'][row]!r}")
    big = whole & ~(np.abs(step_values) < 2.0 ** 63)
    for row in np.flatnonzero(big):
        out.problems.add(path, lines[row], f"column 'step': {columns['step'][row]!r} does not "
                                           f"fit in 64 bits; expected a step number below 2**63")
    bad_rows |= ~whole | big
    ranks = np.full(n, rank, dtype=np.int64)
    if "rank" in columns:
        values, mask = report("rank", floats(columns["rank"]))
        ok = np.isfinite(values) if mask is None else (mask & np.isfinite(values))
        odd = ok & ~((values >= 0) & (values < 2.0 ** 31) & (values == np.round(values)))
        for row in np.flatnonzero(odd):
            out.problems.add(path, lines[row], f"column 'rank': expected an integer from 0 to "
                                               f"2**31 - 1, got {columns['rank'][row]!r}")
        bad_rows |= odd
        ok &= ~odd
        ranks[ok] = values[ok].astype(np.int64)
    runs = columns.get("run")
    t = np.full(n, np.nan)
    if "t" in columns:
        values, mask = report("t", floats(columns["t"]))
        t = values if mask is None else np.where(mask, values, np.nan)
    signals: Dict[str, tuple] = {}
    for name, texts in columns.items():
        if name in ("step", "t", "rank", "run"):
            continue
        if name not in KNOWN and name not in out.unknown_columns:
            out.unknown_columns.append(name)
        parsed = flags(texts) if name == "overflow" else floats(texts)
        signals[name] = report(name, parsed)
    groups: Dict[Any, List[int]] = {}    # (run, rank) -> its rows, in one pass
    for i, key in enumerate(zip(runs if runs is not None else [run] * n, ranks.tolist())):
        if not bad_rows[i]:
            groups.setdefault(key, []).append(i)
    for key, members in groups.items():
        rows = np.asarray(members, dtype=np.intp)
        block_columns = {}
        for name, (values, mask) in signals.items():
            m = None if mask is None else mask[rows]
            if m is None or m.any():
                block_columns[name] = (values[rows], None if m is None or m.all() else m)
        out.add(key[0] or run, int(key[1]), path,
                Block(step_values[rows].astype(np.int64), t[rows], block_columns))
