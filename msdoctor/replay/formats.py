"""Which reader reads a path: format names, autodetection, and ranks from file paths."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional, Tuple

from msdoctor.replay import tensorboard_events
from msdoctor.replay.recording import FormatError
from msdoctor.replay.tree import ROTATED
from msdoctor.wire.layout import is_run_dir

#: Formats in the order autodetection tries them.
FORMATS = ("spool", "mindformers", "mindspore", "tensorboard", "tfevents", "csv", "jsonl")
SNIFF_CHARS = 1 << 20

Reader = Callable[..., None]
#: The formats read by a reader of :mod:`msdoctor.replay` (a spool is read by the tailer).
READERS = ("mindformers", "mindspore", "tensorboard", "tfevents", "csv", "jsonl")


def reader(name: str) -> Reader:
    """The reader of format ``name`` (imported when first needed: a spool replay never
    loads the log readers)."""
    from msdoctor.replay import mindformers, mindspore, table, tensorboard

    return {"mindformers": mindformers.read, "mindspore": mindspore.read,
            "tensorboard": tensorboard.read, "tfevents": tensorboard_events.read,
            "csv": table.read_csv, "jsonl": table.read_jsonl}[name]


def _sniffers() -> Tuple[Tuple[str, Callable[[str], bool]], ...]:
    from msdoctor.replay import mindformers, mindspore, table, tensorboard

    return (("mindformers", mindformers.sniff), ("mindspore", mindspore.sniff),
            ("tensorboard", tensorboard.sniff), ("jsonl", table.sniff_jsonl),
            ("csv", table.sniff_csv), ("mindformers", mindformers.sniff_logger))


_RANK = (re.compile(r"rank[_-]?(\d+)"), re.compile(r"worker[_-]?(\d+)"),
         re.compile(r"device[_-]?(\d+)"))


def is_spool(path: Path) -> bool:
    """A run directory (``events/rank-N.jsonl``)."""
    return is_run_dir(path)


def rank_of(path: Path, hint: Optional[int] = None) -> int:
    """The rank a log file belongs to: ``--rank`` if given, else from its path
    (``rank_3/info.log``, ``worker_3.log``, ``device3/...``), else 0."""
    if hint is not None:
        return hint
    for part in reversed(path.parts):
        for pattern in _RANK:
            m = pattern.search(part)
            if m:
                return int(m.group(1))
    return 0


def file_order(path: Path) -> Tuple[str, int]:
    """Sort key putting rotated logs (``info.log.3`` older than ``info.log.1`` older than
    ``info.log``) in time order within a directory."""
    m = ROTATED.search(path.name)
    if m:
        return (str(path.parent / path.name[:m.start() + 4]), -int(m.group(1)))
    return (str(path), 0)


def _head(path: Path) -> str:
    with open(path, "r", encoding="utf-8", errors="replace", newline=None) as handle:
        return handle.read(SNIFF_CHARS)


def detect(path: Path) -> str:
    """The format of ``path``; raises :class:`FormatError` when none fits."""
    if is_spool(path):
        return "spool"
    if path.is_dir():
        raise FormatError(f"{path}: a directory without events/rank-N.jsonl nor log files")
    if tensorboard_events.is_event_file(path):
        return "tfevents"
    if tensorboard_events.is_mindspore_summary(path):
        raise tensorboard_events.refuse_mindspore_summary(path)
    head = _head(path)
    if path.name.endswith(".jsonl") and path.parent.name == "events" and '"type"' in head[:4096]:
        return "spool"
    for name, sniff in _sniffers():
        if sniff(head):
            return name
    first = next(((i, ln) for i, ln in enumerate(head.splitlines(), 1) if ln.strip()), None)
    where = (f"first unreadable line {path}:{first[0]}: {first[1][:160]!r}" if first
             else "the file is empty")
    if first and first[0] == 1 and ("," in first[1] or "\t" in first[1]):
        where += (" (a CSV header needs a 'step' column and event field names, docs/formats/csv.md; "
                  "a TensorBoard export starts 'Wall time,Step,Value')")
    tried = ", ".join(f for f in FORMATS if f != tensorboard_events.NAME)
    raise FormatError(f"{path}: unknown log format (tried {tried}; a TensorBoard event file is "
                      f"known by 'tfevents' in its name); {where}")
