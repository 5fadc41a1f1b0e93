"""TensorBoard event files (``events.out.tfevents.*``), read with TensorBoard's own loader.

MindFormers writes them with tensorboardX's ``SummaryWriter`` when ``tensorboard_dir`` is set
(``mindformers/utils/tensorboard.py``): ``MFLossMonitor`` adds the scalars ``loss``,
``lm-loss``, ``grad-norm``, ``learning-rate``, ``loss-scale``, ``iteration-time`` (ms),
``throughput`` ... at the global step, and each again ``... vs samples`` (x = samples seen).
Records are read by ``tensorboard.backend.event_processing.event_file_loader.EventFileLoader``
(the loader TensorBoard itself uses; the ``tensorboard`` package, the ``tensorboard`` extra).

Scalars (``simple_value`` or a one-element tensor) map to event fields as the CSV exports do
(:func:`msdoctor.replay.tensorboard.field_of`); when two tags give the same field (``loss`` and
``lm-loss``) the tag named as the field wins and the other stays a named column; ``vs samples``
tags and non-scalar values (images, histograms) are skipped and said in the notes.

MindSpore's own ``SummaryRecord`` files are TFRecord-framed too, but TensorBoard's loader finds
their scalar values empty (another field number; measured with MindSpore 2.9.0): refused in one
line saying so.
"""
from __future__ import annotations

import os
import struct
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from msdoctor.replay.recording import Block, FormatError, Recording
from msdoctor.replay.tensorboard import SIGNALS, field_of, key_of, per_samples
from msdoctor.replay.textfile import Progress

NAME = "tfevents"
MARK = "tfevents"


def is_mindspore_summary(path: Path) -> bool:
    """True for a MindSpore ``SummaryRecord`` file (``events.out.events.summary.<t>.<rank>.<host>_MS``)."""
    return path.name.startswith("events.out.events.summary.")


def refuse_mindspore_summary(path: Path) -> FormatError:
    """The one-line error for a MindSpore ``SummaryRecord`` file."""
    return FormatError(
        f"{path}: a MindSpore SummaryRecord file (MindInsight's format): TFRecord-framed, but its "
        "scalars are not in TensorBoard's field, so they cannot be read; expected TensorBoard "
        "event files (events.out.tfevents.*, MindFormers' tensorboard_dir) or MindFormers' "
        "info.log")


def is_event_file(path: Path) -> bool:
    """True for a file TensorBoard would read as events (its name holds ``tfevents``)."""
    return MARK in path.name and path.is_file()


Rows = Dict[str, List[Tuple[int, float, float]]]


def _load(path: str) -> Tuple[Rows, List[str], int]:
    """(tag -> [(step, wall time, value)], skipped non-scalar tags, bytes of whole records) of
    one event file (the loader stops quietly at a corrupt or cut record: the byte count says)."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import (
            EventFileLoader,
            RawEventFileLoader,
        )
        from tensorboard.util import tensor_util
    except ImportError:
        raise FormatError(f"{path}: a TensorBoard event file; reading it needs the tensorboard "
                          "package (pip install 'msdoctor[tensorboard]' or pip install tensorboard)"
                          ) from None
    rows: Rows = defaultdict(list)
    skipped: List[str] = []
    try:
        for event in EventFileLoader(path).Load():
            if event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    x = float(value.simple_value)
                elif kind == "tensor":
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "fiub":
                        if value.tag not in skipped:
                            skipped.append(value.tag)
                        continue
                    x = float(array.reshape(-1)[0])
                else:
                    if value.tag not in skipped:
                        skipped.append(value.tag)
                    continue
                rows[value.tag].append((int(event.step), float(event.wall_time), x))
        whole = sum(16 + len(record) for record in RawEventFileLoader(path).Load())
    except Exception as exc:     # the loader's own errors (a corrupt record, a bad proto)
        raise FormatError(f"{path}: not a readable TensorBoard event file ({type(exc).__name__}: "
                          f"{exc}); expected TFRecord-framed Event protos as SummaryWriter writes"
                          ) from None
    return rows, skipped, whole


def _tail(path: str, whole: int, out: Recording) -> None:
    """Say what follows the last whole record: a record cut by a writer still at work (a
    note), or a corrupt one (a problem: what follows it is not read)."""
    size = os.path.getsize(path)
    if size <= whole:
        return
    with open(path, "rb") as handle:
        handle.seek(whole)
        head = handle.read(8)
    length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
    if length is not None and whole + 16 + length <= size:
        out.problems.add(path, 0, f"corrupt record at byte {whole} (bad checksum or length); the "
                                  f"{size - whole} bytes from there are not read")
    else:
        out.problems.note(f"{path}: the last record is cut short (a writer still at work); "
                          f"{size - whole} bytes skipped")


def _chosen(tags: List[str]) -> Dict[str, Tuple[str, float]]:
    """tag -> (column, scale): per event field the tag named as the field, else the first."""
    by_field: Dict[str, List[str]] = defaultdict(list)
    for tag in tags:
        by_field[field_of(tag)[0]].append(tag)
    out: Dict[str, Tuple[str, float]] = {}
    for name, group in by_field.items():
        winner = next((t for t in group if key_of(t) == name), group[0])
        for tag in group:
            out[tag] = field_of(tag) if tag == winner else (key_of(tag), 1.0)
    return out


def read(path: str, run: str, rank: int, out: Recording, progress: Progress = None,
         seq_length: Optional[int] = None) -> None:
    """The scalars of one event file into ``out`` (merged by step with the rank's other files)."""
    rows, skipped, whole = _load(path)
    if whole == 0:
        raise FormatError(f"{path}: not a readable TensorBoard event file (not one whole record); "
                          "expected TFRecord-framed Event protos as SummaryWriter "
                          "writes")
    _tail(path, whole, out)
    if progress is not None:
        progress(os.path.getsize(path))
    steps_tags = [tag for tag in rows if not per_samples(tag)]
    samples = [tag for tag in rows if per_samples(tag)]
    if samples:
        out.problems.note(f"{path}: {len(samples)} tags plotted against samples skipped "
                          f"(e.g. {samples[0]!r}); their ' vs samples'-less twins are read")
    if skipped:
        out.problems.note(f"{path}: non-scalar tags skipped: {', '.join(skipped[:5])}")
    known = {name for name, _ in SIGNALS.values()}
    for tag, (name, scale) in _chosen(steps_tags).items():
        if name not in known and name not in out.unknown_columns:
            out.unknown_columns.append(name)
        step, t, value = (np.array(c) for c in zip(*rows[tag]))
        out.merge_by_step = True
        out.add(run, rank, path, Block(step.astype(np.int64), t.astype(np.float64),
                                       {name: (value.astype(np.float64) * scale, None)}))
