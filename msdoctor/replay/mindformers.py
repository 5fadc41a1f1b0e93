"""MindFormers training logs: the ``MFLossMonitor`` step line and its progress line.

The step line, as ``print_output_info`` in ``mindformers/core/callback/callback.py``
(0.7 - 1.9) logs it (``lr: ...`` only when a learning rate is known; ``loss: x`` in sink
mode, ``loss:[x/mean]`` otherwise; ``global_norm`` from 1.3, the throughput from 1.5;
separate ``*_loss:`` fields only for MoE/MTP models; the 0.x and PyNative trainer layouts
are in :mod:`msdoctor.replay.mindformers_releases`)::

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

from msdoctor.replay import mindformers_releases as releases
from msdoctor.replay.crashes import ErrorScan
from msdoctor.replay.numbers import flags, floats
from msdoctor.replay.recording import Block, FormatError, Recording
from msdoctor.replay.textfile import Progress, blocks
from msdoctor.wire.schema import INT64_MAX, INT64_MIN

NAME = "mindformers"
MARK = "{ Epoch:["
SAMPLES = " samples/s/p"

_ARR = r"(?:\[\s*([^\]\n,]*?)\s*\]|([^,\n]*))"        # numpy repr: inner of [x] or the bare text
_STEP = (
    r"\{ Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], "
    r"loss:\s*(?:\[([^/\]\n]*)/[^\]\n]*\]|([^,\n]*)), "
    r"(?:\w+_loss: [^,\n]*, )*"
    r"per_step_time: ([^,\n]*)ms, "
    r"(?:lr: " + _ARR + r", )?"
    r"overflow cond: ([^,\n]*), loss_scale: " + _ARR +
    r"(?:, global_norm:? " + _ARR + r")?"
    r"(?:, train_throughput_per_npu: ([^,\n]*)T)?[ \t]*$")
#: The step line's fields (from its mark to the end of the line).
STEP = re.compile(_STEP, re.M)
STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})")
PROGRESS = re.compile(r"\| ([^ \n|]+) samples/s/p")
#: A line of MindFormers' logger (the file handler's or the stdout handler's layout) or of
#: MindSpore's own (``[WARNING] ME(pid:tid,MainProcess):2025-01-01-10:00:00.123.456 [...]``).
LOGGER = re.compile(r"^\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [A-Z_]+\(\d+[,:][^)\n]*\):\d{4}-"
                    r"|^\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
                    r"\[[^\]\n]+:\d+\] \S+: "
                    r"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - mindformers[^\n]*?\[[^\]\n]+:\d+\] - "
                    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ", re.M)
#: A line that reports a training step (an epoch or step counter and a loss) in some layout.
STEPLIKE = re.compile(r"^[^\n]*(?:print_output_info: |\b[Ee]poch\b[^\n]*\b[Ss]tep\b)[^\n]*"
                      r"\b[Ll]oss\b[^\n]*$", re.M)


def sniff(text: str) -> bool:
    """True if ``text`` (the start of a file) holds a MindFormers step line (of any release)."""
    return STEP.search(text) is not None or releases.sniff(text)


def sniff_logger(text: str) -> bool:
    """True if ``text`` holds lines of MindFormers' or MindSpore's logger (a log without step
    lines yet: a job that died before its first step, msrun's scheduler log)."""
    return LOGGER.search(text) is not None


def read(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
         seq_length: Optional[int] = None) -> None:
    """Parse ``path`` into ``out`` (rank ``rank`` of ``run``): its step lines and its errors.

    Raises :class:`FormatError` for a log whose step lines all have a layout this reader does
    not know (another MindFormers release): nothing of it would be read.
    """
    scan = ErrorScan(path)
    steps = 0
    unknown: Optional[Tuple[int, str]] = None
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        scan.feed(text, first_line)
        if is_last:         # a line is complete only with its newline (as in the spool)
            if MARK in text:
                out.problems.note(f"{path}:{first_line}: unterminated last line skipped")
            continue
        found = [parse_block(text, path, first_line, out, seq_length),
                 releases.parse_block(text, path, first_line, out, _times)]
        for block in found:
            if block is not None:
                steps += len(block.steps)
                out.add(run, rank, path, block)
        if found == [None, None] and unknown is None and not steps:
            m = STEPLIKE.search(text)
            if m is not None:
                unknown = (first_line + text.count("\n", 0, m.start()), m.group(0).strip())
    out.add_errors(run, rank, scan)
    if not steps and unknown is not None:
        raise FormatError(
            f"{path}:{unknown[0]}: a training step line in a layout this msdoctor does not read "
            "(expected MindFormers 0.7-1.9 MFLossMonitor's '{ Epoch:[e/E], step:[s/S], loss..., "
            f"per_step_time: Nms, ..., overflow cond: ..., loss_scale: ...'; {releases.shapes()}), "
            f"got {unknown[1][:160]!r}")


def parse_block(text: str, path: str, first_line: int, out: Recording,
                seq_length: Optional[int]) -> Optional[Block]:
    """The step block of one text block (whole lines), problems recorded in ``out``.

    Only lines carrying the step line's mark are handed to the regex (one C-level
    ``findall`` over them, one tuple per line), so noise lines cost a substring test.
    """
    lines = text.split("\n")
    picked = [ln for ln in lines if MARK in ln]
    if not picked:
        return None
    rows = STEP.findall("\n".join(picked))
    if len(rows) != len(picked):            # some carry the mark but not the layout
        matched = [STEP.search(ln) for ln in picked]
        for ln, m in zip(picked, matched):
            if m is None:
                out.problems.add(path, _line_no(lines, ln, first_line, out),
                                 "not a complete MindFormers step line (expected '{ Epoch:[e/E], "
                                 "step:[s/S], loss..., per_step_time: Nms, ..., overflow cond: ..., "
                                 f"loss_scale: ...'), got {ln[ln.find(MARK):][:120]!r}")
        picked = [ln for ln, m in zip(picked, matched) if m is not None]
        rows = [m.groups(default="") for m in matched if m is not None]
        if not rows:
            return None
    cols = list(zip(*rows))
    steps, too_big = _step_numbers(cols[0], cols[3], cols[2])
    if too_big:                             # a located error each; the other lines are kept
        for row, value in too_big:
            out.problems.add(path, _line_no(lines, picked[row], first_line, out),
                             f"MindFormers step line, step: (epoch - 1) x steps per epoch + "
                             f"step = {value} does not fit in 64 bits; expected a step number "
                             f"up to {INT64_MAX}")
        keep = sorted(set(range(len(picked))) - {row for row, _ in too_big})
        if not keep:
            return None
        picked, rows = [picked[i] for i in keep], [rows[i] for i in keep]
        cols, steps = list(zip(*rows)), steps[keep]
    n = len(picked)

    def check(name: str, result: Tuple) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        values, mask, bad = result
        for row, message in bad:
            out.problems.add(path, _line_no(lines, picked[row], first_line, out),
                             f"MindFormers step line, {name}: {message}")
        return values, mask

    columns: Dict[str, Tuple[np.ndarray, Optional[np.ndarray]]] = {}
    columns["loss"] = check("loss", floats(_either(cols[4], cols[5])))
    ms, ms_mask = check("per_step_time", floats(cols[6]))
    columns["step_time_s"] = (ms / 1000.0, ms_mask)
    lr = _either(cols[7], cols[8])
    if lr.count("") != n:
        columns["lr"] = check("lr", floats(lr))
    columns["overflow"] = check("overflow cond", flags(cols[9]))
    columns["loss_scale"] = check("loss_scale", floats(_either(cols[10], cols[11])))
    columns["grad_norm"] = check("global_norm", floats(_either(cols[12], cols[13])))
    if seq_length:
        rate = _progress_rates(lines, picked, path, first_line, out)
        if rate is not None:
            with np.errstate(invalid="ignore"):
                tokens = rate[0] * float(seq_length) * columns["step_time_s"][0]
            mask = rate[1] if ms_mask is None else (rate[1] & ms_mask)
            columns["tokens"] = (tokens, None if mask.all() else mask)
    columns = {k: v for k, v in columns.items() if v[1] is None or v[1].any()}
    return Block(steps, _times(picked), columns)


def _step_numbers(epochs: Sequence[str], per_epoch: Sequence[str], steps: Sequence[str]
                  ) -> Tuple[np.ndarray, List[Tuple[int, int]]]:
    """``(epoch - 1) * steps_per_epoch + step`` per row as int64, and the rows (with their
    value) that do not fit in 64 bits: numpy when the digits cannot overflow, else exact
    Python integers row by row."""
    def digits(column: Sequence[str]) -> int:
        return max(map(len, column))

    if digits(epochs) + digits(per_epoch) <= 17 and digits(steps) <= 17:
        epoch = np.array(epochs, dtype=np.int64)
        return (epoch - 1) * np.array(per_epoch, dtype=np.int64) \
            + np.array(steps, dtype=np.int64), []
    values = [(int(e) - 1) * int(p) + int(s) for e, p, s in zip(epochs, per_epoch, steps)]
    too_big = [(row, v) for row, v in enumerate(values) if not INT64_MIN <= v <= INT64_MAX]
    return np.array([v if INT64_MIN <= v <= INT64_MAX else 0 for v in values],
                    dtype=np.int64), too_big


def _either(inner: Sequence[str], bare: Sequence[str]) -> List[str]:
    """Per row, the bracketed value's inside if the value was ``[...]``, else the bare text."""
    if inner.count("") == len(inner):
        return list(bare)
    return [a or b for a, b in zip(inner, bare)]


def _line_no(lines: List[str], line: str, first_line: int, out: Recording) -> int:
    if out.problems.full:                   # only counted from here on: skip the search
        return 0
    return first_line + lines.index(line)


def _progress_rates(lines: List[str], picked: List[str], path: str, first_line: int,
                    out: Recording) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """samples/s/p of the progress line that follows each step line, if any."""
    n = len(picked)
    found = [ln for ln in lines if SAMPLES in ln]
    if not found:
        return None
    if len(found) != n:                     # not one progress line per step line: by position
        at = {id(ln): i for i, ln in enumerate(lines)}
        step_at = np.array([at[id(ln)] for ln in picked])
        prog_at = np.array([at[id(ln)] for ln in found])
        owner = np.searchsorted(step_at, prog_at) - 1
    else:
        owner = np.arange(n)
    texts = [m.group(1) if m else "" for m in map(PROGRESS.search, found)]
    values, mask, bad = floats(texts)
    for row, message in bad:
        out.problems.add(path, _line_no(lines, found[row], first_line, out),
                         f"MindFormers progress line, samples/s/p: {message}")
    ok = owner >= 0 if mask is None else ((owner >= 0) & mask)
    rate = np.full(n, np.nan)
    has = np.zeros(n, dtype=bool)
    rate[owner[ok]] = values[ok]
    has[owner[ok]] = True
    return rate, has


def _times(lines: List[str]) -> np.ndarray:
    """Each line's timestamp (seconds since the epoch, local time), NaN if none.

    The timestamp sits at the same place in every line of one logging format: found in
    the first line, sliced out of all, parsed by numpy in one call; lines where that
    fails are searched one by one. The local-time offset of the first line is used for
    all (a DST change inside a log shifts later times by an hour).
    """
    n = len(lines)
    m = STAMP.search(lines[0])
    if m is None:
        return np.full(n, np.nan)
    a, b = m.start(1), m.end(1)
    try:
        seconds = np.array([ln[a:b] for ln in lines], dtype="datetime64[s]").astype(np.float64)
        millis = np.array([ln[b + 1:b + 4] for ln in lines], dtype=np.float64)
    except ValueError:
        seconds, millis = _times_slowly(lines)
    offset = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) - seconds[0]
    return seconds + millis / 1000.0 + offset


def _times_slowly(lines: List[str]) -> Tuple[np.ndarray, np.ndarray]:
    seconds, millis = np.full(len(lines), np.nan), np.zeros(len(lines))
    for i, ln in enumerate(lines):
        m = STAMP.search(ln)
        if m is not None:
            try:
                seconds[i] = np.datetime64(m.group(1).replace(" ", "T"), "s").astype(np.float64)
                millis[i] = float(m.group(2))
            except ValueError:
                pass
    return seconds, millis
