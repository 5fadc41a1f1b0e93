"""MindFormers 1.x training logs: the ``MFLossMonitor`` step line and its progress line.

The step line, as ``print_output_info`` in ``mindformers/core/callback/callback.py``
(1.3 - 1.9) logs it (``lr: ...`` only when a learning rate is known; ``loss: x`` in sink
mode, ``loss:[x/mean]`` otherwise; separate ``*_loss:`` fields only for MoE/MTP models)::

    { Epoch:[%3d/%3d], step:[%5d/%5d], loss:[%5.6f/%5.6f], per_step_time: %dms, lr: %s,
      overflow cond: %s, loss_scale: %s, global_norm: %s[, train_throughput_per_npu: %.3fT]

followed by ``  %4.1f%% |███...| %.5f samples/s/p  %s }``. The lines are found anywhere
in a line (after any logging prefix: the ``info.log`` file handler's
``[INFO] 2025-01-01 10:00:00,123 [file:line] func: `` or msrun's stdout
``2025-01-01 10:00:00,123 - name[file:line] - INFO - ``), among any other lines.

Mapping to step events: ``step`` = (epoch - 1) * steps_per_epoch + step; ``loss`` the
current (first) value; ``step_time_s`` = per_step_time / 1000; ``lr``, ``overflow``,
``loss_scale`` (``unavailable``: not recorded), ``grad_norm`` = global_norm (``None``:
not recorded); ``t`` the line's timestamp (local time). ``samples/s/p`` times
``--seq-length`` gives ``tokens`` (= samples/s/p x seq_length x step_time_s): the log
itself has no token count.
"""
from __future__ import annotations

import re
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from msdoctor.replay.numbers import flags, floats
from msdoctor.replay.recording import Block, Recording
from msdoctor.replay.textfile import Progress, blocks

NAME = "mindformers"
MARK = "{ Epoch:["

STEP = re.compile(
    r"\{ Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], "
    r"loss:\s*(?:\[([^/\]\n]*)/[^\]\n]*\]|([^,\n]*)), "
    r"(?:\w+_loss: [^,\n]*, )*"
    r"per_step_time: ([^,\n]*)ms, "
    r"(?:lr: ([^,\n]*), )?"
    r"overflow cond: ([^,\n]*), loss_scale: ([^,\n]*)"
    r"(?:, global_norm:? ([^,\n]*?))?"
    r"(?:, train_throughput_per_npu: ([^,\n]*)T)?[ \t]*$", re.M)
PROGRESS = re.compile(r"\d+\.\d% \|[^|\n]*\| ([^ \n]+) samples/s/p")
STAMP = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)[,.](\d{3})")


def sniff(text: str) -> bool:
    """True if ``text`` (the start of a file) holds a MindFormers step line."""
    return STEP.search(text) is not None


def read(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
         seq_length: Optional[int] = None) -> None:
    """Parse ``path`` into ``out`` (rank ``rank`` of ``run``)."""
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        if is_last:         # a line is complete only with its newline (as in the spool)
            if MARK in text:
                out.problems.note(f"{path}:{first_line}: unterminated last line skipped")
            continue
        block = parse_block(text, path, first_line, out, seq_length)
        if block is not None:
            out.add(run, rank, path, block)


