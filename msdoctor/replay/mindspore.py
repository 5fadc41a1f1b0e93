"""MindSpore's built-in ``LossMonitor`` and ``TimeMonitor`` output (printed to stdout).

From ``mindspore/train/callback/_loss_monitor.py`` and ``_time_monitor.py`` (2.9)::

    epoch: %s step: %s, loss is %s                       # LossMonitor, every per_print_times
    ValueError: In epoch: {} step: {}, loss is NAN or INF, training process cannot continue, ...
    {Mode} epoch time: {:5.3f} ms, per step time: {:5.3f} ms[ (data time: {:5.3f} ms)]

``step`` in these lines counts within the epoch (``(cur_step_num - 1) % batch_num + 1``);
the global step is ``(epoch - 1) * steps_per_epoch + step`` with steps_per_epoch the
largest in-epoch step seen (exact with ``per_print_times=1``). LossMonitor raises on a
NaN/Inf loss instead of printing it: the ``ValueError`` line becomes a step with a NaN
loss. A TimeMonitor line gives ``step_time_s`` (and ``data_wait_s``) to the steps of the
epoch it closes. The lines carry no timestamps: times are synthesised from step times.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

import numpy as np

from msdoctor.replay.numbers import floats
from msdoctor.replay.recording import Block, Recording
from msdoctor.replay.textfile import Progress, blocks
from msdoctor.wire.schema import INT64_MAX, INT64_MIN

NAME = "mindspore"

LINE = re.compile(
    r"In epoch: (\d+) step: (\d+), loss is NAN or INF"
    r"|epoch: (\d+) step: (\d+), loss is ([^\n]*?)[ \t]*$"
    r"|epoch time: ([^,\n]*) ms, per step time: ([^ \n]*) ms(?: \(data time: ([^ \n)]*) ms\))?",
    re.M)


def sniff(text: str) -> bool:
    """True if ``text`` holds a LossMonitor line."""
    return any(m.group(3) or m.group(1) for m in LINE.finditer(text))


def read(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
         seq_length: Optional[int] = None) -> None:
    """Parse ``path`` into ``out``."""
    epochs: List[int] = []
    in_epoch: List[int] = []
    losses: List[Optional[str]] = []
    lines: List[int] = []
    timing: List[Tuple[int, Optional[str], Optional[str]]] = []   # (row count then, ms, data ms)
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        counted, line = 0, first_line
        for m in LINE.finditer(text):
            nan_epoch, nan_step, epoch, step, loss, _, per_step, data = m.groups()
            if nan_epoch is not None:
                if epochs and (epochs[-1], in_epoch[-1]) == (int(nan_epoch), int(nan_step)):
                    continue                      # the traceback repeats the message
                epoch, step, loss = nan_epoch, nan_step, "nan"
            if epoch is None and per_step is None:
                continue
            line += text.count("\n", counted, m.start())
            counted = m.start()
            if is_last:     # a line is complete only with its newline (as in the spool)
                out.problems.note(f"{path}:{line}: unterminated last line skipped")
                continue
            if epoch is not None:
                epochs.append(int(epoch))
                in_epoch.append(int(step))
                losses.append(loss)
                lines.append(line)
            else:
                timing.append((len(epochs), per_step, data))
    if not epochs:
        return
    values, mask, bad = floats(losses)
    for row, message in bad:
        out.problems.add(path, lines[row], f"LossMonitor line, loss: {message}")
    per_epoch = max(in_epoch)
    numbers = [(e - 1) * per_epoch + s for e, s in zip(epochs, in_epoch)]
    keep = [i for i, v in enumerate(numbers) if INT64_MIN <= v <= INT64_MAX]
    if len(keep) < len(numbers):          # a located error each; the other lines are kept
        for i in sorted(set(range(len(numbers))) - set(keep)):
            out.problems.add(path, lines[i], f"LossMonitor line, step: (epoch - 1) x steps per "
                                             f"epoch + step = {numbers[i]} does not fit in 64 "
                                             f"bits; expected a step number up to {INT64_MAX}")
        if not keep:
            return
    steps = np.array([numbers[i] for i in keep], dtype=np.int64)
    step_ms = np.full(len(numbers), np.nan)
    data_ms = np.full(len(numbers), np.nan)
    begin = 0
    for end, per_step, data in timing:
        for target, text, what in ((step_ms, per_step, "per step time"),
                                   (data_ms, data, "data time")):
            if text is None:
                continue
            v, m, bad = floats([text])
            if bad:
                out.problems.add(path, lines[end - 1] if end else 0,
                                 f"TimeMonitor line after this one, {what}: {bad[0][1]}")
            elif m is None:
                target[begin:end] = v[0]
        begin = end
    rows = np.asarray(keep, dtype=np.intp)           # the lines whose step number fits
    columns = {"loss": (values[rows], None if mask is None else mask[rows])}
    for name, ms in (("step_time_s", step_ms[rows]), ("data_wait_s", data_ms[rows])):
        have = ~np.isnan(ms)
        if have.any():
            columns[name] = (ms / 1000.0, None if have.all() else have)
    out.add(run, rank, path, Block(steps, np.full(len(steps), np.nan), columns))
