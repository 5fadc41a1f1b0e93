"""TensorBoard scalar exports: the CSV the TensorBoard UI downloads for one scalar of one run.

Layout (TensorBoard's "Download CSV")::

    Wall time,Step,Value
    1750000000.123,1,5.54

one file per scalar, named ``run-<run>-tag-<tag>.csv`` (``/`` in the tag becomes ``_``). The
tag, read from the file name, says which signal the values are; the files of one rank are
merged by step. MindFormers' ``MFLossMonitor`` tags (``loss``, ``grad-norm``, ``learning-rate``,
``loss-scale``, ``iteration-time`` in ms) and the common ``train/loss``-style ones map to event
fields; other tags are kept as unknown columns; ``... vs samples`` tags (x = samples, not
steps) are refused.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from msdoctor.replay.numbers import floats
from msdoctor.replay.recording import Block, FormatError, Recording
from msdoctor.replay.textfile import Progress, blocks

NAME = "tensorboard"
HEADER = ["Wall time", "Step", "Value"]
_TAG = re.compile(r"tag-(.+?)\.csv\Z")

#: tag (lower case, ``/`` and ``-`` as ``_``, any ``train_`` prefix dropped) -> (field, scale)
SIGNALS: Dict[str, Tuple[str, float]] = {
    "loss": ("loss", 1.0), "lm_loss": ("loss", 1.0), "train_loss": ("loss", 1.0),
    "grad_norm": ("grad_norm", 1.0), "global_norm": ("grad_norm", 1.0),
    "learning_rate": ("lr", 1.0), "lr": ("lr", 1.0),
    "loss_scale": ("loss_scale", 1.0), "scale": ("loss_scale", 1.0),
    "iteration_time": ("step_time_s", 1e-3),       # MindFormers writes milliseconds
    "step_time_s": ("step_time_s", 1.0), "tokens_per_s": ("tokens_per_s", 1.0),
}


def sniff(text: str) -> bool:
    """True if ``text`` starts with TensorBoard's scalar-export header."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return [c.strip().strip('"') for c in line.split(",")] == HEADER


def signal_of(path: str) -> Tuple[str, float]:
    """(event field, scale) of the scalar in ``path``, from the tag in its name."""
    m = _TAG.search(Path(path).name)
    if m is None:
        raise FormatError(
            f"{path}: a TensorBoard scalar export (Wall time,Step,Value) whose file name does not "
            "say which scalar it holds (expected TensorBoard's name 'run-<run>-tag-<tag>.csv', "
            "e.g. run-.-tag-loss.csv or run-rank_0-tag-grad-norm.csv)")
    tag = m.group(1)
    if tag.endswith("vs samples") or tag.endswith("vs_samples"):
        raise FormatError(f"{path}: tag {tag!r} is plotted against samples, not steps; export "
                          f"the tag without ' vs samples'")
    key = re.sub(r"[^a-z0-9]+", "_", tag.lower()).strip("_")
    key = key[len("train_"):] if key.startswith("train_") and key[6:] in SIGNALS else key
    return SIGNALS.get(key, (key, 1.0))


def read(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
         seq_length: Optional[int] = None) -> None:
    """One scalar of one rank into ``out`` (merged by step with the rank's other scalars)."""
    name, scale = signal_of(path)
    rows: List[List[str]] = []
    lines: List[int] = []
    header_seen = False
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        if is_last:
            out.problems.note(f"{path}:{first_line}: unterminated last line skipped")
            continue
        for offset, cells in enumerate(csv.reader(text.split("\n")[:-1])):
            if not cells:
                continue
            if not header_seen:
                header_seen = True
                continue
            if len(cells) != 3:
                out.problems.add(path, first_line + offset,
                                 f"expected 3 cells (Wall time,Step,Value), got {len(cells)}")
                continue
            rows.append(cells)
            lines.append(first_line + offset)
    if not rows:
        return
    known = {field for field, _ in SIGNALS.values()}
    if name not in known and name not in out.unknown_columns:
        out.unknown_columns.append(name)
    cols = list(zip(*rows))
    parsed = []
    for label, texts in (("Wall time", cols[0]), ("Step", cols[1]), ("Value", cols[2])):
        values, mask, bad = floats(list(texts))
        for row, message in bad:
            out.problems.add(path, lines[row], f"{label}: {message}")
        parsed.append((values, mask))
    (t, _), (step, step_mask), (value, value_mask) = parsed
    ok = np.isfinite(step) & (step == np.round(step))
    if step_mask is not None:
        ok &= step_mask
    mask = None if value_mask is None else value_mask[ok]
    out.merge_by_step = True
    out.add(run, rank, path, Block(step[ok].astype(np.int64), t[ok],
                                   {name: (value[ok] * scale, mask)}))
