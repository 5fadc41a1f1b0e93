"""The errors in a training log: ERROR / CRITICAL lines and Python tracebacks, with their time.

Read from MindFormers' logs (``info.log`` holds every level, ``error.log`` only ERROR and
above, the same lines), msrun's worker logs (MindFormers' stdout lines, MindSpore's own log
lines and the uncaught traceback on stderr) and any text log. The line layouts, from
``mindformers/tools/logger.py`` (1.9.0) and MindSpore's logger::

    [ERROR] 2025-01-01 10:00:00,123 [mindformers/x.py:12] func: message        # file handler
    2025-01-01 10:00:00,123 - mindformers...[mindformers/x.py:12] - ERROR - message   # stdout
    [ERROR] ME(123:456,MainProcess):2025-01-01-10:00:00.123.456 [file:line] message   # MindSpore
    [ERROR] DISTRIBUTED(123,7f..,python):2025-01-01-10:00:00.123.456 [file:line] func] message

A traceback (``Traceback (most recent call last):`` then indented frames) is one error: its
last line (``SomeError: message``), at the traceback's first line, timed by the nearest
timestamped line before it. A known cause (missing dataset file, out of memory, collective
timeout, graph compile failure) gets a hint.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

#: Errors kept per rank (the first ones: the first error is usually the cause).
KEEP = 5

_LEVEL = re.compile(r"^\[(?:ERROR|CRITICAL)\] | - (?:ERROR|CRITICAL) - ")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ -](\d\d:\d\d:\d\d)[,.](\d{3})")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)\b.*$"
                        r"|^[A-Za-z_][\w.]*: .+$")

#: (name, pattern over the error text, hint). The first that matches names the cause.
KNOWN: Tuple[Tuple[str, "re.Pattern[str]", str], ...] = (
    ("cpu-overflow-check", re.compile(r"NPUGetFloatStatus"),
     "MindFormers' overflow check (NPUGetFloatStatusV2) exists only on Ascend; on a CPU "
     "`import trainer_hooks.mindformers` (or the MsDoctorMonitor callback) replaces it with an "
     "isfinite check (docs/formats/mindformers.md)"),
    ("dataset-missing", re.compile(
        r"(?i)(?=.*(?:no such file|no dataset file|not exist|not found|invalid file|failed to open|"
        r"FileNotFoundError|cannot find))(?=.*(?:dataset|mindrecord|data_?files?|data_?dir|"
        r"data_?path|\.bin\b|\.idx\b|\.parquet|\.jsonl?\b|tokenizer))"),
     "a dataset file is missing: check train_dataset.data_loader (dataset_dir / data_files) "
     "in the YAML and that the path exists on every node"),
    ("out-of-memory", re.compile(
        r"(?i)out of memory|\bOOM\b|MemoryError|malloc.*fail|alloc\w* (?:device )?memory fail|"
        r"memory (?:is )?not enough|memory isn.t enough|insufficient memory|EL0004|cannot allocate memory"),
     "out of memory: lower micro_batch_size or seq_length, turn on recompute, shard more "
     "(model/pipeline parallel), or raise context.max_device_memory"),
    ("collective-timeout", re.compile(
        r"(?i)(?=.*(?:hccl|nccl|collective|communicat|cluster|rank|node|EI000[26]|notify wait))"
        r"(?=.*(?:time ?out|timed out|EI0002|EI0006))"),
     "a collective (HCCL) timed out: a rank crashed, hung or is slow; read the first failing "
     "rank's log first; raise HCCL_EXEC_TIMEOUT / HCCL_CONNECT_TIMEOUT only if every rank is "
     "healthy but slow"),
    ("compile-failure", re.compile(
        r"(?i)compile|unsupported op|select kernel|kernel .*not (?:found|supported)|"
        r"Traceback of Net Construct Code|graph (?:build|construct)|abstract type"),
     "the graph failed to compile: the message names the operator or the line of construct() "
     "that MindSpore could not compile (device support, dtype, shape, or unsupported syntax)"),
)


@dataclass
class ErrorLine:
    """One error seen in a log: where, when (seconds since the epoch, local time; None when
    the line has no time), its text, and the known cause it matches."""

    path: str
    line: int
    t: Optional[float]
    text: str
    cause: Optional[str] = None
    hint: Optional[str] = None

    def to_dict(self) -> Dict[str, object]:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return {"where": where, "t": self.t, "text": self.text,
                "cause": self.cause, "hint": self.hint}


def known_cause(text: str) -> Tuple[Optional[str], Optional[str]]:
    """(name, hint) of the first known cause ``text`` matches, else (None, None)."""
    for name, pattern, hint in KNOWN:
        if pattern.search(text):
            return name, hint
    return None, None


def stamp_of(line: str) -> Optional[float]:
    """The line's timestamp (``2025-01-01 10:00:00,123`` or MindSpore's
    ``2025-01-01-10:00:00.123``), seconds since the epoch in local time; None if none."""
    m = _STAMP.search(line)
    return None if m is None else _seconds(m)


def _seconds(m: "re.Match[str]") -> Optional[float]:
    try:
        seconds = time.mktime(time.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None
    return seconds + int(m.group(3)) / 1000.0


class ErrorScan:
    """Errors of one file, fed block by block (whole lines); keeps the first :data:`KEEP`
    and counts the rest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: List[ErrorLine] = []
        self.count = 0
        self._last_t: Optional[float] = None
        self._trace: Optional[Tuple[int, Optional[float]]] = None   # (first line, time)

    def feed(self, text: str, first_line: int) -> None:
        """Scan one block of whole lines starting at line ``first_line``."""
        if "ERROR" not in text and "CRITICAL" not in text and _TRACEBACK not in text \
                and self._trace is None:
            self._note_time(text)
            return
        for offset, line in enumerate(text.split("\n")):
            self._line(line, first_line + offset)

    def _note_time(self, text: str) -> None:
        """The block has no error: only remember its last time (a traceback may follow)."""
        stamps = list(_STAMP.finditer(text, max(0, len(text) - 4000)))
        if stamps:
            self._last_t = _seconds(stamps[-1]) or self._last_t

    def _line(self, line: str, number: int) -> None:
        if self._trace is not None:
            if not line.strip() or line.startswith((" ", "\t")):
                return
            if _EXCEPTION.match(line):
                start, t = self._trace
                self._trace = None
                self._add(start, t, line.strip())
                return
            self._trace = None
        t = stamp_of(line[:120]) if line[:1] in "[0123456789" else None
        if t is not None:
            self._last_t = t
        if line.startswith(_TRACEBACK) or line.endswith(_TRACEBACK):
            self._trace = (number, self._last_t)    # run_mindformer.py logs it as one ERROR
            return
        if _LEVEL.search(line[:200]):
            self._add(number, t, _message(line))

    def _add(self, line: int, t: Optional[float], text: str) -> None:
        self.count += 1
        if len(self.found) < KEEP:
            cause, hint = known_cause(text)
            self.found.append(ErrorLine(self.path, line, t, text[:500], cause, hint))


def _message(line: str) -> str:
    """The message of a log line, without its level/time/location prefix."""
    for sep in (" - ERROR - ", " - CRITICAL - "):
        at = line.find(sep)
        if at >= 0:
            return line[at + len(sep):].strip()
    m = re.match(r"^\[\w+\] [^\[]*\[[^\]]*\]\s*(?:[\w<>.]+[:\]]\s)?", line)
    return (line[m.end():] if m else line).strip()


def merge(found: List[ErrorLine], more: List[ErrorLine]) -> List[ErrorLine]:
    """``found`` plus ``more`` without repeats (info.log and error.log hold the same ERROR
    lines), in time order (untimed ones last), at most :data:`KEEP`."""
    seen = {(e.t, e.text) for e in found}
    merged = found + [e for e in more if (e.t, e.text) not in seen]
    merged.sort(key=lambda e: (e.t is None, e.t or 0.0))
    return merged[:KEEP]