def parse_block(text: str, path: str, first_line: int, out: Recording,
                seq_length: Optional[int]) -> Optional[Block]:
    """The step block of one text block (whole lines), problems recorded in ``out``."""
    matches = list(STEP.finditer(text))
    if text.count(MARK) != len(matches):
        _unmatched(text, matches, path, first_line, out)
    if not matches:
        return None
    n = len(matches)
    starts = [m.start() for m in matches]
    groups = [m.groups() for m in matches]
    cols = list(zip(*groups))

    def line_of(row: int) -> int:
        if out.problems.full:           # only counted from here on: skip the O(n) count
            return 0
        return first_line + text.count("\n", 0, starts[row])

    def check(name: str, result: Tuple) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        values, mask, bad = result
        for row, message in bad:
            out.problems.add(path, line_of(row), f"MindFormers step line, {name}: {message}")
        return values, mask

    epoch = np.array(cols[0], dtype=np.int64)
    per_epoch = np.array(cols[3], dtype=np.int64)
    steps = (epoch - 1) * per_epoch + np.array(cols[2], dtype=np.int64)
    columns: Dict[str, Tuple[np.ndarray, Optional[np.ndarray]]] = {}
    loss_texts = [a if a is not None else b for a, b in zip(cols[4], cols[5])]
    columns["loss"] = check("loss", floats(loss_texts))
    ms, ms_mask = check("per_step_time", floats(cols[6]))
    columns["step_time_s"] = (ms / 1000.0, ms_mask)
    if any(v is not None for v in cols[7]):
        columns["lr"] = check("lr", floats(cols[7]))
    columns["overflow"] = check("overflow cond", flags(cols[8]))
    columns["loss_scale"] = check("loss_scale", floats(cols[9]))
    columns["grad_norm"] = check("global_norm", floats(cols[10]))
    if seq_length:
        rate = _progress_rates(text, starts, path, first_line, out)
        if rate is not None:
            with np.errstate(invalid="ignore"):
                tokens = rate[0] * float(seq_length) * columns["step_time_s"][0]
            mask = rate[1] if ms_mask is None else (rate[1] & ms_mask)
            columns["tokens"] = (tokens, None if mask.all() else mask)
    columns = {k: v for k, v in columns.items() if v[1] is None or v[1].any()}
    return Block(steps, _times(text, starts), columns)


def _unmatched(text: str, matches: Sequence[re.Match], path: str, first_line: int,
               out: Recording) -> None:
    """Report lines that carry the step line's mark but not its layout."""
    found = {text.rfind("\n", 0, m.start()) + 1 for m in matches}
    pos = text.find(MARK)
    counted, line = 0, first_line
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if start not in found:
            line += text.count("\n", counted, start)
            counted = start
            shown = text[pos:end if end >= 0 else len(text)][:120]
            out.problems.add(path, line, "not a complete MindFormers step line (expected "
                                         "'{ Epoch:[e/E], step:[s/S], loss..., per_step_time: Nms,"
                                         f" ..., overflow cond: ..., loss_scale: ...'), got {shown!r}")
            found.add(start)
        pos = text.find(MARK, end if end >= 0 else len(text))


def _progress_rates(text: str, starts: List[int], path: str, first_line: int, out: Recording
                    ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """samples/s/p of the progress line that follows each step line, if any."""
    found = [(m.start(), m.group(1)) for m in PROGRESS.finditer(text)]
    if not found:
        return None
    pos = np.array([p for p, _ in found])
    owner = np.searchsorted(np.asarray(starts), pos) - 1
    values, mask, bad = floats([v for _, v in found])
    for row, message in bad:
        out.problems.add(path, first_line + text.count("\n", 0, found[row][0]),
                         f"MindFormers progress line, samples/s/p: {message}")
    ok = owner >= 0 if mask is None else ((owner >= 0) & mask)
    rate = np.full(len(starts), np.nan)
    has = np.zeros(len(starts), dtype=bool)
    rate[owner[ok]] = values[ok]
    has[owner[ok]] = True
    return rate, has


_MIDNIGHT: Dict[str, float] = {}


def _times(text: str, starts: List[int]) -> np.ndarray:
    """Each step line's timestamp (seconds since the epoch, local time), NaN if none."""
    out = np.full(len(starts), np.nan)
    rfind, search = text.rfind, STAMP.search
    for i, pos in enumerate(starts):
        m = search(text, rfind("\n", 0, pos) + 1, pos)
        if m is None:
            continue
        day, clock, millis = m.groups()
        base = _MIDNIGHT.get(day)
        if base is None:
            try:
                base = _MIDNIGHT[day] = time.mktime(time.strptime(day, "%Y-%m-%d"))
            except (ValueError, OverflowError):
                continue
        out[i] = base + int(clock[:2]) * 3600 + int(clock[3:5]) * 60 + int(clock[6:8]) \
            + int(millis) / 1000.0
    return out
